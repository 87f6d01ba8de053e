"""Embeddings of the VTA GEMM realized as one native accelerator convolution plus host gathers: every
candidate the embedder ranks, and TVM's padding template, bit-exact in the simulator."""

import numpy as np
import pytest

from tilewright.bench.vta_embed_payoff import numpy_conv, random_conv_inputs
from tilewright.intrin import EmbeddingError, embed, vta_gemm
from tilewright.ops.blocked_conv import shift_bias_clip
from tilewright.search.vta_embed import (
    ConvProblem,
    EmbeddedConv,
    Mapping,
    choose_embedding,
    realize,
    reference_embedding,
    run_realization,
    tune_embedding,
)
from tilewright.targets.vta import VTAConfig

pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")

VTA16 = VTAConfig()
VTA8 = VTAConfig(batch=8, block_in=8, block_out=8)


def test_the_numpy_oracle_is_the_reference_evaluators_convolution():
    """numpy_conv (the check every realization is held to) against tw.evaluate of the te operator."""
    import tilewright as tw

    p = ConvProblem(2, 5, 11, 9, 16, 3, 2, 1, 2, 2, 1, 2, 1)
    x, w, bias = random_conv_inputs(p, seed=4)
    y = p.te()
    placeholders, stack = {}, [y]
    while stack:
        t = stack.pop()
        stack.extend(t.op.input_tensors)
        if not t.op.input_tensors and hasattr(t.op, "dtype"):
            placeholders[t.name] = t
    acc = tw.evaluate([y], {placeholders["data"]: x, placeholders["weight"]: w})[0].astype(np.int64)
    want = np.clip((acc >> 8) + bias[None, :, None, None], 0, 127).astype(np.int8)
    np.testing.assert_array_equal(numpy_conv(p, x, w, bias), want)


PROBLEMS = [
    ConvProblem(1, 3, 20, 20, 32, 3, 3, 1, 1, name="low channel"),
    ConvProblem(1, 1, 24, 40, 16, 5, 7, 0, 0, 2, 2, name="one channel, strided"),
    ConvProblem(1, 16, 14, 14, 16, 3, 3, 0, 0, 1, 1, 2, 2, name="dilated"),
    ConvProblem(2, 16, 9, 9, 32, 3, 3, 1, 1, name="batch 2"),
    ConvProblem(1, 16, 9, 9, 16, 1, 1, 0, 0, 2, 2, name="1x1 strided"),
]


