"""Tuning records (SQLite, JSONL export/import/merge), keyed by workload and
target. Imports `config`, `errors`. Public names: Record, Records, records,
active_records, default_path, open_records."""

from .store import Record, Records, active_records, default_path, open_records, records

__all__ = ["Record", "Records", "active_records", "default_path", "open_records", "records"]
