"""Activations against torch.nn.functional on inputs that cover every branch."""

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw

CASES = {  # name -> (tw call, torch call)
    "relu": (lambda x: tw.ops.relu(x), lambda F, t: F.relu(t)),
    "leaky_relu": (lambda x: tw.ops.leaky_relu(x), lambda F, t: F.leaky_relu(t)),
    "leaky_relu_0.2": (lambda x: tw.ops.leaky_relu(x, 0.2), lambda F, t: F.leaky_relu(t, 0.2)),
    "gelu": (lambda x: tw.ops.gelu(x), lambda F, t: F.gelu(t)),
    "gelu_tanh": (lambda x: tw.ops.gelu(x, approximate="tanh"), lambda F, t: F.gelu(t, approximate="tanh")),
    "hardswish": (lambda x: tw.ops.hardswish(x), lambda F, t: F.hardswish(t)),
    "softplus": (lambda x: tw.ops.softplus(x), lambda F, t: F.softplus(t)),
    "softplus_b2_t3": (lambda x: tw.ops.softplus(x, beta=2, threshold=3), lambda F, t: F.softplus(t, 2, 3)),
    "sigmoid": (lambda x: tw.ops.sigmoid(x), lambda F, t: F.sigmoid(t)),
    "tanh": (lambda x: tw.ops.tanh(x), lambda F, t: F.tanh(t)),
    "silu": (lambda x: tw.ops.silu(x), lambda F, t: F.silu(t)),
}


def inputs(rng, shape, dtype):
    """Values in [-8, 8] plus the branch points 0, +-3 and the softplus switch 1.5."""
    x = (random_array(rng, shape, "float64") * 8).reshape(-1)
    x[:6] = [0.0, 3.0, -3.0, 1.5, 25.0, -25.0]
    return x.reshape(shape).astype(dtype)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_matches_torch(rng, case, dtype):
    torch = torch_or_skip()
    build, ref = CASES[case]
    x = inputs(rng, (3, 5, 7), dtype)
    X = tw.placeholder(x.shape, dtype, "X")
    out = build(X)
    assert out.shape == X.shape and out.dtype.name == dtype
    # torch in float64 on the same (already rounded) inputs: an exact reference
    want = ref(torch.nn.functional, torch.from_numpy(x.astype(np.float64))).numpy()
    assert_close(tw.evaluate(out, {X: x}), want, dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_relu_on_integers(rng, dtype):
    x = random_array(rng, (4, 9), dtype)
    X = tw.placeholder(x.shape, dtype, "X")
    out = tw.ops.relu(X)
    assert out.dtype.name == dtype
    np.testing.assert_array_equal(tw.evaluate(out, {X: x}), np.maximum(x, 0))


def test_default_and_custom_names():
    X = tw.placeholder((2,), "float32", "X")
    for case in ["relu", "leaky_relu", "gelu", "hardswish", "softplus", "sigmoid", "tanh", "silu"]:
        assert getattr(tw.ops, case)(X).name == case
        assert getattr(tw.ops, case)(X, name="act").name == "act"


def test_errors():
    X = tw.placeholder((2,), "float32", "X")
    with pytest.raises(tw.ExprError, match=r"gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        tw.ops.gelu(X, approximate="erf")
    with pytest.raises(tw.ExprError, match=r"softplus: beta must be nonzero"):
        tw.ops.softplus(X, beta=0)
    I = tw.placeholder((2,), "int32", "I")  # noqa: E741
    for op in ["leaky_relu", "gelu", "hardswish", "softplus", "sigmoid", "tanh", "silu"]:
        with pytest.raises(tw.DTypeError, match=rf"{op}: input 'I' has dtype int32, but {op} needs a floating-point"):
            getattr(tw.ops, op)(I)
