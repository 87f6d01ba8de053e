"""bilinear against torch.nn.functional.bilinear, including a FlexTensor BIL case."""


import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.workloads import suite

SUITE = suite()  # the packaged copy of ../shared/benchmarks/flextensor_suite.json


def torch_bilinear(x1, x2, w, b=None):
    torch = torch_or_skip()
    t = [None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (x1, x2, w, b)]
    return torch.nn.functional.bilinear(*t).numpy()


def build(lead, in1, in2, out, dtype, bias):
    x1 = tw.placeholder(lead + (in1,), dtype, "x1")
    x2 = tw.placeholder(lead + (in2,), dtype, "x2")
    w = tw.placeholder((out, in1, in2), dtype, "w")
    b = tw.placeholder((out,), dtype, "b") if bias else None
    return x1, x2, w, b


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("lead,in1,in2,out", [((3,), 5, 7, 4), ((1,), 1, 1, 1), ((2, 3), 4, 2, 5), ((), 6, 3, 2)])
def test_bilinear_matches_torch(rng, dtype, bias, lead, in1, in2, out):
    x1, x2, w, b = build(lead, in1, in2, out, dtype, bias)
    arrays = {x1: random_array(rng, x1.shape, dtype), x2: random_array(rng, x2.shape, dtype),
              w: random_array(rng, w.shape, dtype)}
    if bias:
        arrays[b] = random_array(rng, b.shape, dtype)
    y = tw.ops.bilinear(x1, x2, w, b)
    assert y.shape == lead + (out,) and y.dtype.name == dtype
    want = torch_bilinear(arrays[x1], arrays[x2], arrays[w], arrays.get(b))
    assert_close(tw.evaluate(y, arrays), want, dtype, scale=np.sqrt(in1 * in2))


def test_int32_bilinear_matches_numpy(rng):
    x1, x2, w, b = build((4,), 3, 5, 2, "int32", True)
    a1, a2, aw, ab = (random_array(rng, t.shape, "int32").astype(np.int64) for t in (x1, x2, w, b))
    y = tw.ops.bilinear(x1, x2, w, b)
    want = np.einsum("nk,mkl,nl->nm", a1, aw, a2) + ab
    np.testing.assert_array_equal(tw.evaluate(y, {x1: a1, x2: a2, w: aw, b: ab}), want)


def test_one_reduction_over_both_axes_and_bias_stage():
    x1, x2, w, b = build((4,), 3, 5, 2, "float32", True)
    y = tw.ops.bilinear(x1, x2, w, name="bil")
    assert y.name == "bil" and [a.name for a in y.op.reduce_axis] == ["k1", "k2"]
    assert [a.name for a in y.op.axis] == ["n", "m"]
    yb = tw.ops.bilinear(x1, x2, w, b)
    assert yb.name == "bilinear" and yb.op.reduce_axis == ()
    (prod,) = [t for t in yb.op.input_tensors if t.name == "bilinear_sum"]
    assert [a.name for a in prod.op.reduce_axis] == ["k1", "k2"]


def test_suite_case_bil_2(rng):
    case = next(c for c in SUITE["BIL"]["cases"] if c["name"] == "bil_2")
    n, in1, in2, out = case["batch"], case["in1_features"], case["in2_features"], case["out_features"]
    x1, x2, w, _ = build((n,), in1, in2, out, "float32", False)
    arrays = {t: random_array(rng, t.shape) for t in (x1, x2, w)}
    y = tw.ops.bilinear(x1, x2, w)
    assert_close(tw.evaluate(y, arrays), torch_bilinear(arrays[x1], arrays[x2], arrays[w]), scale=np.sqrt(in1 * in2))


@pytest.mark.parametrize(
    "shapes,match",
    [
        (((3, 5), (3, 7), (4, 5)), r"bilinear: weight 'w' must have 3 dimensions"),
        (((3, 5), (2, 7), (4, 5, 7)), r"x1 'x1' \[3, 5\] and x2 'x2' \[2, 7\] must have the same leading"),
        (((3, 5), (3, 7), (4, 5, 6)), r"weight 'w' is \[4, 5, 6\] but x1 'x1' has 5 and x2 'x2' has 7 features"),
        (((3, 5), (3, 7), (4, 5, 7), (4, 1)), r"bilinear: bias 'b' must have 1 dimensions"),
        (((3, 5), (3, 7), (4, 5, 7), (3,)), r"bilinear: bias 'b' has 3 elements, expected 4"),
        (((), (3,), (4, 1, 3)), r"bilinear: x1 'x1' is 0-d"),
    ],
)
def test_shape_errors(shapes, match):
    names = ["x1", "x2", "w", "b"]
    tensors = [tw.placeholder(s, "float32", n) for s, n in zip(shapes, names, strict=False)]
    with pytest.raises(tw.ShapeError, match=match):
        tw.ops.bilinear(*tensors)
