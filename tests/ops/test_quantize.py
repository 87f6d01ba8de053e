"""requantize (ONNX QLinearConv's output stage) and int8 conv2d_nchwc, against NumPy."""

import numpy as np
import pytest

import tilewright as tw


def test_requantize_rounds_half_to_even_and_saturates():
    acc = tw.placeholder((1, 2, 3), "int32", name="acc")
    mult = tw.placeholder((2,), "float32", name="mult")
    bias = tw.placeholder((2,), "int32", name="bias")
    q = tw.ops.requantize(acc, mult, bias, zero_point=10, channel_axes=(1,))
    a = np.array([[[1, 3, 5], [1000, -1000, 7]]], np.int32)
    m = np.array([0.5, 1.0], np.float32)
    b = np.array([0, 1], np.int32)
    got = tw.evaluate(q, {acc: a, mult: m, bias: b})
    # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 (half to even); 1001 and -999 saturate; 8 + 10
    np.testing.assert_array_equal(got, np.array([[[10, 12, 12], [255, 0, 18]]], np.uint8))
    built = np.zeros((1, 2, 3), np.uint8)
    tw.build(tw.create_schedule(q), [acc, mult, bias, q], target="cpu")(a, m, b, built)
    np.testing.assert_array_equal(built, got)


def test_requantize_checks_its_operands():
    acc = tw.placeholder((1, 4), "int32", name="acc")
    with pytest.raises(tw.ShapeError, match=r"'mult' must be float32 of shape \[4\]"):
        tw.ops.requantize(acc, tw.placeholder((3,), "float32", name="mult"), channel_axes=(1,))
    with pytest.raises(tw.ShapeError, match="integer tensor"):
        tw.ops.requantize(tw.placeholder((1, 4), "float32", name="f"), tw.placeholder((4,), "float32", name="m"))


def test_int8_conv2d_nchwc_oi_weights_match_numpy(rng):
    N, C, H, K, R = 1, 8, 5, 16, 3
    X = tw.placeholder((N, C // 4, H, H, 4), "uint8", name="X")
    W = tw.placeholder((K // 8, C // 4, R, R, 8, 4), "int8", name="W")
    Y = tw.ops.conv2d_nchwc(X, W, padding=1, out_dtype="int32", weight_layout="oi")
    x = rng.integers(0, 256, (N, C, H, H)).astype(np.uint8)
    w = rng.integers(-128, 128, (K, C, R, R)).astype(np.int8)
    xb = np.ascontiguousarray(x.reshape(N, C // 4, 4, H, H).transpose(0, 1, 3, 4, 2))
    wb = np.ascontiguousarray(w.reshape(K // 8, 8, C // 4, 4, R, R).transpose(0, 2, 4, 5, 1, 3))
    got = tw.evaluate(Y, {X: xb, W: wb})
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,kc->nkhw", xp[:, :, i:i + H, j:j + H], w[:, :, i, j].astype(np.int64))
               for i in range(R) for j in range(R))
    np.testing.assert_array_equal(got, want.reshape(N, K // 8, 8, H, H).transpose(0, 1, 3, 4, 2))
    with pytest.raises(tw.ShapeError, match="weight_layout"):
        tw.ops.conv2d_nchwc(X, W, out_dtype="int32", weight_layout="xy")


def test_int8_conv2d_nchw_accumulates_in_int32(rng):
    X = tw.placeholder((1, 3, 6, 6), "uint8", name="X")
    W = tw.placeholder((4, 3, 3, 3), "int8", name="W")
    Y = tw.ops.conv2d(X, W, padding=1, out_dtype="int32")
    assert Y.dtype.name == "int32"
    x = rng.integers(0, 256, X.shape).astype(np.uint8)
    w = rng.integers(-128, 128, W.shape).astype(np.int8)
    import torch

    want = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)),
                                      padding=1).numpy().astype(np.int32)
    np.testing.assert_array_equal(tw.evaluate(Y, {X: x, W: w}), want)
    with pytest.raises(tw.DTypeError, match="must match"):
        tw.ops.conv2d(X, W)  # mixed dtypes without out_dtype
