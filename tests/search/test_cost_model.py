"""The learned cost model (issue 14): loop-nest features, the rank model, and
pre-screening in the tuner. Nothing here depends on timings: measurements are
faked where the test is about the tuner's choices, and the one real tuning
run checks only that the kernel is right."""

import random

import numpy as np
import pytest

import tilewright as tw
import tilewright.search.tuner as tune_module
from tilewright.analysis import workload_key
from tilewright.backends import backend_for
from tilewright.records import Record, Records
from tilewright.runtime.measure import MeasureResult
from tilewright.search.cost_model import MIN_PAIRS, RankModel, ranks, spearman
from tilewright.search.feature_store import FeatureStore, features_path
from tilewright.search.features import FEATURE_NAMES, N_FEATURES, loop_nest_features
from tilewright.search.prescreen import Prescreen


def gemm(m=32, k=24, n=48):
    A = tw.placeholder((m, k), "float32", name="A")
    B = tw.placeholder((k, n), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def conv():
    x = tw.placeholder((1, 4, 10, 10), "float32", name="x")
    w = tw.placeholder((8, 4, 3, 3), "float32", name="w")
    return [x, w, tw.ops.conv2d(x, w, padding=1)]


def depthwise():
    x = tw.placeholder((1, 8, 12, 12), "float32", name="x")
    w = tw.placeholder((8, 1, 3, 3), "float32", name="w")
    return [x, w, tw.ops.depthwise_conv2d(x, w, stride=1, padding=1, dilation=1)]


def gemv():
    A = tw.placeholder((64, 48), "float32", name="A")
    x = tw.placeholder((48,), "float32", name="x")
    return [A, x, tw.ops.mv(A, x)]


CPU = tw.as_target("cpu")
BACKEND = backend_for(CPU)


def lowered(tensors, point=None, seed=0):
    outputs = [tensors[-1]]
    space, plan = BACKEND.space(outputs, CPU)
    p = point or (BACKEND.default_point(space, plan) if seed is None else space.sample(random.Random(seed)))
    return BACKEND.lower(BACKEND.apply(outputs, plan, p), tensors, "kernel", CPU)


@pytest.mark.parametrize("program", [conv, gemm, depthwise, gemv])
def test_features_are_deterministic_finite_and_fixed_length(program):
    vectors = []
    for seed in (None, 1, 2):
        a = loop_nest_features(lowered(program(), seed=seed), CPU)
        b = loop_nest_features(lowered(program(), seed=seed), CPU)  # a fresh program and lowering
        assert a.shape == (N_FEATURES,) == (len(FEATURE_NAMES),)
        assert np.isfinite(a).all() and np.array_equal(a, b)
        vectors.append(a)
    assert not np.array_equal(vectors[0], vectors[1]) or not np.array_equal(vectors[1], vectors[2])
    f = dict(zip(FEATURE_NAMES, vectors[0]))
    assert f["log_flops"] > 0 and 0 < f["main_share"] <= 1


def test_features_see_vectorization_and_parallelism():
    tensors = gemm(64, 64, 64)
    A, B, C = tensors
    s = tw.create_schedule(C)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].parallel(i)
    s[C].vectorize(ji)
    f = dict(zip(FEATURE_NAMES, loop_nest_features(BACKEND.lower(s, tensors, "kernel", CPU), CPU)))
    plain = dict(zip(FEATURE_NAMES, loop_nest_features(
        BACKEND.lower(tw.create_schedule(C), tensors, "kernel", CPU), CPU)))
    assert f["log_lanes"] == 3 and f["vector_share"] == 1 and plain["log_lanes"] == 0
    assert f["log_parallel_extent"] == 6 and plain["log_parallel_extent"] == 0


