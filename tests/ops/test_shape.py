"""transpose, permute, reshape and flatten against torch (exact: they only move data)."""

import numpy as np
import pytest
from oracle import random_array, torch_or_skip

import tilewright as tw


def torch_do(fn, x):
    torch = torch_or_skip()
    return fn(torch.from_numpy(x)).contiguous().numpy()


def run(out, X, x):
    got = tw.evaluate(out, {X: x})
    assert got.dtype == x.dtype
    return got


@pytest.mark.parametrize("dtype", ["float32", "int8", "float16"])
@pytest.mark.parametrize("dim0,dim1", [(0, 1), (-1, 0), (1, -2), (2, 2)])
def test_transpose(rng, dtype, dim0, dim1):
    x = random_array(rng, (2, 3, 5), dtype)
    X = tw.placeholder(x.shape, dtype, "X")
    out = tw.ops.transpose(X, dim0, dim1)
    np.testing.assert_array_equal(run(out, X, x), torch_do(lambda t: t.transpose(dim0, dim1), x))


@pytest.mark.parametrize("dims", [(0, 1, 2, 3), (3, 2, 1, 0), (0, 2, 3, 1), (-1, 0, -3, 2)])
def test_permute(rng, dims):
    x = random_array(rng, (2, 3, 4, 5), "float64")
    X = tw.placeholder(x.shape, "float64", "X")
    out = tw.ops.permute(X, dims)
    assert out.name == "permute"
    np.testing.assert_array_equal(run(out, X, x), torch_do(lambda t: t.permute(dims), x))


@pytest.mark.parametrize(
    "src,dst",
    [
        ((2, 3, 4), (6, 4)),
        ((2, 3, 4), (4, -1)),
        ((2, 3, 4), (24,)),
        ((24,), (2, 3, 4)),
        ((2, 3, 4), (3, 2, 2, 2)),
        ((6, 5), (5, 6)),
        ((7,), (7,)),
        ((1, 7, 1), (7,)),
        ((1,), ()),
        ((), (1, 1)),
        ((3, 10), (-1,)),
    ],
)
def test_reshape(rng, src, dst):
    x = random_array(rng, src, "int32")
    X = tw.placeholder(src, "int32", "X")
    out = tw.ops.reshape(X, dst)
    want = torch_do(lambda t: t.reshape(dst), x)
    assert out.shape == want.shape
    np.testing.assert_array_equal(run(out, X, x), want)


@pytest.mark.parametrize("start,end", [(0, -1), (1, -1), (1, 2), (-3, -2), (2, 2), (0, 0)])
def test_flatten(rng, start, end):
    x = random_array(rng, (2, 3, 4, 5), "float32")
    X = tw.placeholder(x.shape, "float32", "X")
    out = tw.ops.flatten(X, start, end)
    np.testing.assert_array_equal(run(out, X, x), torch_do(lambda t: t.flatten(start, end), x))


def test_flatten_0d_and_names(rng):
    S = tw.placeholder((), "float32", "S")
    out = tw.ops.flatten(S)
    assert out.shape == (1,) and out.name == "flatten"
    np.testing.assert_array_equal(tw.evaluate(out, {S: np.float32(3)}), [3])
    X = tw.placeholder((2, 3), "float32", "X")
    assert tw.ops.transpose(X, 0, 1).name == "transpose" and tw.ops.reshape(X, 6, name="r").name == "r"


def test_reshape_uses_floor_div_and_mod():
    X = tw.placeholder((2, 3, 4), "float32", "X")
    text = str(tw.ops.reshape(X, (4, 6)))
    assert "//" in text and "%" in text


def test_errors():
    X = tw.placeholder((2, 3, 4), "float32", "X")
    with pytest.raises(tw.ShapeError, match=r"transpose: dim1 3 is out of range for a 3-d tensor; valid range is "
                                            r"\[-3, 2\]"):
        tw.ops.transpose(X, 0, 3)
    with pytest.raises(tw.ShapeError, match=r"transpose: dim0 -4 is out of range"):
        tw.ops.transpose(X, -4, 0)
    with pytest.raises(tw.ShapeError, match=r"permute: dims \[0, 1\] must list all 3 axes of 'X' \[2, 3, 4\]"):
        tw.ops.permute(X, (0, 1))
    with pytest.raises(tw.ShapeError, match=r"permute: dims \[0, 1, -2\] repeat an axis"):
        tw.ops.permute(X, (0, 1, -2))
    with pytest.raises(tw.ShapeError, match=r"permute: dims entry 5 is out of range"):
        tw.ops.permute(X, (0, 1, 5))
    with pytest.raises(tw.ShapeError, match=r"reshape: shape \[5, 5\] has 25 elements but 'X' \[2, 3, 4\] has 24"):
        tw.ops.reshape(X, (5, 5))
    with pytest.raises(tw.ShapeError, match=r"reshape: shape \[-1, -1\] may hold positive sizes and at most one -1"):
        tw.ops.reshape(X, (-1, -1))
    with pytest.raises(tw.ShapeError, match=r"reshape: shape \[0, 24\] may hold positive sizes"):
        tw.ops.reshape(X, (0, 24))
    with pytest.raises(tw.ShapeError, match=r"reshape: cannot infer -1 in \[5, -1\]: 24 elements of 'X' do not "
                                            r"divide by 5"):
        tw.ops.reshape(X, (5, -1))
    with pytest.raises(tw.ShapeError, match=r"reshape: shape must be ints, got \(2.0, 12\)"):
        tw.ops.reshape(X, (2.0, 12))
    with pytest.raises(tw.ShapeError, match=r"flatten: start_dim 2 comes after end_dim 1 for a 3-d tensor"):
        tw.ops.flatten(X, 2, 1)
    with pytest.raises(tw.ShapeError, match=r"flatten: end_dim 3 is out of range"):
        tw.ops.flatten(X, 0, 3)


def test_reshape_past_int32_uses_int64_indices():
    X = tw.placeholder((1 << 16, 1 << 16), "int8", "X")
    text = str(tw.ops.reshape(X, (1 << 8, -1)))
    assert "int64(" in text
    assert "int64(" not in str(tw.ops.reshape(tw.placeholder((4, 4), "int8", "Y"), (16,)))
