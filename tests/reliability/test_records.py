"""Records never lose a measurement, never rank a wrong kernel, never take a
malformed line in: per-measurement commits, bounded lock waits, validated imports."""

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilewright.errors import TilewrightError
from tilewright.records import Record, Records

ROOT = Path(__file__).resolve().parents[2]


def rec(cost, point='{"t": [2, 4]}', t=1.0, kind="none", costs=None):
    costs = costs if costs is not None else ((cost,) if cost else ())
    return Record("w1", "t1", point, "[]", costs, kind, "", "q", 0, "r1", "0.1.0", t, "desc")


def test_a_kill_after_three_of_four_measurements_keeps_three(tmp_path):
    """Each result reaches the store as it completes (Measurer.measure's on_result),
    not when the batch ends: killing the process during the 4th loses only the 4th."""
    db = tmp_path / "r.sqlite"
    script = textwrap.dedent(f"""
        import inspect, sys, time
        import tilewright as tw
        from tilewright.records import Record, Records
        from tilewright.runtime.measure import Measurer
        from tilewright.targets import as_target
        A = tw.placeholder((64,), "float32", name="A")
        B = tw.compute((64,), lambda i: A[i] * 2.0, name="B")
        tgt = as_target("cpu")
        extra = []
        if "backend" in inspect.signature(Measurer).parameters:
            from tilewright.backends import backend_for
            extra = [backend_for(tgt)]
        store = Records({str(db)!r})
        def done(i, m):
            store.add(Record("w", "t", '{{"n": %d}}' % i, "", m.costs, m.error_kind.value, m.error_msg, "q", 0,
                             "run", "0", time.time(), ""))
            print(i, flush=True)
            if i == 2:
                time.sleep(120)  # the 4th measurement is under way when the kill comes
        with Measurer([B], [A, B], tgt, *extra, timeout=5.0) as m:
            m.measure([tw.create_schedule(B)] * 4, on_result=done)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
    finally:
        proc.kill()
        proc.wait(10)
    assert lines == ["0", "1", "2"]
    store = Records(db)
    assert store.count() == 3 and all(r.error_kind == "none" and r.costs for r in store.query())


def _hold_lock(db: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the database's exclusive lock for `seconds`."""
    code = ("import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\nc.execute('COMMIT')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_held_lock_is_waited_for_with_a_warning(tmp_path, capfd):
    store = Records(tmp_path / "r.sqlite", lock_timeout=20)
    holder = _hold_lock(store.path, 1.5)
    try:
        store.add(rec(1e-3))
    finally:
        holder.wait(20)
    assert store.count() == 1
    err = capfd.readouterr().err
    assert str(store.path) in err and "locked" in err


def test_a_lock_held_past_the_bound_saves_the_measurement_aside(tmp_path):
    store = Records(tmp_path / "r.sqlite", lock_timeout=0.5)
    holder = _hold_lock(store.path, 4)
    try:
        with pytest.raises(TilewrightError) as info:
            store.add(rec(1e-3))  # not sqlite3.OperationalError
    finally:
        holder.wait(20)
    msg = str(info.value)
    assert str(store.path) in msg and str(store.side_path) in msg and "import" in msg
    assert store.count() == 0
    assert store.import_jsonl(store.side_path) == 1  # nothing was lost
    assert store.best("w1", "t1")[0].cost == 1e-3


def test_a_point_with_a_wrong_result_never_ranks(tmp_path):
    store = Records(tmp_path / "r.sqlite")
    store.add(rec(1e-3, '{"t": [1, 8]}', t=1))
    store.add(rec(None, '{"t": [1, 8]}', t=2, kind="wrong_result"))  # re-measured: wrong output
    store.add(rec(2e-3, '{"t": [2, 4]}', t=3))
    assert [r.point for r in store.best("w1", "t1", k=5)] == ['{"t": [2, 4]}']


def test_best_ranks_by_the_median_of_all_a_points_times(tmp_path):
    """Five fast repeats in one record outweigh two slow single times."""
    store = Records(tmp_path / "r.sqlite")
    store.add(rec(4e-3, '{"t": [1, 8]}', t=1))
    store.add(rec(4e-3, '{"t": [1, 8]}', t=2))
    store.add(rec(None, '{"t": [1, 8]}', t=3, costs=(1e-3,) * 5))
    store.add(rec(2e-3, '{"t": [2, 4]}', t=4))
    best = store.best("w1", "t1", k=5)
    assert [r.point for r in best] == ['{"t": [1, 8]}', '{"t": [2, 4]}'] and best[0].cost == 1e-3
    assert len(best[0].costs) == 7


GOOD = json.loads(rec(1e-3, t=1).to_json())
BAD_LINES = {
    "dict point": ({"point": {"t": [2, 4]}}, "point must be a JSON string"),
    "list description": ({"description": ["a", "b"]}, "description must be a string"),
    "huge seed": ({"seed": 10 ** 30}, "seed"),
    "float splits, fake time 0": ({"point": '{"t": [2.5, 4]}', "costs": [0.0]}, "positive ints"),
    "zero cost": ({"costs": [0.0]}, "costs must be a list of finite positive"),
    "string point": ({"point": '"[1,2]"'}, "JSON object"),
    "list point": ({"point": "[1, 2]"}, "JSON object"),
    "nested lists": ({"point": '{"t": [[1, 2], [3]]}'}, "positive ints"),
    "unknown kind": ({"error_kind": "fine"}, "error_kind"),
    "null costs": ({"costs": None}, "costs must be a list"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_import_line_rejects_the_whole_file(tmp_path, case):
    change, reason = BAD_LINES[case]
    store = Records(tmp_path / "r.sqlite")
    store.add(rec(5e-3, '{"t": [4, 2]}', t=9))
    path = tmp_path / "in.jsonl"
    good2 = {**GOOD, "time": 2.0}
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(good2) + "\n" + json.dumps({**GOOD, **change}) + "\n")
    with pytest.raises(TilewrightError) as info:
        store.import_jsonl(path)
    assert f"{path}:4:" in str(info.value) and reason in str(info.value)
    assert [r.time for r in store.query()] == [9]  # unchanged: the good lines did not go in either


def test_a_malformed_stored_row_is_never_handed_out(tmp_path):
    """Rows written by a foreign tool or an older version cannot crash the API."""
    store = Records(tmp_path / "r.sqlite")
    store.add(rec(2e-3, t=1))
    db = sqlite3.connect(store.path)
    for point, costs in (('"[1,2]"', "[1e-3]"), ('{"t": [[1]]}', "[1e-3]"), ('{"t": [1, 8]}', "oops")):
        db.execute("INSERT INTO records (workload, target, point, trace, costs, cost, error_kind, error_msg, "
                   "method, seed, run_id, version, time) VALUES ('w1','t1',?,'',?,1e-3,'none','','q',0,'x','0',5)",
                   (point, costs))
    db.commit()
    assert [r.point for r in store.best("w1", "t1", k=5)] == ['{"t": [2, 4]}']
    assert len(store.query("w1", "t1")) == 1 and store.count() == 4
