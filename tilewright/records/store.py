"""Tuning records in SQLite: every measurement, committed as it happens, keyed
by workload and target. JSONL export/import/merge for moving records around.
`with tw.records(path):` makes `tw.build(outputs, args)` use the best one."""

from __future__ import annotations

import contextvars
import json
import math
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..config import cache_dir
from ..errors import TilewrightError
from ..stats import median
from .validate import point_problem, record_problem

# How long a write waits for another process's lock before the measurement goes to a side file.
LOCK_TIMEOUT_S = 30.0
_ATTEMPT_S = 0.5  # sqlite's own busy wait per attempt; between attempts we report and back off

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
CREATE TABLE IF NOT EXISTS model_trials (
    model TEXT NOT NULL,
    target TEXT NOT NULL,
    trials INTEGER NOT NULL,
    PRIMARY KEY (model, target)
);
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
        return median(self.costs)

    def to_json(self) -> str:
        d = asdict(self)
        d["costs"] = list(self.costs)
        return json.dumps(d)

    @staticmethod
    def from_json(text: str) -> Record:
        """Parse and validate one record; ValueError says which field is bad."""
        d = json.loads(text)
        bad = record_problem(d)
        if bad:
            raise ValueError(bad)
        d["costs"] = tuple(float(c) for c in d["costs"])
        return Record(**d)


def default_path() -> Path:
    return cache_dir() / "records.sqlite"


