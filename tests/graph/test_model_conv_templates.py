"""Convolution templates inside a model: with layout "NCHWc" each packed convolution and its fused
tail (bias, ReLU, a residual add) can run on the channel-blocked implicit-GEMM template; the output
is unchanged, and a convolution the template cannot take says why."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.compile import compile as compile_graph
from tilewright.graph.fusion import fuse
from tilewright.graph.infer import infer_types
from tilewright.graph.kernel_graph import kernel_graph
from tilewright.graph.optimize import optimize
from tilewright.graph.reference import run_reference
from tilewright.graph.templates import match_group


@pytest.fixture
def target():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    return AVX2


def _cnn(rng) -> Graph:
    """conv3x3+bias -> relu -> conv3x3+bias -> + skip -> relu -> conv1x1 -> relu -> conv3x3 stride 2."""
    def w(o, i, k):
        return (rng.standard_normal((o, i, k, k)) / np.sqrt(i * k * k)).astype(np.float32)
    consts = {"w0": w(16, 8, 3), "b0": rng.standard_normal(16).astype(np.float32), "w1": w(16, 16, 3),
              "b1": rng.standard_normal(16).astype(np.float32), "w2": w(32, 16, 1), "w3": w(24, 32, 3)}
    pad = {"padding": (1, 1, 1, 1)}
    nodes = [Node("constant", (), (k,)) for k in consts]
    nodes += [Node("conv2d", ("x", "w0", "b0"), ("c0",), pad), Node("relu", ("c0",), ("r0",)),
              Node("conv2d", ("r0", "w1", "b1"), ("c1",), pad), Node("add", ("c1", "r0"), ("s1",)),
              Node("relu", ("s1",), ("r1",)), Node("conv2d", ("r1", "w2"), ("c2",)), Node("relu", ("c2",), ("r2",)),
              Node("conv2d", ("r2", "w3"), ("out",), {"padding": (1, 1, 1, 1), "stride": (2, 2)})]
    return Graph(nodes, ["x"], ["out"], {"x": TensorType((1, 8, 12, 12))}, consts, name="cnn")


def test_packed_convolutions_match_with_their_tails(rng):
    g = kernel_graph(optimize(infer_types(_cnn(rng))), "NCHWc", 8, False, 8)
    forms = sorted(m.problem.name + ":" + m.epilogue.name for m in (match_group(grp, g) for grp in fuse(g).groups)
                   if not isinstance(m, str))
    assert forms == ["conv_n1_12x12_16to16_k3x3_s1_p1_c8c8:bias+residual+relu",
                     "conv_n1_12x12_16to32_k1x1_s1_p0_c8c8:relu", "conv_n1_12x12_32to24_k3x3_s2_p1_c8c8:none",
                     "conv_n1_12x12_8to16_k3x3_s1_p1_c8c8:bias+relu"]
    plain = kernel_graph(optimize(infer_types(_cnn(rng))), "NCHW", 8, False, 8)
    assert all("NCHWc" in match_group(grp, plain) for grp in fuse(plain).groups if grp.anchor.op == "conv2d")


@pytest.mark.parametrize("kernels", ["templates", "auto"])
def test_a_model_runs_its_convolutions_on_templates(kernels, target, rng, tmp_path):
    g = _cnn(rng)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    m = compile_graph(g, target=target, records=tmp_path / "r.db", progress=False, layout="NCHWc",
                      winograd=False, kernels=kernels)
    want = run_reference(g, [x])[0]
    np.testing.assert_allclose(m(x), want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    convs = [d for d in m.templates if "conv" in d.task]
    assert len(convs) == 4
    if kernels == "templates":
        assert all(d.chosen == "template" for d in convs)
    else:
        assert all((d.chosen == "template") == (d.template_s < d.search_s) for d in convs)


def test_a_model_on_nchw_says_why_its_convolutions_have_no_template(target, rng, tmp_path):
    m = compile_graph(_cnn(rng), target=target, records=tmp_path / "r.db", progress=False, layout="NCHW",
                      winograd=False, kernels="templates")
    convs = [d for d in m.templates if "conv" in d.task]
    assert convs and all(d.chosen == "search" and "NCHWc" in d.why for d in convs)
