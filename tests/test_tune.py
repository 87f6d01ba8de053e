"""End-to-end tuning at tiny sizes: correct results, seeds, records, warm start,
resume after interruption, failing candidates, CLI."""

import numpy as np
import pytest

import tilewright as tw
import tilewright.api as api_module
import tilewright.search.tuner as tune_module
from tilewright.cli import main as cli_main
from tilewright.records import Records
from tilewright.search.tuner import FINAL_PASSES, FINAL_ROUNDS, FINALISTS


def gemm():
    A = tw.placeholder((32, 24), "float32", name="A")
    B = tw.placeholder((24, 48), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def conv():
    x = tw.placeholder((1, 4, 8, 8), "float32", name="x")
    w = tw.placeholder((8, 4, 3, 3), "float32", name="w")
    b = tw.placeholder((8,), "float32", name="b")
    return [x, w, b, tw.ops.relu(tw.ops.conv2d(x, w, b, padding=1))]


def check_kernel(tensors, kernel):
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, np.float32)
    kernel(*ins, out)
    np.testing.assert_allclose(out, tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins))), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("program, method", [(gemm, "q"), (conv, "p"), (gemm, "random")])
def test_tiny_tuning_finds_a_correct_kernel(tmp_path, program, method):
    tensors = program()
    r = tw.tune(tensors, trials=8, method=method, seed=1, records=tmp_path / "r.sqlite", progress=False)
    assert len(r.history) == 8 and np.isfinite(r.best_cost)
    assert np.isfinite(r.default_cost) and r.best_cost <= r.default_cost
    assert "untuned default" in r.report() and "best" in r.report()
    check_kernel(tensors, r.build())


def test_same_seed_and_same_measurements_give_the_same_run(tmp_path, monkeypatch):
    # Timings are noisy, so determinism means: every random choice comes from the
    # seed; with the same measured costs the run is the same.
    from tilewright.runtime.measure import MeasureResult

    def fake(self, schedules, on_result=None, libraries=None, rounds=1):
        out = [MeasureResult(costs=(1e-3 + (hash(s.trace.to_json()) % 997) * 1e-6,)) for s in schedules] * rounds
        for i, m in enumerate(out):
            on_result(i % len(schedules), m)
        return out

    monkeypatch.setattr(tune_module.Measurer, "measure", fake)
    for method in ("q", "p", "random"):
        a = tw.tune(gemm(), trials=24, seed=3, method=method, records=tmp_path / f"a{method}.sqlite", progress=False)
        b = tw.tune(gemm(), trials=24, seed=3, method=method, records=tmp_path / f"b{method}.sqlite", progress=False)
        assert [t.point for t in a.history] == [t.point for t in b.history]


def test_warm_start_never_remeasures_and_build_uses_records(tmp_path):
    path = tmp_path / "r.sqlite"
    first = tw.tune(gemm(), trials=6, seed=0, records=path, progress=False)
    second = tw.tune(gemm(), trials=6, seed=5, records=path, progress=False)
    assert not {t.point for t in first.history} & {t.point for t in second.history}
    # each run times its best few points again, and the default when it is not among them, then
    # any point that rose into the top few without a re-timing (at most FINAL_PASSES passes)
    low, high = 2 * FINALISTS * FINAL_ROUNDS, 2 * ((FINALISTS + 1) + (FINAL_PASSES - 1) * FINALISTS) * FINAL_ROUNDS
    assert 12 + low <= Records(path).count() <= 12 + high
    best = Records(path).best(first.workload, first.target.key)[0]
    assert second.best_point.to_json() == best.point and second.best_cost == best.cost
    tensors = gemm()
    with tw.records(path):
        kernel = tw.build(tensors)
    check_kernel(tensors, kernel)


