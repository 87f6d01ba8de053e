"""Evaluate one compute stage in boxes ("chunks") of its iteration space whose
working set stays under a budget of array elements.

A sum whose source is a product of factors (GEMM, convolutions, bilinear, ...)
evaluates each factor only over the axes it depends on and contracts them
with `np.einsum`, which runs on BLAS: im2col + GEMM without writing either.
Other reductions evaluate the source over the box and reduce with the
combiner. Float sums accumulate in float64 and integer sums exactly (then wrap
to the dtype, as modular arithmetic makes the order irrelevant), so the result
is a reference, not one more rounding of the same computation.
"""

from __future__ import annotations

import itertools
import math
import string

import numpy as np

from ..ir.dtype import DType
from ..ir.expr import Binary, BinOp, Combiner, Expr, IterVar, Reduce
from ..ir.traverse import walk
from ..te.tensor import ComputeOp
from .expr_eval import ExprEvaluator
from .values import to_storage

DEFAULT_BUDGET = 1 << 23  # elements held at once per chunk (64 MiB of float64)
_LETTERS = string.ascii_letters


def _axes_of(e: Expr, dims: list[IterVar]) -> set[int]:
    pos = {id(a): n for n, a in enumerate(dims)}
    return {pos[id(n)] for n in walk(e) if id(n) in pos}


