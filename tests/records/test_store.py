"""Records: commit per measurement, best-of, JSONL round trip and merge, context."""

import math

import tilewright as tw
from tilewright.records import Record, Records, active_records


def rec(cost, point="{}", workload="w1", target="t1", run="r1", t=1.0, kind="none"):
    return Record(workload, target, point, "[]", (cost,) if cost else (), kind, "", "q", 0, run, "0.1.0", t, "desc")


def test_add_best_and_failed_records(tmp_path):
    store = Records(tmp_path / "r.sqlite")
    store.add(rec(3e-3, '{"a": 1}', t=1))
    store.add(rec(1e-3, '{"a": 2}', t=2))
    store.add(rec(None, '{"a": 3}', t=3, kind="compile"))
    store.add(rec(2e-3, '{"a": 4}', target="t2", t=4))
    assert [r.point for r in store.best("w1", "t1", k=5)] == ['{"a": 2}', '{"a": 1}']
    assert math.isinf(store.query("w1", "t1")[2].cost)
    # a second connection sees everything: each add was committed
    assert Records(tmp_path / "r.sqlite").count() == 4


def test_one_store_takes_records_from_several_threads(tmp_path):
    import threading

    store = Records(tmp_path / "r.sqlite")  # tasks tuned at once in one driver share their records

    def add(k):
        for i in range(50):
            store.add(rec(1e-3 + i * 1e-6, f'{{"a": {i}}}', workload=f"w{k}"))
            store.query(f"w{k}", "t1")

    threads = [threading.Thread(target=add, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count() == 200 and all(len(store.query(f"w{k}", "t1")) == 50 for k in range(4))


def test_best_ranks_a_retimed_point_by_its_median(tmp_path):
    """One flattering time does not outrank a point that stays fast when timed again."""
    store = Records(tmp_path / "r.sqlite")
    for n, cost in enumerate((1e-3, 3e-3, 3e-3)):
        store.add(rec(cost, '{"lucky": 1}', t=n))
    store.add(rec(2e-3, '{"steady": 1}', t=5))
    best = store.best("w1", "t1", k=5)
    assert [r.point for r in best] == ['{"steady": 1}', '{"lucky": 1}'] and best[1].cost == 3e-3


def test_jsonl_export_import_merges_without_duplicates(tmp_path):
    a = Records(tmp_path / "a.sqlite")
    a.add(rec(1e-3, '{"x": 1}', t=1))
    a.add(rec(2e-3, '{"x": 2}', t=2))
    n = a.export_jsonl(tmp_path / "a.jsonl")
    b = Records(tmp_path / "b.sqlite")
    b.add(rec(5e-4, '{"x": 9}', t=3, run="other"))
    assert n == 2 and b.import_jsonl(tmp_path / "a.jsonl") == 2
    assert b.import_jsonl(tmp_path / "a.jsonl") == 0
    assert b.best("w1", "t1")[0].point == '{"x": 9}'
    assert Record.from_json(rec(1e-3).to_json()) == rec(1e-3)


def test_records_context_is_active_only_inside(tmp_path):
    assert active_records() is None
    with tw.records(tmp_path / "c.sqlite") as store:
        assert active_records() is store
        with store:  # entered again (tw.compile inside the user's own `with`)
            assert active_records() is store
        assert active_records() is store
    assert active_records() is None
