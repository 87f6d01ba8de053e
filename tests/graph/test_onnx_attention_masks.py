"""ONNX Attention with run-time masks, key padding and sliding windows, and RotaryEmbedding, through
from_onnx + tw.compile against onnx's ReferenceEvaluator; the shape arithmetic of expanded
attention folds at import; what is not computed as ONNX defines it is refused by name."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.graph.bfloat16 import bfloat16_dtype  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError, from_onnx  # noqa: E402
from tilewright.graph.frontend.onnx_fold import fold  # noqa: E402

_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
          np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int64): TensorProto.INT64,
          np.dtype(bfloat16_dtype()): TensorProto.BFLOAT16}


def _model(op, feeds: dict, outs, opset, **attrs):
    """One `op` node over `feeds` (name -> array; "" entries are absent optional inputs)."""
    node = helper.make_node(op, list(feeds), outs, name="n", **attrs)
    vi = [helper.make_tensor_value_info(k, _TYPES[v.dtype], list(v.shape)) for k, v in feeds.items() if k]
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                                                for o in outs if o])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, tmp_path, rtol=1e-5, atol=1e-5):
    """Compiled outputs against onnx's reference; returns the reference's outputs."""
    present = {k: v for k, v in feeds.items() if k}
    want = ReferenceEvaluator(model).run(None, present)
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    got = tw.compile(model, list(present.values()), target=AVX2, records=tmp_path / "r.db", progress=False)(
        *present.values())
    for g, w in zip(got if isinstance(got, list) else [got], want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=rtol, atol=atol)
    return want


def _qkv(rng, b=2, hq=4, hkv=2, s=3, length=5, d=8, dv=6):
    return {"Q": rng.standard_normal((b, hq, s, d)).astype(np.float32),
            "K": rng.standard_normal((b, hkv, length, d)).astype(np.float32),
            "V": rng.standard_normal((b, hkv, length, dv)).astype(np.float32)}


def _mask(rng, shape, kind):
    allowed = rng.random(shape) > 0.3
    if len(shape) > 1:
        allowed.reshape(-1, shape[-1])[0] = False  # one row masked throughout: ONNX gives it zeros
    if kind == "bool":
        return allowed
    return np.where(allowed, rng.standard_normal(shape), -np.inf).astype(np.float32)


@pytest.mark.parametrize("shape, kind", [((3, 5), "bool"), ((3, 5), "float"), ((4, 3, 5), "float"),
                                         ((2, 1, 3, 5), "bool"), ((1, 3), "float"), ((5,), "bool")])
def test_masks_of_each_rank_with_fully_masked_rows(shape, kind, tmp_path):
    """Masks broadcast from the right over (batch, heads, queries, keys); a shorter key axis is padded
    masked; probabilities (mode 3) and output of a fully masked row are zero."""
    rng = np.random.default_rng(len(shape))
    feeds = {**_qkv(rng), "attn_mask": _mask(rng, shape, kind)}
    want = _check(_model("Attention", feeds, ["Y", "", "", "qk"], 23, qk_matmul_output_mode=3), feeds, tmp_path)
    assert not np.isnan(want[0]).any() and (want[1] == 0).all(axis=-1).any() == (len(shape) > 1)


@pytest.mark.parametrize("mode", [0, 2])
def test_causal_with_a_mask_and_a_past_cache(mode, tmp_path):
    rng = np.random.default_rng(7)
    feeds = {**_qkv(rng, s=2, length=3), "attn_mask": _mask(rng, (2, 5), "bool"),
             "past_key": rng.standard_normal((2, 2, 2, 8)).astype(np.float32),
             "past_value": rng.standard_normal((2, 2, 2, 6)).astype(np.float32)}
    model = _model("Attention", feeds, ["Y", "pk", "pv", "qk"], 23, is_causal=1, softcap=3.0,
                   qk_matmul_output_mode=mode)
    _check(model, feeds, tmp_path)


@pytest.mark.parametrize("attrs", [{"left_window_size": 1}, {"left_window_size": 0, "right_window_size": 2},
                                   {"is_causal": 1, "left_window_size": 2, "softmax_precision": 11}])
def test_sliding_windows_with_a_past_cache(attrs, tmp_path):
    rng = np.random.default_rng(11)
    feeds = {**_qkv(rng, s=3, length=3), "attn_mask": _mask(rng, (1, 3, 6), "float"),
             "past_key": rng.standard_normal((2, 2, 3, 8)).astype(np.float32),
             "past_value": rng.standard_normal((2, 2, 3, 6)).astype(np.float32)}
    _check(_model("Attention", feeds, ["Y"], 25, **attrs), feeds, tmp_path)


def _nonpad_model(feeds, attrs):
    names = ["Q", "K", "V", "attn_mask", "", "", "nonpad_kv_seqlen"]
    node = helper.make_node("Attention", names, ["Y"], **attrs)
    vi = [helper.make_tensor_value_info(k, _TYPES[feeds[k].dtype], list(feeds[k].shape)) for k in names if k]
    return helper.make_model(helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("Y", 1, None)]),
                             opset_imports=[helper.make_opsetid("", 25)])


@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1},
                                   {"is_causal": 1, "left_window_size": 1, "right_window_size": 0}])
def test_nonpad_kv_seqlen_pads_keys_and_aligns_causal_per_batch(attrs, tmp_path):
    """Keys past each batch's length are masked; causal and window masks end at that length, so a batch
    shorter than the queries has leading rows with no key (zeros)."""
    rng = np.random.default_rng(5)
    feeds = {**_qkv(rng, s=3, length=6), "attn_mask": _mask(rng, (4, 3, 6), "bool"),
             "nonpad_kv_seqlen": np.array([6, 2], np.int64)}
    _check(_nonpad_model(feeds, attrs), feeds, tmp_path)


def test_causal_mask_spans_every_query_under_a_mask_broadcast_over_queries(tmp_path):
    """A (heads, 1, keys) mask with is_causal: the causal mask covers all S queries, as the function
    body builds it (onnx's Python reference sizes it by the mask's query axis, 1): the result equals
    the mask broadcast over the queries first."""
    rng = np.random.default_rng(6)
    feeds = {**_qkv(rng, s=3, length=6), "attn_mask": _mask(rng, (4, 1, 6), "float"),
             "nonpad_kv_seqlen": np.array([6, 4], np.int64)}
    wide = {**feeds, "attn_mask": np.broadcast_to(feeds["attn_mask"], (4, 3, 6)).copy()}
    want = ReferenceEvaluator(_nonpad_model(wide, {"is_causal": 1})).run(None, wide)[0]
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    module = tw.compile(_nonpad_model(feeds, {"is_causal": 1}), list(feeds.values()), target=AVX2,
                        records=tmp_path / "r.db", progress=False)
    np.testing.assert_allclose(module(*feeds.values()), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, tol", [("float16", 2e-3), ("bfloat16", 2e-2)])
def test_16_bit_inputs_are_computed_in_float32(dtype, tol, tmp_path):
    rng = np.random.default_rng(2)
    feeds = {k: v.astype(np.float16 if dtype == "float16" else bfloat16_dtype()) for k, v in _qkv(rng).items()}
    feeds["attn_mask"] = _mask(rng, (3, 5), "bool")
    _check(_model("Attention", feeds, ["Y"], 23, is_causal=1), feeds, tmp_path, rtol=tol, atol=tol)


@pytest.mark.parametrize("why, dtype, extra, attrs", [
    ("int32", TensorProto.INT32, {}, {}),
    ("softmax_precision float16 on float32", TensorProto.FLOAT, {}, {"softmax_precision": 10}),
    ("nonpad_kv_seqlen with past_key", TensorProto.FLOAT, {"past": True}, {}),
])
def test_what_is_not_computed_as_onnx_defines_is_refused(why, dtype, extra, attrs):
    names = ["Q", "K", "V", "", "pk", "pv", "n"] if extra else ["Q", "K", "V"]
    vi = [helper.make_tensor_value_info(k, dtype, [1, 2, 3, 4]) for k in names if k and k != "n"]
    vi += [helper.make_tensor_value_info("n", TensorProto.INT64, [1])] if extra else []
    node = helper.make_node("Attention", names, ["Y"], name="att", **attrs)
    model = helper.make_model(helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("Y", dtype, None)]),
                              opset_imports=[helper.make_opsetid("", 24)])
    with pytest.raises(UnsupportedOpError, match=f"'Attention' at node 'att'.*{why}"):
        from_onnx(model)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot, ids, three_d", [(0, True, False), (4, True, False), (0, False, False), (4, True, True)])
def test_rotary_embedding(interleaved, rot, ids, three_d, tmp_path):
    """Whole or partial rotation (the rest passes through), halves or adjacent pairs, caches picked by
    position ids or given per (batch, position)."""
    rng = np.random.default_rng(rot + 2 * interleaved)
    x = rng.standard_normal((2, 3, 4 * 8) if three_d else (2, 4, 3, 8)).astype(np.float32)
    half = (rot or 8) // 2
    cache = (10, half) if ids else (2, 3, half)
    feeds = {"X": x, "cos": rng.standard_normal(cache).astype(np.float32),
             "sin": rng.standard_normal(cache).astype(np.float32)}
    if ids:
        feeds["pos"] = np.array([[0, 9, 4], [-1, 2, 2]], np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot, **({"num_heads": 4} if three_d else {})}
    _check(_model("RotaryEmbedding", feeds, ["Y"], 23, **attrs), feeds, tmp_path)


def test_rotary_embedding_refuses_an_odd_rotary_dim():
    feeds = {"X": np.zeros((1, 2, 3, 8), np.float32), "cos": np.zeros((1, 3, 3), np.float32),
             "sin": np.zeros((1, 3, 3), np.float32)}
    with pytest.raises(UnsupportedOpError, match="rotary_embedding_dim 3 \\(even"):
        from_onnx(_model("RotaryEmbedding", feeds, ["Y"], 23, rotary_embedding_dim=3))


def test_expanded_attention_shape_arithmetic_folds():
    """The forms the Attention function body writes on shapes: head-count tests, integer Mod, Expand
    of a known shape, CastLike to a run-time tensor's dtype, Reduce* on known values."""
    heads = [np.array([4]), np.array([2])]
    assert fold("Mod", {}, [np.array([-7]), np.array([3])], [None])[0].tolist() == [2]
    assert fold("Mod", {"fmod": 1}, [np.array([-7]), np.array([3])], [None])[0].tolist() == [-1]
    same = fold("Equal", {}, heads, [None])[0]
    assert fold("And", {}, [fold("Not", {}, [same], [None])[0], np.array([True])], [None])[0].tolist() == [True]
    assert fold("Expand", {}, [np.array([[1], [2]]), np.array([2, 3])], [None])[0].tolist() == [[1, 1, 1], [2, 2, 2]]
    assert fold("LessOrEqual", {}, [np.arange(3), np.array(1)], [None])[0].tolist() == [True, True, False]
    top = fold("ReduceMax", {"keepdims": 0}, [np.array([[1, 5], [7, 2]]), np.array([-1])], [None])[0]
    assert top.tolist() == [5, 7]
    neg_inf = fold("CastLike", {}, [np.array([-np.inf], np.float32), None], [None], like="float16")[0]
    assert neg_inf.dtype == np.float16 and np.isneginf(neg_inf).all()
    assert fold("CastLike", {}, [np.array([1.0]), None], [None], like=None) is None  # the target's dtype unknown
