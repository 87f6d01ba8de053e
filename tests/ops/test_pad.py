"""pad (constant mode) against torch.nn.functional.pad, including cropping."""

import numpy as np
import pytest
from oracle import random_array, torch_or_skip

import tilewright as tw


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int8"])
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((5,), (2, 1)),
        ((3, 4), (1, 2)),
        ((3, 4), (0, 0, 2, 1)),
        ((2, 3, 4), (1, 1, 1, 1, 1, 1)),
        ((2, 3, 6), (-1, 2)),
        ((4, 5), (-2, -1, 1, -1)),
        ((2, 2), (0, 0)),
    ],
)
def test_pad_matches_torch(rng, dtype, shape, pad):
    torch = torch_or_skip()
    x = random_array(rng, shape, dtype)
    X = tw.placeholder(shape, dtype, "X")
    value = 7 if dtype.startswith("int") else 2.5
    out = tw.ops.pad(X, pad, value)
    want = torch.nn.functional.pad(torch.from_numpy(x), pad, value=value).numpy()
    assert out.shape == want.shape
    np.testing.assert_array_equal(tw.evaluate(out, {X: x}), want)


def test_pad_defaults_and_name(rng):
    x = random_array(rng, (2, 3), "float32")
    X = tw.placeholder(x.shape, "float32", "X")
    out = tw.ops.pad(X, [1, 1])
    assert out.name == "pad" and tw.ops.pad(X, [1, 1], name="p").name == "p"
    np.testing.assert_array_equal(tw.evaluate(out, {X: x}), np.pad(x, ((0, 0), (1, 1))))


def test_errors():
    X = tw.placeholder((2, 3), "float32", "X")
    with pytest.raises(tw.ShapeError, match=r"pad: pad must be an even number \(<= 4\) of ints"):
        tw.ops.pad(X, (1, 1, 1))
    with pytest.raises(tw.ShapeError, match=r"pad: pad must be an even number"):
        tw.ops.pad(X, (1, 1, 1, 1, 1, 1))
    with pytest.raises(tw.ShapeError, match=r"pad: pad must be an even number"):
        tw.ops.pad(X, (1.0, 1))
    with pytest.raises(tw.ShapeError, match=r"pad: axis 1 of 'X' \(3\) would become 0 after padding"):
        tw.ops.pad(X, (-2, -1))
    with pytest.raises(tw.DTypeError, match=r"literal 0.5 cannot take dtype int32"):
        tw.ops.pad(tw.placeholder((2,), "int32", "I"), (1, 1), 0.5)