def _product_factors(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op is BinOp.MUL:
        return _product_factors(e.a) + _product_factors(e.b)
    return [e]


def _ufunc_of(c: Combiner):
    """The NumPy ufunc equal to the combiner, recognised structurally."""
    r = c.result
    if isinstance(r, Binary) and {id(r.a), id(r.b)} == {id(c.lhs), id(c.rhs)}:
        return {BinOp.ADD: np.add, BinOp.MAX: np.maximum, BinOp.MIN: np.minimum,
                BinOp.MUL: np.multiply}.get(r.op)
    return None


def plan_chunks(extents: list[int], terms: list[set[int]], n_spatial: int, budget: int) -> list[int]:
    """Chunk sizes per dim so that the summed size of `terms` (each a set of dims)
    plus the output box fits `budget`; halves the largest dim of the largest term."""
    chunk = list(extents)

    def size(dims) -> int:
        return math.prod(chunk[d] for d in dims)

    out_dims = range(n_spatial)
    while 2 * sum(size(t) for t in terms) + size(out_dims) > budget:
        biggest = max(terms, key=size) if terms else set(out_dims)
        candidates = [d for d in biggest if chunk[d] > 1] or [d for d in range(len(chunk)) if chunk[d] > 1]
        if not candidates:
            break
        d = max(candidates, key=lambda d: (chunk[d], d < n_spatial))
        chunk[d] = -(-chunk[d] // 2)
    return chunk


def _boxes(extents: list[int], chunk: list[int]):
    ranges = [[(lo, min(lo + c, n)) for lo in range(0, n, c)] for n, c in zip(extents, chunk)]
    return itertools.product(*ranges)


def _bindings(dims: list[IterVar], box) -> dict[int, np.ndarray]:
    nd = len(dims)
    out = {}
    for d, (axis, (lo, hi)) in enumerate(zip(dims, box)):
        shape = [1] * nd
        shape[d] = hi - lo
        out[id(axis)] = np.arange(axis.begin + lo, axis.begin + hi, dtype=np.int32).reshape(shape)
    return out


def evaluate_stage(op: ComputeOp, tensors: dict[int, np.ndarray], budget: int = DEFAULT_BUDGET) -> np.ndarray:
    body = op.body
    spatial = list(op.axis)
    out = np.empty(op.shape, dtype=op.dtype.numpy)
    if not isinstance(body, Reduce):
        dims = spatial
        chunk = plan_chunks([a.extent for a in dims], [set(range(len(dims)))], len(dims), budget)
        for box in _boxes([a.extent for a in dims], chunk):
            ev = ExprEvaluator(_bindings(dims, box), tensors, op.name, len(dims))
            shape = tuple(hi - lo for lo, hi in box)
            out[tuple(slice(lo, hi) for lo, hi in box)] = np.broadcast_to(to_storage(ev(body), op.dtype), shape)
        return out
    return _evaluate_reduce(op, body, tensors, budget, out)


def _evaluate_reduce(op: ComputeOp, body: Reduce, tensors, budget: int, out: np.ndarray) -> np.ndarray:
    spatial = list(op.axis)
    dims = spatial + list(body.axes)
    ns, extents = len(spatial), [a.extent for a in dims]
    ufunc = _ufunc_of(body.combiner)
    contract = ufunc is np.add and body.condition is None
    parts = _product_factors(body.source) if contract else [body.source]
    terms = [_axes_of(p, dims) for p in parts] if contract else [set(range(len(dims)))]
    chunk = plan_chunks(extents, terms, ns, budget)
    acc_dtype = _accumulator_dtype(body.dtype, ufunc)
    acc = np.full(op.shape, body.combiner.identity.value, dtype=acc_dtype)
    for box in _boxes(extents, chunk):
        ev = ExprEvaluator(_bindings(dims, box), tensors, op.name, len(dims))
        sizes = [hi - lo for lo, hi in box]
        if contract:
            partial = _contract([ev(p) for p in parts], sizes, ns, body.dtype)
        else:
            partial = _reduce_box(ev, body, sizes, ns, ufunc, acc_dtype)
        region = tuple(slice(lo, hi) for lo, hi in box[:ns])
        acc[region] = _combine(body.combiner, ufunc, acc[region], partial, ev)
    out[...] = to_storage(acc, body.dtype)
    return out


def _accumulator_dtype(dtype: DType, ufunc) -> np.dtype:
    if ufunc is np.add and dtype.is_float:
        return np.dtype(np.float64)
    if ufunc is np.add and dtype.is_int:
        return np.dtype(np.int64)
    return dtype.numpy


def _contract(factors: list[np.ndarray], sizes: list[int], ns: int, dtype: DType) -> np.ndarray:
    """Sum over the reduce dims of the product of `factors` (broadcastable arrays)."""
    operands, subscripts, present = [], [], set()
    for f in factors:
        dims = [d for d in range(len(sizes)) if f.shape[d] != 1]
        operands.append(f.reshape([f.shape[d] for d in dims]))
        subscripts.append("".join(_LETTERS[d] for d in dims))
        present.update(dims)
    out_dims = [d for d in range(ns) if d in present]
    exact_float = dtype.is_float or _fits_float64(operands, sizes[ns:])
    work = np.float64 if exact_float else np.int64
    spec = ",".join(subscripts) + "->" + "".join(_LETTERS[d] for d in out_dims)
    result = np.einsum(spec, *[o.astype(work, copy=False) for o in operands], optimize=True)
    repeat = math.prod(sizes[d] for d in range(ns, len(sizes)) if d not in present)
    if repeat != 1:
        result = result * repeat
    if not dtype.is_float and exact_float:
        result = np.rint(result).astype(np.int64)
    shape = [sizes[d] if d in present else 1 for d in range(ns)]
    return np.broadcast_to(np.reshape(result, shape), sizes[:ns])


def _fits_float64(operands: list[np.ndarray], reduce_sizes: list[int]) -> bool:
    bound = float(math.prod(reduce_sizes))
    for o in operands:
        bound *= float(np.max(np.abs(o.astype(np.float64)))) if o.size else 0.0
    return bound < 2.0**52


def _reduce_box(ev: ExprEvaluator, body: Reduce, sizes: list[int], ns: int, ufunc, acc_dtype) -> np.ndarray:
    value = np.broadcast_to(ev(body.source), sizes)
    if body.condition is not None:
        value = np.where(ev(body.condition), value, np.asarray(body.combiner.identity.value, dtype=value.dtype))
    value = value.astype(acc_dtype, copy=False)
    red = tuple(range(ns, len(sizes)))
    if ufunc is not None:
        return ufunc.reduce(value, axis=red)
    flat = value.reshape(tuple(sizes[:ns]) + (-1,))
    identity = np.asarray(body.combiner.identity.value, dtype=acc_dtype)
    while flat.shape[-1] > 1:
        if flat.shape[-1] % 2:
            pad = np.broadcast_to(identity, flat.shape[:-1] + (1,))
            flat = np.concatenate([flat, pad], axis=-1)
        flat = _combine(body.combiner, None, flat[..., 0::2], flat[..., 1::2], ev)
    return flat[..., 0]


def _combine(c: Combiner, ufunc, a: np.ndarray, b: np.ndarray, ev: ExprEvaluator) -> np.ndarray:
    if ufunc is not None:
        return ufunc(a, b)
    nd = max(a.ndim, b.ndim)
    sub = ExprEvaluator({id(c.lhs): a, id(c.rhs): b}, ev.tensors, ev.stage, nd)
    return np.broadcast_to(sub(c.result), np.broadcast_shapes(a.shape, b.shape))