def synthetic(n=300, n_features=12, groups=3, seed=0):
    """Costs a known monotone function of the features, on scales a thousand times apart per group."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    g = np.arange(n) % groups
    cost = np.exp(0.8 * X[:, 0] - 0.5 * X[:, 1] + 0.3 * np.tanh(X[:, 2])) * (1000.0 ** g)
    return X, cost, g


def test_the_model_learns_a_synthetic_ranking():
    X, cost, g = synthetic()
    model = RankModel(X.shape[1], seed=0)
    assert model.fit(X[:200], cost[:200], g[:200]).ok and model.ready
    for grp in range(3):  # ranks within each held-out group (the model never sees scales)
        test = np.flatnonzero(g[200:] == grp) + 200
        assert spearman(model.predict(X[test]), -cost[test]) > 0.9
    again = RankModel(X.shape[1], seed=0)
    again.fit(X[:200], cost[:200], g[:200])
    assert np.array_equal(again.predict(X[200:]), model.predict(X[200:]))  # seeded


def test_the_model_declines_too_little_data():
    X, cost, g = synthetic(n=6)
    model = RankModel(X.shape[1])
    summary = model.fit(X, cost, g)
    assert not summary.ok and not model.ready and str(MIN_PAIRS) in summary.reason
    assert np.array_equal(model.predict(X), np.zeros(len(X)))
    assert not RankModel(3).fit(np.zeros((0, 3)), [], []).ok
    # timeouts (inf) rank below their group's times and do not break the fit
    X, cost, g = synthetic()
    cost[::7] = np.inf
    assert RankModel(X.shape[1]).fit(X, cost, g).ok


def test_rank_helpers():
    assert list(ranks([3.0, 1.0, 2.0, 2.0])) == [3.0, 0.0, 1.5, 1.5]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert np.isnan(spearman([1, 2], [1, 2])) and np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def fill_store(path, tensors, n=60, seed=0):
    """Records of `tensors` on this target with features and a cost that depends on them (fewer loop
    levels and more vector lanes: faster), as a tuning run with the model would have left them."""
    outputs = [tensors[-1]]
    space, plan = BACKEND.space(outputs, CPU)
    wkey = workload_key(outputs)
    store, fstore = Records(path), FeatureStore(features_path(path))
    rng = random.Random(seed)
    rows, seen = [], set()
    for _ in range(n * 3):
        p = space.sample(rng)
        if p in seen:
            continue
        seen.add(p)
        vec = loop_nest_features(BACKEND.lower(BACKEND.apply(outputs, plan, p), tensors, "kernel", CPU), CPU)
        f = dict(zip(FEATURE_NAMES, vec))
        cost = 1e-4 * 2.0 ** (f["log_main_depth"] - f["log_lanes"]) * (1 + 0.01 * len(seen) % 3)
        store.add(Record(wkey, CPU.key, p.to_json(), "", (cost,), "none", "", "q", 0, "fill", "test", 0.0, ""))
        rows.append((wkey, CPU.key, p.to_json(), vec))
        if len(rows) >= n:
            break
    fstore.put_many(rows)
    fstore.close()
    return wkey


def fake_measure(calls):
    def measure(self, schedules, on_result=None, libraries=None, rounds=1):
        calls.append(len(schedules))
        out = [MeasureResult(costs=(1e-3 + (hash(s.trace.to_json()) % 997) * 1e-6,)) for s in schedules] * rounds
        for i, m in enumerate(out):
            on_result(i % len(schedules), m)
        return out

    return measure


def test_a_fresh_store_leaves_the_model_off_and_says_so(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(tune_module.Measurer, "measure", fake_measure(calls))
    r = tw.tune(gemm(), trials=20, seed=0, batch=4, records=tmp_path / "r.sqlite", progress=False)
    assert "no records for this target: cost model off; this run's 20 measurements are kept" in r.report()
    assert len(FeatureStore(features_path(tmp_path / "r.sqlite")).for_target(CPU.key)) == 20
    off = tw.tune(gemm(), trials=2, seed=0, records=tmp_path / "r.sqlite", progress=False, cost_model="off")
    assert "cost model: cost_model='off'" in off.report()
    with pytest.raises(tw.TilewrightError, match="cost_model"):
        tw.tune(gemm(), trials=2, records=tmp_path / "r.sqlite", progress=False, cost_model="always")


def test_prescreening_measures_only_the_requested_count_and_transfers(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    fill_store(path, gemm(64, 32, 48), n=60)  # another workload on this target
    calls = []
    monkeypatch.setattr(tune_module.Measurer, "measure", fake_measure(calls))
    r = tw.tune(gemm(), trials=12, seed=0, batch=2, records=path, progress=False, from_default=False)
    assert len(r.history) == 12
    assert all(n <= 2 for n in calls[:6]) and sum(calls[:6]) == 12  # the search's batches, then the finalists
    report = r.report()
    assert "cost model: on, trained on 60 measured schedules (0 of this workload, 60 of 1 other workload: transfer)" \
        in report and "6 batches chosen from 8x proposals" in report
    # this run's measurements were kept with their features for the next run
    assert len(FeatureStore(features_path(path)).for_target(CPU.key)) >= 72


class ListStrategy:
    def __init__(self, points):
        self.points, self.discarded, self.asked = points, [], []

    def propose(self, n):
        self.asked.append(n)
        return self.points[:n]

    random_unvisited = propose

    def discard(self, points):
        self.discarded += points


def test_prescreen_picks_the_best_scored_and_gives_the_rest_back(tmp_path):
    path = tmp_path / "r.sqlite"
    fill_store(path, gemm(64, 32, 48), n=60)
    tensors = gemm()
    outputs = [tensors[-1]]
    space, plan = BACKEND.space(outputs, CPU)
    screen = Prescreen("on", BACKEND, CPU, tensors, outputs, plan, space, Records(path), "w", seed=0, epsilon=0.0)
    assert screen.active
    rng = random.Random(3)
    points = list(dict.fromkeys(space.sample(rng) for _ in range(40)))[:16]
    strategy = ListStrategy(points)
    chosen = screen.propose(strategy, 2, warm=False)
    assert strategy.asked == [16] and len(chosen) == 2 and len(strategy.discarded) == 14
    assert set(chosen) | set(strategy.discarded) == set(points)
    scores = screen.model.predict(np.array([screen.features(p) for p in points]))
    assert sorted(scores[[points.index(p) for p in chosen]]) == sorted(scores)[-2:]
    # the schedules measured are the ones the features were taken from; their lowering is reused
    schedules = screen.instantiate(chosen)
    assert schedules[0] is screen.instantiate(chosen[:1])[0]
    assert screen.backend.lower(schedules[0], tensors, "kernel", CPU) is \
        screen.backend.lower(schedules[0], tensors, "kernel", CPU)
    screen.close()


def test_screening_spends_no_more_than_measuring_is_worth(tmp_path):
    """Proposals per slot follow the lowering time against the screen's budget: the floor while
    measuring is cheap, twice a slow kernel's measured cost when that is more."""
    path = tmp_path / "r.sqlite"
    fill_store(path, gemm(64, 32, 48), n=60)
    tensors = gemm()
    outputs = [tensors[-1]]
    space, plan = BACKEND.space(outputs, CPU)
    screen = Prescreen("on", BACKEND, CPU, tensors, outputs, plan, space, Records(path), "w", seed=0)
    assert screen.pool_factor() == screen.factor  # nothing lowered yet
    screen._lowering_s = [0.25] * 8  # a slow-lowering task (Winograd transforms: 0.2 s a point)
    rng = random.Random(5)
    points = list(dict.fromkeys(space.sample(rng) for _ in range(12)))[:4]

    def measured(seconds):
        screen.observe(points, screen.instantiate(points),
                       [MeasureResult(costs=(1e-3,), build_s=seconds, run_s=0.0)] * len(points), trial=4)
        screen._lowering_s = [0.25] * 8  # observe featurises the points: keep the pinned lowering time

    measured(0.2)  # cheap to measure: the floor, 1 s a slot, 4 proposals of 0.25 s
    assert screen.screen_s_per_slot() == 1.0 and screen.pool_factor() == 4
    screen._measure_s = []
    measured(1.5)  # slow to measure: 3 s a slot, the whole factor
    assert screen.screen_s_per_slot() == 3.0 and screen.pool_factor() == screen.factor
    screen.close()


def test_tuning_with_the_model_finds_a_correct_kernel(tmp_path):
    path = tmp_path / "r.sqlite"
    fill_store(path, gemm(64, 32, 48), n=60)
    tensors = gemm()
    r = tw.tune(tensors, trials=8, seed=1, records=path, progress=False, cost_model="on")
    assert len(r.history) == 8 and np.isfinite(r.best_cost) and "cost model: on" in r.report()
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, np.float32)
    r.build()(*ins, out)
    np.testing.assert_allclose(out, tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins))), rtol=1e-4, atol=1e-4)
