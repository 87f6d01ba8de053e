"""bfloat16 models on the CPU (`tw.compile(..., dtype="bfloat16")`, graph/bfloat16.py): which layers
multiply in bfloat16, the packed pair layout, float32 accumulation, and compiled modules against the
reference evaluator of the same bfloat16 graph and against the float32 model."""

import dataclasses
import importlib

import numpy as np
import pytest
from graph_cases import Builder
from synthetic_targets import AVX2, AVX512, host_runs

import tilewright as tw
from tilewright.errors import ShapeError
from tilewright.graph.bfloat16 import to_bfloat16
from tilewright.graph.infer import infer_types
from tilewright.graph.layout import convert_layout

pytest.importorskip("ml_dtypes")
reference = importlib.import_module("tilewright.graph.reference")
optimize = importlib.import_module("tilewright.graph.optimize")

BF16 = dataclasses.replace(AVX512, features=AVX512.features | {"avx512_bf16"})


def _net(c=3, o=16, hw=8):
    """conv 3x3 (c -> o) + relu, a depthwise conv, a residual 1x1 conv, the spatial mean and a dense layer."""
    b = Builder("bf16_net", seed=3)
    x = b.input("x", (1, c, hw, hw))
    y = b.op("conv2d", [x, b.const("w1", (o, c, 3, 3)), b.const("b1", (o,))], "c1", (1, o, hw, hw),
             padding=(1, 1, 1, 1))
    y = b.op("relu", [y], "r1", (1, o, hw, hw))
    d = b.op("conv2d", [y, b.const("wd", (o, 1, 3, 3))], "dw", (1, o, hw, hw), padding=(1, 1, 1, 1), groups=o)
    z = b.op("conv2d", [d, b.const("w2", (o, o, 1, 1))], "c2", (1, o, hw, hw))
    z = b.op("add", [z, y], "res", (1, o, hw, hw))
    m = b.op("mean", [z], "m", (1, o, 1, 1), axes=(2, 3), keepdims=False)
    m = b.op("reshape", [m], "flat", (1, o), shape=(1, o))
    return b.graph(b.op("dense", [m, b.const("wf", (10, o)), b.const("bf", (10,))], "out", (1, 10)))


def test_pass_rounds_weights_and_casts_inputs_of_groups_one_convs_and_dense_layers():
    g = to_bfloat16(infer_types(_net()))
    ops = {n.outputs[0]: n for n in g.nodes}
    c1, dw, c2, fc = ops["c1"], ops["dw"], ops["c2"], ops["out"]
    for node in (c1, c2, fc):
        assert g.type_of(node.inputs[0]).dtype == g.type_of(node.inputs[1]).dtype == "bfloat16"
        assert g.type_of(node.outputs[0]).dtype == "float32"  # accumulated in float32
        assert ops[node.inputs[0]].op == "cast"
    assert g.type_of(dw.inputs[1]).dtype == "float32"  # depthwise: no channel sum for a pair instruction
    assert g.type_of(c1.inputs[0]).shape == (1, 4, 8, 8)  # 3 channels zero-padded to a pair
    w1 = g.constants[c1.inputs[1]]
    assert w1.dtype.name == "bfloat16" and w1.shape == (16, 4, 3, 3) and not np.any(w1[:, 3].astype(np.float32))


def test_layout_pass_packs_bfloat16_weights_with_channel_pairs_innermost():
    g = convert_layout(to_bfloat16(infer_types(_net())), 16, narrow=8)
    conv = next(n for n in g.nodes if n.op == "conv2d" and n.outputs[0].startswith("c2"))
    w = g.constants[conv.inputs[1]]
    assert conv.attr("layout") == "NCHW16c" and w.shape == (1, 1, 1, 1, 8, 16, 2) and w.dtype.name == "bfloat16"
    plain = g.constants[next(n for n in to_bfloat16(infer_types(_net())).nodes
                             if n.outputs[0] == "c2").inputs[1]].astype(np.float32)
    # output channel o, input channel 2 * p + j sits at [0, 0, 0, 0, p, o, j]
    np.testing.assert_array_equal(w.astype(np.float32)[0, 0, 0, 0, 3, 5, 1], plain[5, 7, 0, 0])
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    packed, plain_graph = reference.run_reference(g, [x])[0], reference.run_reference(
        to_bfloat16(infer_types(_net())), [x])[0]
    np.testing.assert_allclose(packed, plain_graph, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", [AVX2, BF16], ids=["avx2", "avx512_bf16"])
def test_compiled_bfloat16_model_matches_its_reference_and_the_float_model(tmp_path, target):
    if not host_runs(target):
        pytest.skip(f"the host cannot run {target.isa} kernels with {sorted(target.features - AVX2.features)}")
    graph = _net()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    if "avx512_bf16" in target.features:
        module = tw.compile(graph, target=target, dtype="bfloat16", trials=0, layout="NCHWc", records=tmp_path / "r.db")
    else:
        with pytest.warns(RuntimeWarning, match="without AVX512-BF16: bfloat16 pairs run as float32 FMAs"):
            module = tw.compile(graph, target=target, dtype="bfloat16", trials=0, layout="NCHWc",
                                records=tmp_path / "r.db")
    got = np.asarray(module(x))
    assert got.dtype == np.float32
    want = reference.run_reference(to_bfloat16(optimize.optimize(infer_types(graph))), [x])[0]
    scale = np.abs(want).max()
    # the same bfloat16 values in, float32 sums in another order: one bfloat16 step of an activation at most
    np.testing.assert_allclose(got, want, atol=2 ** -7 * scale)
    exact = reference.run_reference(infer_types(graph), [x])[0]
    assert np.abs(got - exact).max() < 2e-2 * scale
    assert np.abs(got - exact).max() > 0  # the products really ran in bfloat16
    sources = [k.source for k in module.kernels.values()]
    if "avx512_bf16" in target.features:
        assert any("_mm512_dpbf16_ps" in s for s in sources)
    else:  # the widened spelling: two FMAs per pair
        assert any("_mm256_fmadd_ps(tw_a1" in s for s in sources)


@pytest.mark.parametrize("target", ["cpu", AVX2], ids=["host", "avx2"])
def test_bfloat16_conversion_vectors_round_to_nearest_even_and_keep_nans_bit_exact(target):
    """Each x86 level narrows the int32 lanes its own way (vpmovdw, shuffles): all bit-exact."""
    from tilewright.reference.values import round_to_bfloat16

    if not host_runs(tw.Target(target) if isinstance(target, str) else target):
        pytest.skip("the host cannot run AVX2 kernels")
    n = 96  # three vectors of 32 lanes on AVX-512, and whole vectors on narrower targets
    x = tw.placeholder((n,), "float32", name="x")
    y = tw.compute(x.shape, lambda i: x[i].astype("bfloat16"), name="y")
    z = tw.compute(x.shape, lambda i: y[i].astype("float32"), name="z")
    to_bf16, round_trip = tw.build([x, y], target=target), tw.build([x, z], target=target)
    assert "tw_f32_to_bf16_x" in to_bf16.source and "tw_bf16_to_f32_x" in round_trip.source
    bits = np.random.default_rng(2).integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits[:12] = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x3F808000,
                 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0x0]  # inf, NaNs (signalling too), denormals, ties, overflow
    xv = bits.view(np.float32)
    out = np.zeros(n, np.uint16)
    to_bf16(xv, out)
    np.testing.assert_array_equal(out, (round_to_bfloat16(xv).view(np.uint32) >> 16).astype(np.uint16))
    back = np.zeros(n, np.float32)
    round_trip(xv, back)
    np.testing.assert_array_equal(back.view(np.uint32), round_to_bfloat16(xv).view(np.uint32))


