"""Broadcasting binary operators and bias_add against torch."""

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.ops.elementwise import broadcast_shapes

OPS = {
    "add": lambda t: t.add,
    "sub": lambda t: t.sub,
    "mul": lambda t: t.mul,
    "div": lambda t: t.div,
    "maximum": lambda t: t.maximum,
    "minimum": lambda t: t.minimum,
}

SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((5,), (2, 1, 5)),
    ((1,), (3, 2)),
    ((), (2, 3)),
    ((2, 1, 3, 1), (4, 1, 5)),
]


def torch_ref(op, a, b):
    torch = torch_or_skip()
    conv = [torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v for v in (a, b)]
    return OPS[op](torch)(*conv).numpy()


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_tensor_tensor_broadcasting(rng, op, a_shape, b_shape, dtype):
    a, b = random_array(rng, a_shape, dtype), random_array(rng, b_shape, dtype)
    if op == "div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(dtype)
    A, B = tw.placeholder(a_shape, dtype, "A"), tw.placeholder(b_shape, dtype, "B")
    out = getattr(tw.ops, op)(A, B)
    want = torch_ref(op, a, b)
    assert out.shape == want.shape and out.name == op
    assert_close(tw.evaluate(out, {A: a, B: b}), want, dtype, scale=10 if op == "div" else 1)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum"])
def test_integer_tensors(rng, op):
    a, b = random_array(rng, (3, 1, 4), "int32"), random_array(rng, (5, 1), "int32")
    A, B = tw.placeholder(a.shape, "int32", "A"), tw.placeholder(b.shape, "int32", "B")
    out = getattr(tw.ops, op)(A, B)
    assert out.dtype.name == "int32"
    np.testing.assert_array_equal(tw.evaluate(out, {A: a, B: b}), torch_ref(op, a, b))


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("scalar", [2.5, -3])
@pytest.mark.parametrize("scalar_first", [False, True])
def test_tensor_and_python_scalar(rng, op, scalar, scalar_first):
    a = random_array(rng, (2, 5), "float32")
    A = tw.placeholder(a.shape, "float32", "A")
    args = (scalar, A) if scalar_first else (A, scalar)
    out = getattr(tw.ops, op)(*args)
    torch = torch_or_skip()
    ta = torch.from_numpy(a)
    if op in ("maximum", "minimum"):  # torch.maximum takes tensors only
        want = OPS[op](torch)(ta, torch.full_like(ta, scalar)).numpy()
    else:
        want = torch_ref(op, *((scalar, a) if scalar_first else (a, scalar)))
    assert out.dtype.name == "float32"
    assert_close(tw.evaluate(out, {A: a}), want, scale=10 if op == "div" else 1)


def test_int_tensor_with_int_scalar_keeps_dtype(rng):
    a = random_array(rng, (4,), "int8")
    A = tw.placeholder(a.shape, "int8", "A")
    out = tw.ops.mul(A, 3)
    assert out.dtype.name == "int8"
    np.testing.assert_array_equal(tw.evaluate(out, {A: a}), (a.astype(np.int64) * 3).astype(np.int8))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((2, 3, 4, 5), -1), ((6, 2), 0), ((3,), 0)])
def test_bias_add(rng, dtype, shape, axis):
    x = random_array(rng, shape, dtype)
    b = random_array(rng, (shape[axis],), dtype)
    X, B = tw.placeholder(shape, dtype, "X"), tw.placeholder(b.shape, dtype, "bias")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    out = tw.ops.bias_add(X, B, axis)
    assert out.name == "bias_add"
    assert_close(tw.evaluate(out, {X: x, B: b}), x + b.reshape(view), dtype)


def test_broadcast_shapes_helper():
    assert broadcast_shapes([(3, 1), (1, 4), (4,)], "op") == (3, 4)
    assert broadcast_shapes([(), ()], "op") == ()
    with pytest.raises(tw.ShapeError, match=r"op: shapes \[3, 2\] \('a'\) and \[3\] \('b'\) do not broadcast: "
                                            r"dimension -1 has sizes 2 and 3; sizes must be equal or 1"):
        broadcast_shapes([(3, 2), (3,)], "op", ["a", "b"])


def test_errors():
    A, B = tw.placeholder((3, 2), "float32", "A"), tw.placeholder((4, 3), "float32", "B")
    with pytest.raises(tw.ShapeError, match=r"add: shapes \[3, 2\] \('A'\) and \[4, 3\] \('B'\) do not broadcast"):
        tw.ops.add(A, B)
    with pytest.raises(tw.ShapeError, match=r"sub: at least one operand must be a tensor, got 1 and 2"):
        tw.ops.sub(1, 2)
    I = tw.placeholder((3, 2), "int32", "I")  # noqa: E741
    with pytest.raises(tw.DTypeError, match=r"div: 'I' has dtype int32; true division needs floating-point"):
        tw.ops.div(A, I)
    with pytest.raises(tw.DTypeError, match=r"literal 0.5 cannot take dtype int32"):
        tw.ops.add(I, 0.5)
    with pytest.raises(tw.DTypeError, match=r"operands have dtypes int32 and float32"):
        tw.ops.mul(I, A)
    with pytest.raises(tw.ShapeError, match=r"bias_add: bias 'bias' has 3 elements but axis 1 of 'A' \[3, 2\] has 2"):
        tw.ops.bias_add(A, tw.placeholder((3,), "float32", "bias"))
    with pytest.raises(tw.ShapeError, match=r"bias_add: bias 'b2' must have 1 dimensions"):
        tw.ops.bias_add(A, tw.placeholder((2, 1), "float32", "b2"))
    with pytest.raises(tw.ShapeError, match=r"bias_add: axis 2 is out of range for a 2-d tensor; "
                                            r"valid range is \[-2, 1\]"):
        tw.ops.bias_add(A, tw.placeholder((2,), "float32", "b3"), axis=2)
    with pytest.raises(tw.ShapeError, match=r"bias_add: axis must be an int, got 'c'"):
        tw.ops.bias_add(A, tw.placeholder((2,), "float32", "b4"), axis="c")