def test_interrupted_run_keeps_its_measurements_and_resumes(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    real = tune_module.Measurer.measure
    calls = {"n": 0}

    def flaky(self, schedules, on_result=None, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, schedules, on_result, **kw)

    monkeypatch.setattr(tune_module.Measurer, "measure", flaky)
    with pytest.raises(KeyboardInterrupt):
        tw.tune(gemm(), trials=20, seed=0, batch=2, records=path, progress=False)
    assert Records(path).count() == 4  # two batches of two (the heuristic points first) landed before it
    monkeypatch.setattr(tune_module.Measurer, "measure", real)
    resumed = tw.tune(gemm(), trials=4, seed=0, batch=2, records=path, progress=False)
    # then the finalists are re-timed: the best three, and the default too where it is not among them,
    # then points that rose into the top three without a re-timing
    retimed = Records(path).count() - 8
    assert len(resumed.history) == 4 and retimed % FINAL_ROUNDS == 0
    assert FINALISTS * FINAL_ROUNDS <= retimed <= ((FINALISTS + 1) + (FINAL_PASSES - 1) * FINALISTS) * FINAL_ROUNDS


def test_failing_candidates_are_recorded_and_search_goes_on(tmp_path, monkeypatch):
    from dataclasses import replace

    real_backend = api_module.backend_for(tw.as_target("cpu"))
    real = real_backend.apply
    seen = {"n": 0}

    def sometimes_broken(outputs, plan, point):
        seen["n"] += 1
        if seen["n"] % 3 == 0:
            raise tw.ScheduleError("injected failure")
        return real(outputs, plan, point)

    monkeypatch.setattr(api_module, "backend_for", lambda t: replace(real_backend, apply=sometimes_broken))
    r = tw.tune(gemm(), trials=9, seed=0, records=tmp_path / "r.sqlite", progress=False)
    assert r.errors.get("instantiate", 0) >= 2 and np.isfinite(r.best_cost)
    failed = [rec for rec in Records(tmp_path / "r.sqlite").query() if rec.error_kind == "instantiate"]
    assert failed and "injected failure" in failed[0].error_msg


def test_cli_tune_and_records(tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    code = cli_main(["tune", "matmul", "--shape", "A=16,8", "--shape", "B=8,32", "--trials", "3", "--records", db])
    assert code == 0 and "best:" in capsys.readouterr().out
    assert cli_main(["tune", "--case", "GEMM:gemm_32", "--trials", "2", "--records", db]) == 0
    assert cli_main(["records", "list", "--records", db]) == 0
    assert "matmul [16, 32] float32" in capsys.readouterr().out
    out = str(tmp_path / "r.jsonl")
    assert cli_main(["records", "export", out, "--records", db]) == 0
    assert cli_main(["records", "import", out, "--records", str(tmp_path / "other.sqlite")]) == 0
    assert f"imported {Records(db).count()} new records" in capsys.readouterr().out
    assert cli_main(["tune", "nosuchop", "--records", db]) == 2


def test_default_point_is_measured_first_unless_left_out(tmp_path):
    from tilewright.space import cpu_space, default_point

    tensors = gemm()
    space, plan = cpu_space([tensors[-1]], tw.as_target("cpu"))
    default = default_point(space, plan)
    seeded = tw.tune(tensors, trials=3, seed=0, records=tmp_path / "a.sqlite", progress=False)
    assert seeded.history[0].point == default and np.isfinite(seeded.default_cost)
    scratch = tw.tune(tensors, trials=3, seed=0, records=tmp_path / "b.sqlite", progress=False, from_default=False)
    assert all(t.point != default for t in scratch.history) and not np.isfinite(scratch.default_cost)


def test_each_measurement_is_committed_as_it_completes(tmp_path, monkeypatch):
    """A kill after 3 of a batch's 4 measurements keeps those 3 (records were once written per batch)."""
    from tilewright.runtime.measure import MeasureResult

    def killed_midway(self, schedules, on_result=None, **kw):
        for i in range(3):
            on_result(i, MeasureResult(costs=(1e-3 * (i + 1),)))
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_module.Measurer, "measure", killed_midway)
    path = tmp_path / "r.sqlite"
    with pytest.raises(KeyboardInterrupt):
        tw.tune(gemm(), trials=8, seed=0, batch=4, records=path, progress=False)
    assert Records(path).count() == 3


def test_timeouts_scale_with_the_default_and_have_a_floor(monkeypatch):
    from tilewright.backends import backend_for
    from tilewright.runtime.measure import TIMEOUT_FACTOR, TIMEOUT_FLOOR_S, Measurer

    A = tw.placeholder((8,), "float32", name="A")
    B = tw.compute((8,), lambda i: A[i] + 1.0, name="B")
    cpu = tw.as_target("cpu")
    with Measurer([B], [A, B], cpu, backend_for(cpu), timeout=100.0) as m:
        assert m.time_limit() == 100.0  # nothing measured yet
        m.best = 13e-6
        assert m.time_limit() == TIMEOUT_FLOOR_S  # a 13 us kernel still gets the floor, not 1.3 ms
        m.baseline = 1.0
        assert m.time_limit() == TIMEOUT_FACTOR * 1.0
        m.baseline = 10.0
        assert m.time_limit() == 100.0


def test_a_point_never_retimed_does_not_win_over_retimed_finalists(tmp_path, monkeypatch):
    """Costs are made deterministic: each point has a fixed time the first time it is measured,
    three times that later (the machine got busy during the final re-timing). The re-timed
    finalists' medians rise above points measured once; those must be re-timed too, so the winner
    is a point whose median held up under the same conditions, not one that was never re-timed."""
    from dataclasses import replace

    from tilewright.search.replay import trace_of

    real = tune_module.Measurer.measure
    seen: dict = {}

    def scripted(self, schedules, on_result=None, libraries=None, rounds=1):
        def fixed(n_result, m):
            i = n_result % len(schedules)
            key = trace_of(schedules[i]) if m.ok else str(i)
            n = seen.setdefault(key, [len(seen), 0])
            n[1] += 1
            t = 1e-3 * (1 + n[0] % 7)
            return replace(m, costs=(t if n[1] == 1 else 3 * t,) * 3)

        results = real(self, schedules, None, libraries=libraries, rounds=rounds)
        out = [fixed(n, m) for n, m in enumerate(results)]
        for n, m in enumerate(out):
            if on_result:
                on_result(n % len(schedules), m)
        return out

    monkeypatch.setattr(tune_module.Measurer, "measure", scripted)
    result = tw.tune(gemm(), trials=12, seed=0, records=tmp_path / "r.sqlite", progress=False)
    runs = [r for r in Records(tmp_path / "r.sqlite").query(result.workload, result.target.key)
            if r.point == result.best_point.to_json()]
    assert len(runs) >= 1 + FINAL_ROUNDS


def test_tune_writes_to_the_enclosing_records_context(tmp_path):
    db = tmp_path / "ctx.db"
    with tw.records(db):
        r = tw.tune(gemm(), trials=3, seed=0, progress=False, cost_model="off")
    assert len(r.history) == 3 and Records(db).count() >= 3
