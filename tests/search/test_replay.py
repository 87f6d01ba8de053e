"""Builds from records replay the stored trace under the full target fingerprint:
the same kernel after the space code changes, never a kernel tuned for another
machine or thread count, and a clear refusal when a trace no longer fits."""

import json
import random
import warnings
from dataclasses import replace

import numpy as np
import pytest

import tilewright as tw
import tilewright.api as api_module
from tilewright.records import Records
from tilewright.search.replay import schedule_from_trace


def gemm():
    A = tw.placeholder((32, 24), "float32", name="A")
    B = tw.placeholder((24, 48), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def conv1x1():  # axis merge makes (h, w) one axis: the trace holds the merge step
    x = tw.placeholder((1, 16, 6, 6), "float32", name="x")
    w = tw.placeholder((8, 16, 1, 1), "float32", name="w")
    return [x, w, tw.ops.conv2d(x, w)]


def check(tensors, kernel):
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, np.float32)
    kernel(*ins, out)
    np.testing.assert_allclose(out, tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins))), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("program", [gemm, conv1x1])
def test_a_record_builds_the_same_source_after_a_space_change(tmp_path, monkeypatch, program):
    tensors = program()
    db = tmp_path / "r.sqlite"
    result = tw.tune(tensors, trials=3, seed=0, records=db, progress=False)
    tuned = result.build().source
    with tw.records(db):
        assert tw.build(program()).source == tuned

    # the space code changes: every point now means the schedule of another point
    real = api_module.backend_for(tw.as_target("cpu"))
    rng = random.Random(0)
    for _ in range(50):
        other = result.space.sample(rng)
        changed = replace(real, apply=lambda outputs, plan, point, other=other: real.apply(outputs, plan, other))
        if changed.build(changed.apply(result.outputs, result.plan, result.best_point), tensors,
                         result.target).source != tuned:
            break
    else:
        pytest.fail("no other point of the space gives another kernel")
    monkeypatch.setattr(api_module, "backend_for", lambda t: changed)
    with tw.records(db), warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = tw.build(program())
    assert kernel.source == tuned
    check(program(), kernel)


def test_the_fingerprint_holds_cores_caches_and_compiler():
    base = tw.Target(kind="cpu", cores=2, caches=((1, "Data", 32768), (2, "Unified", 524288)), compiler_version="x")
    assert base.key != base.with_cores(4).key
    assert base.key != replace(base, caches=((1, "Data", 49152), (2, "Unified", 524288))).key
    assert base.key != replace(base, l1_ways=12).key
    assert base.key != replace(base, compiler_version="y").key
    assert base.key == replace(base).key


def test_records_of_another_thread_count_are_not_applied(tmp_path):
    host = tw.as_target("cpu")
    other = host.with_cores(host.cores + 1)
    db = tmp_path / "r.sqlite"
    tw.tune(gemm(), target=other, trials=2, seed=0, records=db, progress=False)
    assert {r.target for r in Records(db).query()} == {other.key}
    with tw.records(db), pytest.warns(tw.TilewrightWarning, match="only for other targets"):
        kernel = tw.build(gemm(), target=host)
    default = tw.build(gemm(), target=host)  # no records: the default schedule
    assert kernel.source == default.source
    check(gemm(), kernel)


def test_a_trace_that_no_longer_fits_says_so(tmp_path):
    tensors = conv1x1()
    db = tmp_path / "r.sqlite"
    tw.tune(tensors, trials=2, seed=0, records=db, progress=False)
    rec = next(r for r in Records(db).query() if r.trace)
    steps = json.loads(rec.trace)
    assert [st["primitive"] for st in steps[:2]] == ["tensor_names", "merge_axes"]
    steps[1]["args"]["shapes"] = {"x": [1, 16, 3, 12]}
    with pytest.raises(tw.ScheduleError, match="cannot be replayed"):
        schedule_from_trace(conv1x1(), json.dumps(steps))
    with pytest.raises(tw.ScheduleError, match="no loop named"):
        schedule_from_trace(gemm(), json.dumps([{"stage": "matmul", "primitive": "split",
                                                 "args": {"axis": "nope", "factor": 2}}]))


def conv_named(prefix: str):  # the same padded conv with its tensors named otherwise (two layers of a model)
    x = tw.placeholder((1, 8, 10, 10), "float32", name=f"{prefix}_x")
    w = tw.placeholder((16, 8, 3, 3), "float32", name=f"{prefix}_w")
    return [x, w, tw.ops.conv2d(x, w, padding=1, name=f"{prefix}_conv")]


def test_a_record_replays_onto_the_same_workload_with_other_names(tmp_path):
    """Records are keyed by structure, not names: a trace tuned on one layer (its cache_read
    stages and compute_at parents named after that layer's tensors) replays onto another."""
    db = tmp_path / "r.sqlite"
    tw.tune(conv_named("layer1"), trials=4, seed=0, records=db, progress=False)
    other = conv_named("layer9")
    with tw.records(db), warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed replay warns and falls back to the default
        kernel = tw.build(other)
    assert "layer9" in kernel.source and "layer1" not in kernel.source
    trace = json.loads(Records(db).best(tw.analysis.workload_key(other[-1:]), tw.as_target("cpu").key, k=1)[0].trace)
    assert trace[0]["primitive"] == "tensor_names" and "layer1_w" in trace[0]["args"]["tensors"]
    check(other, kernel)