def test_bfloat16_products_need_both_operands_bfloat16():
    b = Builder("mixed")
    x = b.input("x", (1, 4, 4, 4))
    b.op("cast", [x], "xb", (1, 4, 4, 4), dtype="bfloat16")
    b.op("conv2d", ["xb", b.const("w", (4, 4, 1, 1))], "y", (1, 4, 4, 4))
    g = b.graph("y")
    with pytest.raises(ShapeError, match="bfloat16 products need x and weight both bfloat16"):
        infer_types(g.replace(types={"x": g.types["x"]}))


def test_cpu_dtypes_are_float32_and_bfloat16(tmp_path):
    with pytest.raises(ShapeError, match="CPU models run 'float32' or 'bfloat16'"):
        tw.compile(_net(), target=AVX2, dtype="float16", records=tmp_path / "r.db")


def test_a_residual_stream_is_stored_once_in_bfloat16_and_widened_where_it_is_added():
    """r = relu(conv(x)) feeds conv2 and the addition: stored as bfloat16 only (PyTorch's bfloat16
    semantics), the addition reading it widened inside its own kernel."""
    from tilewright.graph.fusion import fuse

    b = Builder("residual", seed=4)
    x = b.input("x", (1, 16, 6, 6))
    r = b.op("relu", [b.op("conv2d", [x, b.const("w1", (16, 16, 1, 1))], "c1", (1, 16, 6, 6))], "r", (1, 16, 6, 6))
    y = b.op("add", [b.op("conv2d", [r, b.const("w2", (16, 16, 1, 1))], "c2", (1, 16, 6, 6)), r], "y", (1, 16, 6, 6))
    g = to_bfloat16(infer_types(b.graph(y)))
    add = next(n for n in g.nodes if n.op == "add")
    widen = next(n for n in g.nodes if n.outputs[0] == add.inputs[1])
    assert widen.op == "cast" and widen.attr("dtype") == "float32" and g.type_of(widen.inputs[0]).dtype == "bfloat16"
    groups = fuse(g).groups
    assert not any("r" in grp.outputs for grp in groups)  # no float32 copy of r leaves its kernel
    assert any(widen in grp.nodes and add in grp.nodes for grp in groups)
    xv = np.random.default_rng(5).standard_normal((1, 16, 6, 6)).astype(np.float32)
    got = reference.run_reference(g, [xv])[0]
    np.testing.assert_allclose(got, reference.run_reference(infer_types(b.graph(y)), [xv])[0], rtol=0.05, atol=0.05)


def test_an_exported_bfloat16_model_loads_and_matches(tmp_path):
    """export writes the bfloat16 weights as their 16-bit storage; tw.load runs them as the module does."""
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    x = np.random.default_rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.warns(RuntimeWarning):
        module = tw.compile(_net(), target=AVX2, dtype="bfloat16", trials=0, layout="NCHWc", records=tmp_path / "r.db")
    module.set_num_threads(1)
    loaded = tw.load(module.export(tmp_path / "m"))
    np.testing.assert_array_equal(loaded(x), module(x))


def test_without_ml_dtypes_the_error_says_what_to_install(monkeypatch):
    import sys

    from tilewright.errors import TilewrightError

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    with pytest.raises(TilewrightError, match=r"pip install ml_dtypes \(the extra tilewright\[bf16\]\)"):
        to_bfloat16(infer_types(_net()))
