"""Tuning records in SQLite: every measurement, committed as it happens, keyed
by workload and target. JSONL export/import/merge for moving records around.
`with tw.records(path):` makes `tw.build(outputs, args)` use the best one."""

from __future__ import annotations

import contextvars
import json
import math
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..config import cache_dir
from ..errors import TilewrightError

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload TEXT NOT NULL,
    target TEXT NOT NULL,
    point TEXT NOT NULL,
    trace TEXT NOT NULL,
    costs TEXT NOT NULL,
    cost REAL,
    error_kind TEXT NOT NULL,
    error_msg TEXT NOT NULL,
    method TEXT NOT NULL,
    seed INTEGER,
    run_id TEXT NOT NULL,
    version TEXT NOT NULL,
    time REAL NOT NULL,
    description TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS by_workload ON records (workload, target, cost);
CREATE UNIQUE INDEX IF NOT EXISTS no_duplicates ON records (workload, target, point, run_id, time);
"""


@dataclass(frozen=True)
class Record:
    workload: str
    target: str
    point: str  # JSON of the space point
    trace: str  # JSON of the schedule trace
    costs: tuple[float, ...]
    error_kind: str
    error_msg: str
    method: str
    seed: int | None
    run_id: str
    version: str
    time: float
    description: str = ""

    @property
    def cost(self) -> float:
        if self.error_kind != "none" or not self.costs:
            return math.inf
        ordered = sorted(self.costs)
        return ordered[len(ordered) // 2]

    def to_json(self) -> str:
        d = asdict(self)
        d["costs"] = list(self.costs)
        return json.dumps(d)

    @staticmethod
    def from_json(text: str) -> Record:
        d = json.loads(text)
        d["costs"] = tuple(d["costs"])
        return Record(**d)


def default_path() -> Path:
    return cache_dir() / "records.sqlite"


class Records:
    """An open record store (SQLite file)."""

    def __init__(self, path=None):
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30)
        self._db.executescript(SCHEMA)
        self._db.commit()
        self._token = None

    def add(self, r: Record) -> None:
        """Insert and commit at once: an interrupted run loses nothing measured."""
        cost = None if math.isinf(r.cost) else r.cost
        self._db.execute(
            "INSERT OR IGNORE INTO records (workload, target, point, trace, costs, cost, error_kind, error_msg, "
            "method, seed, run_id, version, time, description) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r.workload, r.target, r.point, r.trace, json.dumps(list(r.costs)), cost, r.error_kind, r.error_msg,
             r.method, r.seed, r.run_id, r.version, r.time, r.description),
        )
        self._db.commit()

    def _rows(self, where: str = "", args=(), order: str = "id") -> list[Record]:
        cur = self._db.execute(
            "SELECT workload, target, point, trace, costs, error_kind, error_msg, method, seed, run_id, version, "
            f"time, description FROM records {where} ORDER BY {order}", args)
        return [Record(w, t, p, tr, tuple(json.loads(c)), ek, em, m, s, rid, v, tm, desc)
                for (w, t, p, tr, c, ek, em, m, s, rid, v, tm, desc) in cur.fetchall()]

    def query(self, workload: str | None = None, target: str | None = None) -> list[Record]:
        conds, args = [], []
        if workload is not None:
            conds.append("workload = ?")
            args.append(workload)
        if target is not None:
            conds.append("target = ?")
            args.append(target)
        where = ("WHERE " + " AND ".join(conds)) if conds else ""
        return self._rows(where, tuple(args))

    def best(self, workload: str, target: str, k: int = 1) -> list[Record]:
        """The k fastest points of this workload on this target, one successful record
        each: a point measured more than once ranks by its median record (a time a noisy
        machine flattered once does not beat a point re-timed several times)."""
        rows = self._rows("WHERE workload = ? AND target = ? AND cost IS NOT NULL", (workload, target))
        by_point: dict[str, list[Record]] = {}
        for r in rows:
            by_point.setdefault(r.point, []).append(r)
        medians = [sorted(rs, key=lambda r: r.cost)[(len(rs) - 1) // 2] for rs in by_point.values()]
        return sorted(medians, key=lambda r: r.cost)[:max(0, int(k))]

    def workloads(self) -> list[tuple[str, str, str, int, float | None]]:
        """(workload, target, description, measurements, best cost) per tuned pair."""
        cur = self._db.execute(
            "SELECT workload, target, MAX(description), COUNT(*), MIN(cost) FROM records "
            "GROUP BY workload, target ORDER BY MAX(time) DESC")
        return cur.fetchall()

    def export_jsonl(self, path, workload: str | None = None) -> int:
        rows = self.query(workload)
        with open(path, "w") as f:
            for r in rows:
                f.write(r.to_json() + "\n")
        return len(rows)

    def import_jsonl(self, path) -> int:
        """Merge records from a JSONL file; duplicates are skipped."""
        before = self.count()
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    self.add(Record.from_json(line))
                except (ValueError, TypeError, KeyError) as exc:
                    raise TilewrightError(f"{path}:{n}: not a tilewright record ({exc})") from None
        return self.count() - before

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    # `with tw.records(path):` -> builds of bare tensors use the best record
    def __enter__(self):
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc):
        _ACTIVE.reset(self._token)


_ACTIVE: contextvars.ContextVar[Records | None] = contextvars.ContextVar("tilewright_records", default=None)


def active_records() -> Records | None:
    return _ACTIVE.get()


def records(path=None) -> Records:
    """Open a record store (default: the user cache dir); use as a context manager."""
    return Records(path)


def now() -> float:
    return time.time()
