"""Checking a record's fields before it enters the database: what an import
reads from a file, or a row read back from a database written by an older or
foreign tilewright. Each check returns the reason a field is bad, or None.

Knob names and value types against a program's space are checked where the
space is known (the tuner keeps only points that lie in its space); here the
point must have the space format: a JSON object of knob name -> int, string
or flat list of ints (`Point.to_json`)."""

from __future__ import annotations

import json
import math

ERROR_KINDS = frozenset({"none", "instantiate", "compile", "runtime", "timeout", "wrong_result"})
INT64 = (-(1 << 63), (1 << 63) - 1)  # SQLite's INTEGER
STR_FIELDS = ("workload", "target", "trace", "error_kind", "error_msg", "method", "run_id", "version", "description")
FIELDS = ("workload", "target", "point", "trace", "costs", "error_kind", "error_msg", "method", "seed", "run_id",
          "version", "time", "description")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def point_problem(text) -> str | None:
    """Why `text` is not a point in the space format, or None."""
    if not isinstance(text, str):
        return f"point must be a JSON string (Point.to_json), got a {type(text).__name__}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"point is not JSON ({exc})"
    if not isinstance(data, dict):
        return f"point must be a JSON object of knob name -> value, got {type(data).__name__} {text[:80]}"
    for name, value in data.items():
        if _is_int(value):
            if not INT64[0] <= value <= INT64[1]:
                return f"point knob {name!r}: {value} is out of range"
        elif isinstance(value, list):
            if not all(_is_int(v) and 1 <= v <= INT64[1] for v in value):
                return f"point knob {name!r}: a split must be a flat list of positive ints, got {value}"
        elif not isinstance(value, str):
            return f"point knob {name!r}: value must be an int, a string or a list of ints, got {value!r}"
    return None


def record_problem(d) -> str | None:
    """Why the decoded JSON object `d` is not a valid record, or None."""
    if not isinstance(d, dict):
        return f"a record must be a JSON object, got {type(d).__name__}"
    missing = [f for f in FIELDS if f not in d and f != "description"]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    extra = sorted(set(d) - set(FIELDS))
    if extra:
        return f"unknown field(s) {', '.join(extra)}; fields are {', '.join(FIELDS)}"
    for f in STR_FIELDS:
        if f in d and not isinstance(d[f], str):
            return f"{f} must be a string, got {type(d[f]).__name__}"
    if not d["workload"] or not d["target"]:
        return "workload and target must not be empty"
    if d["error_kind"] not in ERROR_KINDS:
        return f"error_kind {d['error_kind']!r} is not one of {', '.join(sorted(ERROR_KINDS))}"
    bad = point_problem(d["point"])
    if bad:
        return bad
    if d["trace"]:
        try:
            json.loads(d["trace"])
        except ValueError as exc:
            return f"trace is not JSON ({exc})"
    costs = d["costs"]
    if not isinstance(costs, list) or not all(_is_number(c) and math.isfinite(c) and c > 0 for c in costs):
        return f"costs must be a list of finite positive seconds, got {str(costs)[:80]}"
    if d["error_kind"] == "none" and not costs:
        return "a successful record (error_kind none) needs at least one cost"
    seed = d["seed"]
    if seed is not None and not (_is_int(seed) and INT64[0] <= seed <= INT64[1]):
        return f"seed must be null or an integer within 64 bits, got {str(seed)[:40]}"
    if not (_is_number(d["time"]) and math.isfinite(d["time"]) and d["time"] >= 0):
        return f"time must be a finite non-negative timestamp, got {d['time']!r}"
    return None