@pytest.mark.parametrize("cfg", [VTA16, VTA8], ids=["1x16x16", "8x8x8"])
@pytest.mark.parametrize("p", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_every_candidate_is_bit_exact(p, cfg):
    x, w, bias = random_conv_inputs(p, seed=1)
    want = numpy_conv(p, x, w, bias)
    ran = 0
    for m in [reference_embedding(p, cfg)] + [Mapping.of(e) for e in embed(p.te(), vta_gemm(cfg), top_k=8)]:
        try:
            got, kernel = run_realization(realize(p, m, cfg), x, w, bias)
        except EmbeddingError as exc:  # a candidate the accelerator's loads cannot express: said, not run
            assert "unrolled" in str(exc)
            continue
        np.testing.assert_array_equal(got, want, err_msg=m.label)
        assert kernel.stats().cycles > 0
        ran += 1
    assert ran >= 3


def test_low_channel_embedding_cuts_macs_and_weights():
    p = ConvProblem(1, 1, 40, 60, 32, 5, 7, 0, 0, 2, 2)
    ref = realize(p, reference_embedding(p, VTA16), VTA16)
    best = realize(p, Mapping.of(embed(p.te(), vta_gemm(VTA16))[0]), VTA16)
    assert ref.shape.macs == 16 * p.macs
    assert best.shape.macs < 1.5 * p.macs
    assert best.shape.kernel_h * best.shape.kernel_w * best.shape.in_channels < 16 * 35


def test_digits_must_fill_the_block():
    p = ConvProblem(1, 16, 8, 8, 16, 3, 3, 1, 1)
    bad = Mapping((), ((("o",), 8, 1),), ((("rc",), 16, 1),), frozenset())
    with pytest.raises(EmbeddingError, match="multiply to 16"):
        realize(p, bad, VTA16)


def test_the_choice_by_cycles_runs_bit_exact():
    """choose_embedding: the template and the top embeddings by simulated cycles; the chosen one, packed once,
    runs NCHW in and out."""
    p = ConvProblem(1, 3, 24, 24, 32, 3, 3, 1, 1, name="stem")
    r, tiling, tried = choose_embedding(p, VTA16)
    assert r.mapping.label != "padding reference"  # padding 3 channels to 16 costs 5.3x the MACs
    assert min(c for _, _, c, _ in tried if c) == min(c for _, t, c, _ in tried if c and t == tiling)
    x, w, bias = random_conv_inputs(p, seed=2)
    conv = EmbeddedConv(r, w, bias, tiling=tiling)
    np.testing.assert_array_equal(conv(x), numpy_conv(p, x, w, bias))
    assert conv.stats().cycles == min(c for _, _, c, _ in tried if c)


def test_tuning_chooses_among_embeddings_and_tilings():
    p = ConvProblem(1, 8, 12, 12, 16, 3, 3, 1, 1)
    r, tiling, seconds, tried = tune_embedding(p, VTA8, trials=12, top_k=2)
    assert len(tried) == 3 and seconds == min(s for _, _, s, _ in tried if s)
    assert r.mapping.label != "padding reference"  # batch 1 on 8 lanes: padding costs 8x the MACs
    x, w, bias = random_conv_inputs(p, seed=3)
    conv = EmbeddedConv(r, w, bias, tiling=tiling)
    np.testing.assert_array_equal(conv(x), numpy_conv(p, x, w, bias))
    assert conv.time().seconds == pytest.approx(seconds)


def _nchw_program(p: ConvProblem, bias=True):
    import tilewright as tw

    X = tw.placeholder((p.batch, p.in_channels, p.height, p.width), "int8", name="X")
    W = tw.placeholder((p.out_channels, p.in_channels, p.kernel_h, p.kernel_w), "int8", name="W")
    B = tw.placeholder((p.out_channels,), "int32", name="B") if bias else None
    acc = tw.ops.conv2d(X, W, None, stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
                        dilation=(p.dilation_h, p.dilation_w), out_dtype="int32")
    Y = shift_bias_clip(acc, B, shift=6, lo=-128, hi=127)
    return [X, W, B, Y] if bias else [X, W, Y]


def test_tw_tune_on_vta_routes_an_nchw_conv_through_embeddings(tmp_path):
    """tw.tune / tw.build with target "vta" take the NCHW program of any channel count: the search covers
    the template and the embeddings, the kernel is bit-exact against the reference evaluator of the same
    te program, and tw.build without tuning picks by simulated cycles, with the store's tiling."""
    import tilewright as tw

    p = ConvProblem(1, 3, 16, 16, 16, 3, 3, 1, 1)
    args = _nchw_program(p)
    result = tw.tune(args, target="vta", trials=6, records=tmp_path / "r.sqlite")
    labels = [label for label, *_ in result.tried]
    assert "padding reference" in labels and len(labels) >= 2
    assert result.realization.mapping.label != "padding reference" and "through embeddings" in result.report()
    x, w, bias = random_conv_inputs(p, seed=4)
    want = tw.evaluate(args[-1], {args[0]: x, args[1]: w, args[2]: bias})
    out = np.zeros(args[-1].shape, np.int8)
    kernel = result.build()
    kernel(x, w, bias, out)
    np.testing.assert_array_equal(out, want)
    assert kernel.time().seconds == pytest.approx(result.seconds)
    with tw.records(tmp_path / "r.sqlite"):
        built = tw.build(args, target="vta")
    out[...] = 0
    built(x, w, bias, out)
    np.testing.assert_array_equal(out, want)


def test_vta_refuses_an_nchw_conv_it_cannot_run():
    import tilewright as tw
    from tilewright.errors import LoweringError

    X = tw.placeholder((1, 4, 8, 8), "uint8", name="X")
    W = tw.placeholder((8, 4, 3, 3), "int8", name="W")
    Y = shift_bias_clip(tw.ops.conv2d(X, W, None, padding=1, out_dtype="int32"), None)
    with pytest.raises(LoweringError, match="multiplies int8 by int8"):
        tw.build([X, W, Y], target="vta")
