"""The layout pass: convolutions on packed NCHW{b}c data, weights packed once,
transforms only where packed and plain data meet, the same outputs."""

import numpy as np
import pytest
from graph_cases import Builder, random_array, random_inputs, residual_block
from synthetic_targets import AVX2, AVX512, host_runs

import tilewright as tw
from tilewright.graph import blocked
from tilewright.graph.compile import compile as tw_compile
from tilewright.graph.infer import infer_types
from tilewright.graph.layout import convert_layout, narrow_block, pack_layout
from tilewright.graph.reference import run_reference


def inverted_residual(c=8, h=6) -> tw.graph.Graph:
    """MobileNet-v2's block: a 3-channel stem, 1x1 expand, depthwise 3x3 (ReLU6), 1x1 project,
    residual add, a 2x2 max pool, global mean, flatten: every op the pass keeps packed or meets."""
    b = Builder("inverted_residual")
    x = b.input("x", (1, 3, h, h))
    stem = b.op("conv2d", [x, b.const("w0", (c, 3, 3, 3)), b.const("b0", (c,))], "stem", (1, c, h, h),
                padding=(1, 1, 1, 1))
    e = b.op("conv2d", [stem, b.const("w1", (2 * c, c, 1, 1))], "expand", (1, 2 * c, h, h))
    e = b.op("clip", [e], "relu6", (1, 2 * c, h, h), min=0.0, max=6.0)
    d = b.op("conv2d", [e, b.const("w2", (2 * c, 1, 3, 3)), b.const("b2", (2 * c,))], "dw", (1, 2 * c, h, h),
             padding=(1, 1, 1, 1), groups=2 * c)
    p = b.op("conv2d", [d, b.const("w3", (c, 2 * c, 1, 1))], "project", (1, c, h, h))
    s = b.op("add", [p, stem], "sum", (1, c, h, h))
    s = b.op("mul", [s, b.const("scale", (c, 1, 1))], "scaled", (1, c, h, h))
    m = b.op("max_pool2d", [s], "pool", (1, c, h // 2, h // 2), kernel=(2, 2), stride=(2, 2))
    g = b.op("mean", [m], "gap", (1, c, 1, 1), axes=(2, 3), keepdims=True)
    b.op("reshape", [g], "flat", (1, c), shape=(1, c))
    return b.graph("flat", "sum")


def _ops(graph):
    return [n.op for n in graph.nodes if n.op != "constant"]


def test_packed_graph_matches_the_plain_one_with_transforms_only_at_the_edges():
    graph = inverted_residual()
    packed = pack_layout(graph, "NCHWc", 4)
    ops = _ops(packed)
    # into the stem's 3-channel block, back for the 'sum' output and for the flatten: nothing else
    assert ops.count("layout_transform") == 3, ops
    convs = [n for n in packed.nodes if n.op == "conv2d"]
    assert [n.attr("layout") for n in convs] == ["NCHW4c"] * 4
    assert packed.type_of(convs[0].inputs[0]).shape == (1, 1, 6, 6, 3)  # the stem reads NCHW3c
    assert packed.type_of(convs[2].inputs[1]).shape == (4, 1, 3, 3, 1, 4)  # depthwise: OIHW1i4o
    assert packed.nodes[-1].outputs == ("flat",) or "flat" in packed.outputs
    assert packed.outputs == graph.outputs
    assert not any(v in packed.constants for v in ("w0", "w1", "w2", "w3")), "plain weights are dead"
    inputs = random_inputs(graph)
    for got, want in zip(run_reference(packed, inputs), run_reference(graph, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_depthwise_policy_packs_only_depthwise_convolutions():
    packed = pack_layout(inverted_residual(), "depthwise", 4)
    assert [n.attr("layout", "NCHW") for n in packed.nodes if n.op == "conv2d"] == ["NCHW", "NCHW", "NCHW4c", "NCHW"]
    assert _ops(packed).count("layout_transform") == 2


@pytest.mark.skipif(not host_runs(AVX2), reason="the pinned AVX2 target does not run on this host")
def test_compiled_packed_model_matches_reference(tmp_path):
    graph = inverted_residual(c=8, h=8)
    module = tw_compile(graph, target=AVX2, trials=0, records=tmp_path / "r.db", progress=False, layout="NCHWc")
    kernels = " ".join(s.group.name for s in module.steps)
    assert "layout_transform" in kernels
    inputs = random_inputs(graph)
    for got, want in zip(module(*inputs), run_reference(graph, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_value_read_packed_and_plain_is_converted_once():
    graph = residual_block(c=8)  # the input x feeds the first conv and the residual add
    packed = convert_layout(graph, 8)
    into = [n for n in packed.nodes if n.op == "layout_transform" and n.attr("dst") == "NCHW8c"]
    assert [n.inputs for n in into] == [("x",)]
    inputs = random_inputs(graph)
    np.testing.assert_allclose(run_reference(packed, inputs)[0], run_reference(graph, inputs)[0], rtol=1e-5,
                               atol=1e-5)


def test_convolutions_that_cannot_pack_stay_plain():
    b = Builder("odd")
    x = b.input("x", (1, 12, 5, 5))
    y = b.op("conv2d", [x, b.const("w", (6, 12, 3, 3))], "y", (1, 6, 3, 3))  # 6 output channels
    b.op("conv2d", [y, b.const("w2", (6, 2, 1, 1))], "z", (1, 6, 3, 3), groups=3)  # grouped
    graph = b.graph("z")
    assert _ops(pack_layout(graph, "NCHWc", 4)) == ["conv2d", "conv2d"]


def test_compile_rejects_an_unknown_layout():
    with pytest.raises(tw.ShapeError, match="layout 'NHWC' is not one of"):
        pack_layout(residual_block(), "NHWC", 8)


def test_bad_packed_conv_names_node_and_valid_weight_blocks():
    rng = np.random.default_rng(0)
    from tilewright.graph import Graph, Node, TensorType

    x = TensorType((1, 2, 4, 4, 4))
    consts = {"w": random_array(rng, 2, 2, 3, 3, 4, 8)}
    nodes = [Node("constant", (), ("w",)), Node("conv2d", ("x", "w"), ("y",), {"layout": "NCHW4c"}, name="c")]
    with pytest.raises(tw.ShapeError, match=r"node 'c'.*ob 8 do not fit; valid: ib 4 \(x's block\), ob 4"):
        infer_types(Graph(nodes, ["x"], ["y"], {"x": x}, consts))
    nodes[1] = Node("conv2d", ("x", "w"), ("y",), {"layout": "NHWC"}, name="c")
    with pytest.raises(tw.ShapeError, match="'NHWC' is not supported; valid: 'NCHW' or 'NCHW{b}c'"):
        infer_types(Graph(nodes, ["x"], ["y"], {"x": x}, consts))


def test_numpy_layout_helpers_round_trip():
    rng = np.random.default_rng(0)
    x = random_array(rng, 1, 16, 3, 5)
    assert blocked.transform(x, "NCHW", "NCHW8c").shape == (1, 2, 3, 5, 8)
    np.testing.assert_array_equal(blocked.transform(blocked.transform(x, "NCHW", "NCHW8c"), "NCHW8c", "NCHW"), x)
    w = random_array(rng, 16, 8, 3, 3)
    np.testing.assert_array_equal(blocked.unpack_weight(blocked.pack_weight(w, 4, 8)), w)
    packed = blocked.pack_weight(w, 4, 8)
    assert packed[1, 0, 2, 1, 3, 5] == w[1 * 8 + 5, 0 * 4 + 3, 2, 1]


@pytest.mark.skipif(not host_runs(AVX2), reason="the pinned AVX2 target does not run on this host")
def test_auto_layout_measures_both_builds_and_keeps_one(tmp_path, capsys):
    from tilewright.graph.layout_choice import choose_layout
    from tilewright.records import Records

    graph = infer_types(inverted_residual(c=8, h=8))
    choice, built = choose_layout(graph, AVX2, Records(tmp_path / "r.db"), progress=True)
    assert choice in ("NCHW", "NCHWc")
    assert built is not None
    assert f"layout: {choice} (NCHW " in capsys.readouterr().out
    module = tw_compile(graph, target=AVX2, trials=0, records=tmp_path / "r.db", progress=False)
    assert module.layout in ("NCHW", "NCHWc")
    inputs = random_inputs(graph)
    for got, want in zip(module(*inputs), run_reference(graph, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_auto_layout_builds_nothing_without_a_packable_convolution(tmp_path, monkeypatch):
    from tilewright.graph import layout_choice

    monkeypatch.setattr("tilewright.graph.module.build_module", None)  # a build would fail loudly
    assert layout_choice.choose_layout(residual_block(c=4), AVX2, None) == ("NCHW", None)


def test_narrow_block_packs_the_channels_the_wide_one_does_not_split_without_transforms():
    """A 24-channel inverted residual (MobileNet-v2's second stage) on 16-channel blocks: only its
    48-channel depthwise layer packs; the stem and projection write 24 channels, the expand reads
    them. With a narrow 8-channel block they pack on 8, each conv reading its input in the block it
    already has (the projection: 16 in, 8 out), and no transform comes between them. The narrow
    block is half the vector where halves run as fast (512-bit FMAs as two 256-bit halves), none
    where 512-bit FMAs are full speed or on AVX2 (4 lanes would halve its peak)."""
    import dataclasses

    graph = infer_types(inverted_residual(c=24))
    wide_only = pack_layout(graph, "NCHWc", 16)
    assert [n.attr("layout") for n in wide_only.nodes if n.op == "conv2d"] == [None, None, "NCHW16c", None]
    mixed = pack_layout(graph, "NCHWc", 16, narrow=8)
    convs = [n for n in mixed.nodes if n.op == "conv2d"]
    assert [n.attr("layout") for n in convs] == ["NCHW8c", "NCHW16c", "NCHW16c", "NCHW8c"]
    assert mixed.type_of(convs[1].inputs[0]).shape[-1] == 8 and mixed.type_of(convs[3].inputs[0]).shape[-1] == 16
    # into the stem's 3-channel block, back for 'sum' and for the flatten, as with one block
    assert _ops(mixed).count("layout_transform") == 3, _ops(mixed)
    inputs = random_inputs(graph)
    for got, want in zip(run_reference(mixed, inputs), run_reference(graph, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert narrow_block(AVX512) == 8
    assert narrow_block(dataclasses.replace(AVX512, fma_bits=512)) == 0
    assert narrow_block(AVX2) == 0
