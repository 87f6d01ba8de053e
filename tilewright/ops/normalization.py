"""softmax / log_softmax along one dim, batch_norm (inference) and layer_norm.

Reductions are whole stages, so each operator is a short pipeline: softmax is
`{name}_max` (max along dim), `{name}_exp` (exp(x - max)), `{name}_sum` and the
normalizing stage; log_softmax sums exp(x - max) directly. Subtracting the max
keeps exp from overflowing.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ExprError, ShapeError
from ..te import compute, exp, log, reduce_axis, rsqrt
from ..te import max as max_of
from ..te import sum as sum_of
from ..te.tensor import Tensor
from .params import expect_ndim, normalize_dim, require_float


def _drop(idx: tuple, dim: int) -> tuple:
    return idx[:dim] + idx[dim + 1:]


def _insert(idx: tuple, dim: int, value) -> tuple:
    return idx[:dim] + (value,) + idx[dim:]


def _row_max(op: str, x: Tensor, dim, name: str) -> tuple[int, Tensor]:
    """The normalized dim and `{name}_max`, the max along it (subtracting it keeps exp from overflowing)."""
    require_float(x, op)
    if x.ndim == 0:
        raise ShapeError(f"{op}: input '{x.name}' is 0-d; it needs a dimension to normalize over")
    d = normalize_dim(dim, x.ndim, op)
    r = reduce_axis(x.shape[d], "r")
    return d, compute(_drop(x.shape, d), lambda *idx: max_of(x[_insert(idx, d, r)], axis=r), name=f"{name}_max")


def softmax(x: Tensor, dim: int, *, masked_rows_zero: bool = False, name: str = "softmax") -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `dim`. Stages `{name}_max`, `{name}_exp`
    (kept, so each element's exp is computed once) and `{name}_sum`; the last stage
    multiplies by the sum's reciprocal (one division per row, within an ulp of dividing).
    `masked_rows_zero`: a row that is -inf throughout gives zeros, not NaN (what attention's
    fully masked rows need); other rows are unchanged (their max is finite, their sum >= 1)."""
    d, mx = _row_max("softmax", x, dim, name)
    if masked_rows_zero:
        lowest = float(np.finfo(x.dtype.numpy).min)
        e = compute(x.shape, lambda *idx: exp(x[idx] - max_of(mx[_drop(idx, d)], lowest)), name=f"{name}_exp")
    else:
        e = compute(x.shape, lambda *idx: exp(x[idx] - mx[_drop(idx, d)]), name=f"{name}_exp")
    r = reduce_axis(x.shape[d], "r")
    total = compute(mx.shape, lambda *idx: sum_of(e[_insert(idx, d, r)], axis=r), name=f"{name}_sum")
    if masked_rows_zero:
        return compute(x.shape, lambda *idx: e[idx] * (1.0 / max_of(total[_drop(idx, d)], 1e-30)), name=name)
    return compute(x.shape, lambda *idx: e[idx] * (1.0 / total[_drop(idx, d)]), name=name)


def log_softmax(x: Tensor, dim: int, *, name: str = "log_softmax") -> Tensor:
    """x - max - log(sum(exp(x - max))) along `dim`."""
    d, mx = _row_max("log_softmax", x, dim, name)
    r = reduce_axis(x.shape[d], "r")
    total = compute(mx.shape, lambda *idx: sum_of(exp(x[_insert(idx, d, r)] - mx[idx]), axis=r),
                    name=f"{name}_sum")
    return compute(x.shape, lambda *idx: x[idx] - mx[_drop(idx, d)] - log(total[_drop(idx, d)]), name=name)


def _check_vector(op: str, t: Tensor | None, role: str, n: int, what: str) -> None:
    if t is None:
        return
    expect_ndim(t, 1, op, role)
    if t.shape[0] != n:
        raise ShapeError(f"{op}: {role} '{t.name}' has {t.shape[0]} elements but {what} is {n}")


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5, *,
               name: str = "batch_norm") -> Tensor:
    """Inference batch norm over axis 1 of [N, C, ...]:
    (x - mean[c]) * rsqrt(var[c] + eps) * weight[c] + bias[c]. `training` and
    `momentum` keep torch's argument order; only training=False is supported."""
    op = "batch_norm"
    if training:
        raise ExprError(f"{op}: only inference (training=False) is supported; it uses the running statistics")
    require_float(x, op)
    if x.ndim < 2:
        raise ShapeError(f"{op}: input '{x.name}' must be [N, C, ...] with at least 2 dimensions, got {list(x.shape)}")
    c = x.shape[1]
    for role, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_vector(op, t, role, c, f"the channel count (axis 1 of '{x.name}')")
    eps = float(eps)

    def body(*idx):
        ch = idx[1]
        v = (x[idx] - running_mean[ch]) * rsqrt(running_var[ch] + eps)
        if weight is not None:
            v = v * weight[ch]
        if bias is not None:
            v = v + bias[ch]
        return v

    return compute(x.shape, body, name=name)


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, *, name: str = "layer_norm") -> Tensor:
    """Normalize over the trailing `normalized_shape` axes with the biased variance,
    then scale by weight and shift by bias (both of shape normalized_shape).
    Stages: `{name}_sum`, `{name}_mean`, `{name}_sqdev` (sum of squared
    deviations: two passes, not E[x^2] - E[x]^2, for accuracy), `{name}_rstd`."""
    op = "layer_norm"
    require_float(x, op)
    norm = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else (normalized_shape,)
    if not norm or len(norm) > x.ndim or x.shape[x.ndim - len(norm):] != norm:
        raise ShapeError(
            f"{op}: normalized_shape {list(norm)} must be non-empty and equal the trailing dimensions of "
            f"'{x.name}' {list(x.shape)}"
        )
    for role, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != norm:
            raise ShapeError(f"{op}: {role} '{t.name}' is {list(t.shape)}, expected normalized_shape {list(norm)}")
    lead = x.shape[: x.ndim - len(norm)]
    nl, count, eps = len(lead), float(math.prod(norm)), float(eps)
    r1 = [reduce_axis(n, f"r{a}") for a, n in enumerate(norm)]
    r2 = [reduce_axis(n, f"r{a}") for a, n in enumerate(norm)]
    total = compute(lead, lambda *idx: sum_of(x[idx + tuple(r1)], axis=r1), name=f"{name}_sum")
    mean = compute(lead, lambda *idx: total[idx] / count, name=f"{name}_mean")

    def sqdev_body(*idx):
        dev = x[idx + tuple(r2)] - mean[idx]
        return sum_of(dev * dev, axis=r2)

    sqdev = compute(lead, sqdev_body, name=f"{name}_sqdev")
    rstd = compute(lead, lambda *idx: rsqrt(sqdev[idx] / count + eps), name=f"{name}_rstd")

    def body(*idx):
        v = (x[idx] - mean[idx[:nl]]) * rstd[idx[:nl]]
        if weight is not None:
            v = v * weight[idx[nl:]]
        if bias is not None:
            v = v + bias[idx[nl:]]
        return v

    return compute(x.shape, body, name=name)
