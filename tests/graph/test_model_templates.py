"""Templates inside a model: `compile(kernels=...)` puts a profiled template on each dense layer
whose fused tail it can carry (bias, activations, a residual add), the model's output is unchanged,
and `module.templates` says per task what ran and why."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

from tilewright.errors import ShapeError
from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.compile import compile as compile_graph
from tilewright.graph.fusion import fuse
from tilewright.graph.infer import infer_types
from tilewright.graph.optimize import optimize
from tilewright.graph.templates import match_group


def _mlp(rng, rows=24, hidden=40, inner=72, act="gelu") -> Graph:
    """x -> dense(+bias) -> act -> dense(+bias) -> + x -> relu -> dense (no bias)."""
    consts = {"w0": rng.standard_normal((inner, hidden)).astype(np.float32) / 6,
              "b0": rng.standard_normal(inner).astype(np.float32),
              "w1": rng.standard_normal((hidden, inner)).astype(np.float32) / 8,
              "b1": rng.standard_normal(hidden).astype(np.float32),
              "w2": rng.standard_normal((16, hidden)).astype(np.float32) / 6}
    nodes = [Node("constant", (), (k,)) for k in consts]
    nodes += [Node("dense", ("x", "w0", "b0"), ("h",)), Node(act, ("h",), ("a",)),
              Node("dense", ("a", "w1", "b1"), ("y",)), Node("add", ("y", "x"), ("r",)), Node("relu", ("r",), ("s",)),
              Node("dense", ("s", "w2"), ("out",))]
    return Graph(nodes, ["x"], ["out"], {"x": TensorType((rows, hidden))}, consts, name="mlp")


def _reference(g: Graph, x: np.ndarray) -> np.ndarray:
    from tilewright.graph.reference import run_reference

    return run_reference(g, [x])[0]


@pytest.fixture
def target():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    return AVX2


def test_dense_groups_match_with_their_tails(rng):
    g = optimize(infer_types(_mlp(rng)))
    matches = {grp.name: match_group(grp, g) for grp in fuse(g).groups}
    forms = {m.problem.name + ":" + m.epilogue.name for m in matches.values() if not isinstance(m, str)}
    assert forms == {"gemm_24x72x40:bias+gelu", "gemm_24x40x72:bias+residual+relu", "gemm_24x16x40:none"}


def test_a_group_without_a_template_says_why(rng):
    consts = {"w": rng.standard_normal((8, 4, 3, 3)).astype(np.float32)}
    g = infer_types(Graph([Node("constant", (), ("w",)), Node("conv2d", ("x", "w"), ("y",), {"padding": (1, 1, 1, 1)})],
                          ["x"], ["y"], {"x": TensorType((1, 4, 6, 6))}, consts))
    (grp,) = fuse(g).groups
    assert "NCHWc" in match_group(grp, g)  # a convolution on NCHW data


@pytest.mark.parametrize("kernels", ["templates", "auto"])
def test_compiled_model_with_templates_matches(kernels, target, rng, tmp_path):
    g = _mlp(rng)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    m = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, kernels=kernels)
    np.testing.assert_allclose(m(x), _reference(g, x), rtol=1e-4, atol=1e-4)
    chosen = {d.task: d for d in m.templates}
    dense = [d for d in chosen.values() if d.why != "" and "dense" in d.task]
    assert len(dense) == 3
    if kernels == "templates":
        assert all(d.chosen == "template" for d in dense)
    else:
        assert all(d.template_s > 0 and d.search_s > 0 for d in dense)
        assert all((d.chosen == "template") == (d.template_s < d.search_s) for d in dense)
    assert "x1" in dense[0].line()


def test_unknown_kernel_choice_is_refused(rng):
    with pytest.raises(ShapeError, match="kernels must be one of auto, templates, search"):
        compile_graph(_mlp(rng), target="cpu", kernels="cutlass", progress=False)


def test_a_model_with_templates_exports_and_loads(target, rng, tmp_path):
    import tilewright as tw

    g = _mlp(rng)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    m = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, kernels="templates")
    assert m.peak_bytes > 0
    m.export(tmp_path / "lib")
    np.testing.assert_allclose(tw.load(tmp_path / "lib")(x), _reference(g, x), rtol=1e-4, atol=1e-4)
