"""tw.intrin.embed: the CP-SAT embedding of an intrinsic into an operator (Rieber et al.)."""

import pytest

import tilewright as tw
from tilewright.intrin import EmbeddingError, embed, vta_gemm
from tilewright.search.vta_embed import ConvProblem
from tilewright.targets.vta import VTAConfig

pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")

VTA16 = VTAConfig()
VTA8 = VTAConfig(batch=8, block_in=8, block_out=8)


def test_channels_that_fit_map_as_tvm_template():
    """No padding needed: the first embedding is TVM's hand mapping n -> batch, oc -> out, ic -> in."""
    for cfg, batch in ((VTA16, 1), (VTA8, 8)):
        first = embed(ConvProblem(batch, 64, 14, 14, 32, 3, 3, 1, 1).te(), vta_gemm(cfg))[0]
        axes = first.axis_map()
        assert axes["o"] == ("o",) and axes["i"] == ("rc",)
        assert axes["n"] == (("n",) if batch > 1 else ())
        assert first.mac_overhead == 0 and not first.unrolled and not first.padded


def test_low_channel_conv_is_unrolled_not_padded():
    """3 input channels: im2col of (rc, rh, rw) = 27 padded to 32 beats padding rc to 16 (MACs x5.3)."""
    e = embed(ConvProblem(1, 3, 32, 32, 64, 3, 3, 1, 1).te(), vta_gemm(VTA16), top_k=3)
    first = e[0]
    assert first.axis_map()["i"] == ("rc", "rh", "rw")
    assert first.macs * 27 == first.macs_min * 32
    assert {d for _, d in first.unrolled} == {2, 3}
    kinds = [r.kind for r in first.rewrites]
    assert "stencil unroll" in kinds and "fuse" in kinds and "pad" in kinds
    assert [x.objective for x in e] == sorted(x.objective for x in e)
    assert "rc*rh*rw" in str(first)


def test_batch_one_on_8x8x8_packs_the_image():
    """Batch lanes with a batch of 1: image rows or columns packed into the lanes, no padding."""
    first = embed(ConvProblem(1, 64, 56, 56, 64, 3, 3, 1, 1).te(), vta_gemm(VTA8))[0]
    assert set(first.axis_map()["n"]) <= {"h", "w"} and first.mac_overhead == 0
    assert any(r.kind == "image pack" for r in first.rewrites)


def test_dense_layer_embeds():
    a = tw.placeholder((4, 64), "int8", name="a")
    b = tw.placeholder((32, 64), "int8", name="b")
    k = tw.reduce_axis(64, "k")
    c = tw.compute((4, 32), lambda i, j: tw.sum(a[i, k].astype("int32") * b[j, k].astype("int32"), axis=k), name="c")
    first = embed(c, vta_gemm(VTA16))[0]
    assert first.axis_map() == {"n": (), "o": ("j",), "i": ("k",)}


def test_padding_refused_names_the_constraint():
    with pytest.raises(EmbeddingError, match="pad"):
        embed(ConvProblem(1, 3, 16, 16, 64, 3, 3, 1, 1).te(), vta_gemm(VTA16), pad=False, unroll=False)


def test_other_dataflow_is_refused():
    x = tw.placeholder((1, 16, 8, 8), "float32", name="x")
    w = tw.placeholder((16, 16, 3, 3), "float32", name="w")
    with pytest.raises(EmbeddingError, match="dataflow"):
        embed(tw.ops.conv2d(x, w), vta_gemm(VTA16))


def test_bad_arguments():
    y = ConvProblem(1, 16, 8, 8, 16, 1, 1).te()
    with pytest.raises(EmbeddingError, match="TensorIntrin"):
        embed(y, "vta.gemm")
    with pytest.raises(EmbeddingError, match="top_k"):
        embed(y, vta_gemm(VTA16), top_k=0)
    with pytest.raises(EmbeddingError, match="reduction"):
        embed(tw.placeholder((4,), "int8", name="p"), vta_gemm(VTA16))
    p = tw.placeholder((4,), "int8", name="p")
    with pytest.raises(EmbeddingError, match="reduction"):
        embed(tw.compute((4,), lambda i: p[i] + 1, name="inc"), vta_gemm(VTA16))