_INSERT = ("INSERT OR IGNORE INTO records (workload, target, point, trace, costs, cost, error_kind, error_msg, "
           "method, seed, run_id, version, time, description) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _row(r: Record) -> tuple:
    cost = None if math.isinf(r.cost) else r.cost
    return (r.workload, r.target, r.point, r.trace, json.dumps(list(r.costs)), cost, r.error_kind, r.error_msg,
            r.method, r.seed, r.run_id, r.version, r.time, r.description)


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class Records:
    """An open record store (SQLite file). Each `add` is its own committed
    transaction. A database locked by another process is waited for up to
    `lock_timeout` seconds (with a warning on stderr); past that, `add` saves
    the record to `side_path` (JSONL, next to the database) and raises. One
    store may be shared by threads (tasks tuned at once): each transaction
    holds the store's lock."""

    def __init__(self, path=None, lock_timeout: float = LOCK_TIMEOUT_S):
        self.path = Path(path) if path is not None else default_path()
        self.lock_timeout = float(lock_timeout)
        self.side_path = self.path.with_name(self.path.name + ".unsaved.jsonl")
        self._tokens: list = []  # one per `with` this store is entered by (a compile inside the user's own)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=min(_ATTEMPT_S, self.lock_timeout),
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise TilewrightError(f"cannot open the records database {self.path}: {exc}; pass another path "
                                  "(records=...) or set TILEWRIGHT_CACHE_DIR to a writable directory") from None
        self._retry(lambda: self._db.executescript(SCHEMA), "open")

    def _retry(self, work, what: str):
        """Run `work` and commit, retrying while another process holds the lock.
        Raises sqlite3.OperationalError only for a lock held past the bound."""
        start, warned, pause = time.monotonic(), False, 0.05
        while True:
            try:
                with self._lock:
                    out = work()
                    self._db.commit()
                return out
            except sqlite3.OperationalError as exc:
                self._rollback()
                if not _locked(exc):
                    raise TilewrightError(f"records database {self.path}: {what} failed ({exc}); "
                                          "check the file and its directory") from None
                waited = time.monotonic() - start
                if waited >= self.lock_timeout:
                    raise
                if not warned:
                    sys.stderr.write(f"tilewright: records database {self.path} is locked by another process; "
                                     f"retrying for up to {self.lock_timeout:.0f}s\n")
                    warned = True
                time.sleep(min(pause, max(0.0, self.lock_timeout - waited)))
                pause = min(pause * 2, 1.0)
            except sqlite3.DatabaseError as exc:  # corrupt file, disk full, ...
                self._rollback()
                raise TilewrightError(f"records database {self.path}: {what} failed ({exc}); "
                                      "move the file aside or pass another records path") from None

    def _rollback(self) -> None:
        try:
            self._db.rollback()
        except sqlite3.Error:
            pass

    def _read(self, sql: str, args=()) -> list:
        try:
            return self._retry(lambda: self._db.execute(sql, args).fetchall(), "reading")
        except sqlite3.OperationalError:
            raise TilewrightError(f"records database {self.path} stayed locked for {self.lock_timeout:.0f}s; "
                                  "retry when the other tilewright process is done") from None

    def add(self, r: Record) -> None:
        """Insert and commit at once: an interrupted run loses nothing measured.
        If the lock is not released within `lock_timeout`, the record is appended
        to `side_path` and a TilewrightError says how to import it."""
        bad = record_problem({**asdict(r), "costs": list(r.costs)})
        if bad:
            raise TilewrightError(f"not adding a malformed record to {self.path} ({bad}): {r.to_json()[:200]}")
        try:
            self._retry(lambda: self._db.execute(_INSERT, _row(r)), "adding a record")
        except sqlite3.OperationalError:
            with open(self.side_path, "a") as f:
                f.write(r.to_json() + "\n")
            raise TilewrightError(
                f"records database {self.path} stayed locked by another process for {self.lock_timeout:.0f}s; "
                f"the measurement was saved to {self.side_path}: import it with `tilewright records import "
                f"{self.side_path}` once the other process is done") from None

    def _rows(self, where: str = "", args=(), order: str = "id") -> list[Record]:
        """Rows as Records; a row whose point or costs are malformed (written by a
        foreign or older tool) is left out, so no caller meets it."""
        rows = self._read(
            "SELECT workload, target, point, trace, costs, error_kind, error_msg, method, seed, run_id, version, "
            f"time, description FROM records {where} ORDER BY {order}", args)
        out = []
        for (w, t, p, tr, c, ek, em, m, s, rid, v, tm, desc) in rows:
            costs = _costs(c)
            if costs is None or point_problem(p) is not None:
                continue
            out.append(Record(w, t, p, tr, costs, ek, em, m, s, rid, v, tm, desc))
        return out

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

    def best_trace(self, workload: str, target: str):
        """The parsed trace (JSON) of the fastest point of this workload on this target, or None."""
        for r in self.best(workload, target):
            return json.loads(r.trace)
        return None

    def best(self, workload: str, target: str, k: int = 1) -> list[Record]:
        """The k fastest points of this workload on this target, one record each: its
        latest successful record carrying the costs of all its successful records, so
        `cost` is the median over every time of the point (a time a noisy machine
        flattered once does not beat a point re-timed several times). A point with any
        `wrong_result` record never ranks: one wrong output disqualifies a kernel."""
        rows = self._rows("WHERE workload = ? AND target = ?", (workload, target))
        by_point: dict[str, list[Record]] = {}
        for r in rows:
            by_point.setdefault(r.point, []).append(r)
        ranked = []
        for rs in by_point.values():
            if any(r.error_kind == "wrong_result" for r in rs):
                continue
            ok = [r for r in rs if r.error_kind == "none" and r.costs]
            if ok:
                ranked.append(replace(ok[-1], costs=tuple(c for r in ok for c in r.costs)))
        return sorted(ranked, key=lambda r: r.cost)[:max(0, int(k))]

    def measurements(self, target: str) -> list[tuple[str, str, tuple[float, ...], str]]:
        """(workload, point JSON, costs, error kind) of every record on `target`, oldest first, without
        the traces: what a cost model trains on, read cheaply from a large store."""
        rows = self._read("SELECT workload, point, costs, error_kind FROM records WHERE target = ? ORDER BY id",
                          (target,))
        return [(w, p, costs, ek) for w, p, c, ek in rows if (costs := _costs(c)) is not None]

    def workloads(self) -> list[tuple[str, str, str, int, float | None]]:
        """(workload, target, description, measurements, best cost) per tuned pair."""
        return self._read("SELECT workload, target, MAX(description), COUNT(*), MIN(cost) FROM records "
                          "GROUP BY workload, target ORDER BY MAX(time) DESC")

    def export_jsonl(self, path, workload: str | None = None) -> int:
        rows = self.query(workload)
        with open(path, "w") as f:
            for r in rows:
                f.write(r.to_json() + "\n")
        return len(rows)

    def import_jsonl(self, path) -> int:
        """Merge records from a JSONL file; duplicates are skipped. Every line is
        validated first; a bad one rejects the whole file (`file:line: reason`) and
        the database is left unchanged: all lines go in as one transaction."""
        new = []
        try:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        new.append(Record.from_json(line))
                    except ValueError as exc:  # JSONDecodeError and field checks
                        raise TilewrightError(f"{path}:{n}: not a tilewright record ({exc}); nothing was "
                                              "imported") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise TilewrightError(f"cannot read records file {path}: {exc}") from None
        before = self.count()
        try:
            self._retry(lambda: self._db.executemany(_INSERT, [_row(r) for r in new]), "import")
        except sqlite3.OperationalError:
            raise TilewrightError(f"records database {self.path} stayed locked for {self.lock_timeout:.0f}s; "
                                  f"nothing was imported from {path}: retry when the other process is done") from None
        return self.count() - before

    def count(self) -> int:
        return self._read("SELECT COUNT(*) FROM records")[0][0]

    def model_trials(self, model: str, target: str) -> int | None:
        """Trials the task scheduler has spent on `model` (a key of its task set) on `target`,
        or None where it never tuned it in this store."""
        rows = self._read("SELECT trials FROM model_trials WHERE model = ? AND target = ?", (model, target))
        return rows[0][0] if rows else None

    def add_model_trials(self, model: str, target: str, n: int) -> None:
        """Count `n` more trials spent on `model` on `target` (committed at once, as records are)."""
        try:
            self._retry(lambda: self._db.execute(
                "INSERT INTO model_trials (model, target, trials) VALUES (?, ?, ?) "
                "ON CONFLICT (model, target) DO UPDATE SET trials = trials + excluded.trials",
                (model, target, int(n))), "counting a model's trials")
        except sqlite3.OperationalError:
            raise TilewrightError(f"records database {self.path} stayed locked for {self.lock_timeout:.0f}s "
                                  "while counting a model's trials; the measurements themselves are saved") from None

    def close(self) -> None:
        self._db.close()

    # `with tw.records(path):` -> builds of bare tensors use the best record
    def __enter__(self):
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *exc):
        _ACTIVE.reset(self._tokens.pop())


_ACTIVE: contextvars.ContextVar[Records | None] = contextvars.ContextVar("tilewright_records", default=None)


def active_records() -> Records | None:
    return _ACTIVE.get()


def open_records(records=None) -> Records:
    """The store a tuning writes to: `records` itself (a Records), the file at that path, else the store
    of the enclosing `with tw.records(...)`, else the user cache."""
    if isinstance(records, Records):
        return records
    if records is None and _ACTIVE.get() is not None:
        return _ACTIVE.get()
    return Records(records)


def records(path=None) -> Records:
    """Open a record store (default: the user cache dir); use as a context manager."""
    return Records(path)


def now() -> float:
    return time.time()


def _costs(text) -> tuple[float, ...] | None:
    """A stored costs column as floats, or None when it is not a list of numbers."""
    try:
        costs = json.loads(text)
        return tuple(float(c) for c in costs) if isinstance(costs, list) else None
    except (TypeError, ValueError):
        return None
