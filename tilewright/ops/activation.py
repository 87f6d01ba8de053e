"""Activation functions (torch.nn.functional names and defaults), one elementwise
stage each. All but relu need a floating-point input."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import ExprError
from ..te import compute, erf, exp, if_then_else, log
from ..te import max as max_of
from ..te import min as min_of
from ..te import sigmoid as sigmoid_of
from ..te import tanh as tanh_of
from ..te.tensor import Tensor
from .params import require_float


def _map(x: Tensor, fn: Callable, name: str, op: str, float_only: bool = True) -> Tensor:
    if float_only:
        require_float(x, op)
    return compute(x.shape, lambda *idx: fn(x[idx]), name=name)


def relu(x: Tensor, *, name: str = "relu") -> Tensor:
    """max(x, 0); any numeric dtype."""
    return _map(x, lambda v: max_of(v, 0), name, "relu", float_only=False)


def leaky_relu(x: Tensor, negative_slope: float = 0.01, *, name: str = "leaky_relu") -> Tensor:
    """x if x > 0 else negative_slope * x."""
    slope = float(negative_slope)
    return _map(x, lambda v: if_then_else(v > 0, v, v * slope), name, "leaky_relu")


def gelu(x: Tensor, approximate: str = "none", *, name: str = "gelu") -> Tensor:
    """x * Phi(x) with the exact erf form, or PyTorch's tanh approximation."""
    if approximate == "none":
        fn = lambda v: 0.5 * v * (1.0 + erf(v * math.sqrt(0.5)))  # noqa: E731
    elif approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        fn = lambda v: 0.5 * v * (1.0 + tanh_of(c * (v + 0.044715 * v * v * v)))  # noqa: E731
    else:
        raise ExprError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _map(x, fn, name, "gelu")


def hardswish(x: Tensor, *, name: str = "hardswish") -> Tensor:
    """x * relu6(x + 3) / 6."""
    return _map(x, lambda v: v * min_of(max_of(v + 3.0, 0.0), 6.0) / 6.0, name, "hardswish")


def softplus(x: Tensor, beta: float = 1, threshold: float = 20, *, name: str = "softplus") -> Tensor:
    """log(1 + exp(beta * x)) / beta, or x where beta * x > threshold (PyTorch's
    switch to the linear asymptote, which also avoids exp overflow)."""
    beta, threshold = float(beta), float(threshold)
    if beta == 0:
        raise ExprError("softplus: beta must be nonzero")
    return _map(x, lambda v: if_then_else(v * beta > threshold, v, log(1.0 + exp(v * beta)) / beta), name,
                "softplus")


def sigmoid(x: Tensor, *, name: str = "sigmoid") -> Tensor:
    """1 / (1 + exp(-x))."""
    return _map(x, sigmoid_of, name, "sigmoid")


def tanh(x: Tensor, *, name: str = "tanh") -> Tensor:
    """Hyperbolic tangent."""
    return _map(x, tanh_of, name, "tanh")


def silu(x: Tensor, *, name: str = "silu") -> Tensor:
    """x * sigmoid(x) (swish)."""
    return _map(x, lambda v: v * sigmoid_of(v), name, "silu")