def test_solve_time_does_not_grow_with_channels():
    """The model's size depends on the intrinsic and the axes' divisors, not on the channel counts."""
    small = embed(ConvProblem(1, 16, 14, 14, 16, 3, 3, 1, 1).te(), vta_gemm(VTA16), top_k=1)[0]
    large = embed(ConvProblem(1, 512, 14, 14, 512, 3, 3, 1, 1).te(), vta_gemm(VTA16), top_k=1)[0]
    assert large.axis_map() == small.axis_map()
    assert large.seconds < 20 * max(small.seconds, 0.01)


def test_a_solver_timeout_is_reported(monkeypatch):
    from ortools.sat.python import cp_model

    from tilewright.intrin import SolverTimeout

    monkeypatch.setattr(cp_model.CpSolver, "Solve", lambda self, model, *a: cp_model.UNKNOWN)
    with pytest.raises(SolverTimeout, match="no answer within 0.5 s"):
        embed(ConvProblem(1, 16, 8, 8, 16, 3, 3, 1, 1).te(), vta_gemm(VTA16), time_limit=0.5)


def test_product_objective_ranks_as_the_linear_one(monkeypatch):
    """Past LINEAR_OBJECTIVE_LIMIT combinations the objective is built from products; same ranking."""
    from tilewright.intrin import embed_model

    op, intrin = ConvProblem(1, 3, 16, 16, 32, 3, 3, 1, 1).te(), vta_gemm(VTA16)
    linear = [(e.axis_map(), e.objective) for e in embed(op, intrin, top_k=3)]
    monkeypatch.setattr(embed_model, "LINEAR_OBJECTIVE_LIMIT", 0)
    product = [(e.axis_map(), e.objective) for e in embed(op, intrin, top_k=3)]
    assert [o for _, o in product] == [o for _, o in linear] and product[0] == linear[0]


def test_a_tensorize_the_matcher_cannot_place_says_where_the_embedder_would():
    """s[C].tensorize on loops that do not pair with the intrinsic's: the error names the loops and
    adds the embedder's mapping with its rewrites."""
    from tilewright.errors import TensorizeError
    from tilewright.intrin import get

    A = tw.placeholder((8, 32), "uint8", name="A")
    B = tw.placeholder((32, 16), "int8", name="B")
    k = tw.reduce_axis(32, "k")
    C = tw.compute((8, 16), lambda i, j: tw.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k),
                   name="C")
    s = tw.create_schedule(C)
    s[C].tensorize(s[C].op.axis[1], get("x86.dot_8x4_u8s8"))
    with pytest.raises(TensorizeError) as err:
        tw.lower(s, [A, B, C])
    text = str(err.value)
    assert "split or reorder" in text and "the embedder (tw.intrin.embed) places it" in text
    assert "i -> j:8" in text and "k -> k:4" in text and "reorder         B" in text


def test_a_missing_solver_is_its_own_error_and_the_tensorize_hint_stays_quiet(monkeypatch):
    """Without OR-Tools, embed raises SolverMissing (an EmbeddingError saying what to install) and a
    tensorize error carries no embedder hint instead of a misleading 'no embedding'."""
    import builtins

    from tilewright.intrin import SolverMissing, get
    from tilewright.intrin.embed import embedding_hint

    real_import = builtins.__import__

    def no_ortools(name, *args, **kwargs):
        if name.startswith("ortools"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    A = tw.placeholder((8, 32), "uint8", name="A")
    B = tw.placeholder((32, 16), "int8", name="B")
    k = tw.reduce_axis(32, "k")
    C = tw.compute((8, 16), lambda i, j: tw.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k),
                   name="C")
    assert "places it" in embedding_hint(C, get("x86.dot_8x4_u8s8"))
    monkeypatch.setattr(builtins, "__import__", no_ortools)
    with pytest.raises(SolverMissing, match=r"pip install 'tilewright\[embed\]'"):
        embed(ConvProblem(1, 16, 8, 8, 16, 3, 3, 1, 1).te(), vta_gemm(VTA16))
    assert embedding_hint(C, get("x86.dot_8x4_u8s8")) == ""
