"""Loop-nest features of measured schedules, kept beside the records.

A record names its workload by a hash and its schedule by a trace; without
the workload's program its features cannot be computed again. So the tuner
stores each measured schedule's feature vector as it measures it, in a small
SQLite file next to the records database (`records.sqlite` ->
`records.sqlite.features`), keyed by workload, target, point and feature
version; the cost model of a later run on the same target trains on them,
whatever the workload (transfer). It is a cache: a store that cannot be
opened or written leaves the model to the current run's own measurements,
never fails a tuning run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from .features import FEATURE_VERSION, N_FEATURES

SCHEMA = """
CREATE TABLE IF NOT EXISTS features (
    workload TEXT NOT NULL,
    target TEXT NOT NULL,
    point TEXT NOT NULL,
    version INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (workload, target, point, version)
);
"""


def features_path(records_path) -> Path:
    p = Path(records_path)
    return p.with_name(p.name + ".features")


class FeatureStore:
    """Feature vectors by (workload, target, point JSON) for this FEATURE_VERSION."""

    def __init__(self, path):
        self.path = Path(path)
        self.error = ""
        self._db = None
        try:
            self._db = sqlite3.connect(str(self.path), timeout=5.0)
            self._db.executescript(SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            self.error = f"feature cache {self.path} unavailable ({exc})"
            self._db = None

    @property
    def ok(self) -> bool:
        return self._db is not None

    def put_many(self, rows) -> int:
        """Store (workload, target, point JSON, vector) rows; returns how many were written (0 on error)."""
        if self._db is None:
            return 0
        data = [(w, t, p, FEATURE_VERSION, np.asarray(v, np.float32).tobytes()) for w, t, p, v in rows]
        try:
            self._db.executemany("INSERT OR REPLACE INTO features VALUES (?,?,?,?,?)", data)
            self._db.commit()
            return len(data)
        except sqlite3.Error as exc:
            self.error = f"feature cache {self.path} not written ({exc})"
            return 0

    def for_target(self, target: str) -> dict[tuple[str, str], np.ndarray]:
        """(workload, point JSON) -> vector, for every workload on `target`."""
        if self._db is None:
            return {}
        try:
            rows = self._db.execute("SELECT workload, point, vector FROM features WHERE target = ? AND version = ?",
                                    (target, FEATURE_VERSION)).fetchall()
        except sqlite3.Error as exc:
            self.error = f"feature cache {self.path} not readable ({exc})"
            return {}
        out = {}
        for w, p, blob in rows:
            v = np.frombuffer(blob, np.float32)
            if len(v) == N_FEATURES:
                out[(w, p)] = v.astype(float)
        return out

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


__all__ = ["FeatureStore", "features_path"]
