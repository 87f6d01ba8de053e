"""Back-to-back fusion inside a model (`compile(fuse_b2b=...)`): a dense layer whose only reader is
another dense layer runs fused with it in one step, the model's output unchanged; a pair that cannot
fuse stays two kernels and `module.b2b` says why."""

import dataclasses

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs
from test_model_templates import _mlp, _reference

import tilewright as tw
from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.b2b_fusion import find_pairs
from tilewright.graph.compile import compile as compile_graph
from tilewright.graph.fusion import fuse
from tilewright.graph.infer import infer_types
from tilewright.graph.optimize import optimize


@pytest.fixture
def target():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    return AVX2


def _pair(rng, hidden=8, inner=64, out_too=False) -> Graph:
    """x -> dense -> relu -> dense, the intermediate also a model output when `out_too`."""
    consts = {"w0": rng.standard_normal((inner, hidden)).astype(np.float32) / 3,
              "w1": rng.standard_normal((hidden, inner)).astype(np.float32) / 8}
    nodes = [Node("constant", (), (k,)) for k in consts]
    nodes += [Node("dense", ("x", "w0"), ("h",)), Node("relu", ("h",), ("a",)), Node("dense", ("a", "w1"), ("y",))]
    return Graph(nodes, ["x"], ["y", "a"] if out_too else ["y"], {"x": TensorType((5, hidden))}, consts, name="pair")


def test_pairs_are_found_and_never_overlap(rng):
    g = optimize(infer_types(_mlp(rng)))
    pairs, refused = find_pairs(fuse(g))
    assert [(p.problem.first.name, p.problem.second.name) for p in pairs] == [("gemm_24x72x40", "gemm_24x40x72")]
    assert pairs[0].problem.epilogues[0].name == "bias+gelu"
    assert pairs[0].problem.epilogues[1].name == "bias+residual+relu"
    assert refused == []  # the third dense layer's reader is the fused pair's output, not a pair of its own


def test_an_intermediate_read_outside_the_pair_is_not_fused(rng):
    g = optimize(infer_types(_pair(rng, out_too=True)))
    pairs, refused = find_pairs(fuse(g))
    assert pairs == [] and len(refused) == 1 and "model output" in refused[0][1]


@pytest.mark.parametrize("kernels", ["templates", "auto"])
def test_a_fused_model_matches_and_says_what_it_fused(kernels, target, rng, tmp_path):
    g = _mlp(rng)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    m = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, kernels=kernels)
    np.testing.assert_allclose(m(x), _reference(g, x), rtol=1e-4, atol=1e-4)
    (d,) = m.b2b
    assert d.pair.endswith("_b2b") and "x1" in d.line()
    if kernels == "templates":
        assert d.fused
    else:
        assert d.fused_s > 0 and d.unfused_s > 0 and d.fused == (d.fused_s < d.unfused_s)
    assert len(m.steps) == (2 if d.fused else 3)
    off = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, kernels=kernels,
                        fuse_b2b=False)
    assert off.b2b == [] and len(off.steps) == 3


def test_a_pair_whose_intermediate_cannot_stay_in_l2_runs_unfused(target, rng, tmp_path):
    small_l2 = dataclasses.replace(target, caches=((1, "Data", 32 * 1024), (2, "Unified", 16 * 1024)))
    g = _pair(rng, inner=4096)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    m = compile_graph(g, target=small_l2, records=tmp_path / "r.db", progress=False, kernels="templates")
    (d,) = m.b2b
    assert not d.fused and "L2" in d.why and "unfused" in d.why
    assert len(m.steps) == 2
    np.testing.assert_allclose(m(x), _reference(g, x), rtol=1e-4, atol=1e-4)


def test_a_fused_model_exports_and_loads(target, rng, tmp_path):
    g = _mlp(rng)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    m = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, kernels="templates")
    assert m.b2b[0].fused and m.peak_bytes > 0
    m.export(tmp_path / "lib")
    np.testing.assert_allclose(tw.load(tmp_path / "lib")(x), _reference(g, x), rtol=1e-4, atol=1e-4)
