"""What the probe harness (benchmarks/reliability_probes.py) found after the first
round of issue 13: each is a clear error or correct behaviour now."""

import numpy as np
import pytest

import tilewright as tw


def program():
    A = tw.placeholder((8,), "float32", name="A")
    return A, tw.compute((8,), lambda i: A[i] - 1.0, name="C")


def test_a_gather_must_be_clamped_or_guarded():
    A, idx_t = tw.placeholder((16,), "float32", name="A"), tw.placeholder((16,), "int32", name="I")
    raw = tw.compute((16,), lambda i: A[idx_t[i]], name="raw")
    with pytest.raises(tw.LoweringError, match="index read from data.*clamp"):
        tw.build(tw.create_schedule(raw), [A, idx_t, raw])  # once: a kernel reading far outside A
    clamped = tw.compute((16,), lambda i: A[tw.max(tw.min(idx_t[i], 15), 0)], name="clamped")
    guarded = tw.compute((16,), lambda i: tw.if_then_else(tw.all(idx_t[i] >= 0, idx_t[i] < 16), A[idx_t[i]], 0.0),
                         name="g")
    a, idx = np.arange(16, dtype="float32"), np.array([99, 3, -7, 15] * 4, "int32")
    for out in (clamped, guarded):
        got = np.zeros(16, "float32")
        tw.build(tw.create_schedule(out), [A, idx_t, out])(a, idx, got)
        want = np.clip(idx, 0, 15).astype("float32") if out is clamped else np.where(
            (idx >= 0) & (idx < 16), a[np.clip(idx, 0, 15)], 0)
        np.testing.assert_array_equal(got, want)


def test_kernel_names_that_are_c_keywords_or_very_long(tmp_path):
    A, C = program()
    assert "v_int" in tw.build(tw.create_schedule(C), [A, C], name="int").source  # u_int is a BSD typedef
    out = tw.build(tw.create_schedule(C), [A, C], name="n" * 5000).export(tmp_path)
    assert all(len(p.name) < 200 for p in out.iterdir()) and len(list(out.iterdir())) == 3


def test_a_cpu_build_of_gpu_bound_loops_names_them():
    B = tw.placeholder((8, 8), "float32", name="B")
    r = tw.reduce_axis(8, name="r")
    S = tw.compute((8,), lambda i: tw.sum(B[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    s[S].bind(r, tw.thread_axis("threadIdx.x"))
    with pytest.raises(tw.TilewrightError, match="'r' to threadIdx.x.*cuda"):
        tw.build(s, [B, S])


@pytest.mark.parametrize("option, value", [("trials", 2.5), ("trials", "3"), ("trials", 0), ("trials", -1),
                                           ("timeout", -1), ("timeout", 0), ("seed", "a"), ("seed", -5),
                                           ("batch", 0)])
def test_bad_tune_options_are_clear_errors(option, value):
    A, C = program()
    with pytest.raises(tw.TilewrightError, match=option):
        tw.tune([A, C], **{option: value}, progress=False)


def test_an_unwritable_log_and_a_huge_reference_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWRIGHT_CACHE_DIR", str(tmp_path))
    (tmp_path / "logs").write_text("a file where the log directory goes")
    A, C = program()
    with pytest.raises(tw.TilewrightError, match="tuning log"):
        tw.tune([A, C], trials=1, records=tmp_path / "r.sqlite", progress=False)
    huge = tw.compute((10**6, 10**6), lambda i, j: tw.cast(i + j, "float32"), name="Huge")
    with pytest.raises(tw.EvaluationError, match="'Huge'.*does not fit in memory"):
        tw.evaluate(huge, {})
