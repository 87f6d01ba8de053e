"""Generic traversal of expression trees: children, rebuild, walk, substitute."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import replace

from .expr import Binary, Broadcast, Call, Cast, Compare, Const, Expr, Load, Ramp, Reduce, Select, Unary, Var


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Binary, Compare)):
        return (e.a, e.b)
    if isinstance(e, Unary):
        return (e.a,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (e.source,) if e.condition is None else (e.source, e.condition)
    if isinstance(e, Ramp):
        return (e.base,)
    if isinstance(e, Broadcast):
        return (e.value,)
    return ()


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """`e` with its children replaced (e itself if nothing changed)."""
    old = children(e)
    if len(old) == len(new) and all(a is b for a, b in zip(old, new)):
        return e
    if isinstance(e, (Binary, Compare)):
        return replace(e, a=new[0], b=new[1])
    if isinstance(e, Unary):
        return replace(e, a=new[0])
    if isinstance(e, Cast):
        return replace(e, value=new[0])
    if isinstance(e, Select):
        return replace(e, cond=new[0], t=new[1], f=new[2])
    if isinstance(e, Call):
        return replace(e, args=tuple(new))
    if isinstance(e, Load):
        return replace(e, indices=tuple(new))
    if isinstance(e, Reduce):
        return replace(e, source=new[0], condition=new[1] if len(new) > 1 else None)
    if isinstance(e, Ramp):
        return replace(e, base=new[0])
    if isinstance(e, Broadcast):
        return replace(e, value=new[0])
    return e


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal of every node (shared subtrees visited each time)."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def walk_unique(e: Expr) -> Iterator[Expr]:
    """Every distinct node once (a subtree shared by several parents is visited at its first use)."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(children(node)))


def transform(e: Expr, fn: Callable[[Expr], Expr | None], memo: dict | None = None) -> Expr:
    """Bottom-up rewrite: `fn(node)` returns a replacement or None to keep it. `memo` (id -> (node,
    result)): results to share across calls with the same `fn` (expressions sharing subtrees)."""
    memo = {} if memo is None else memo

    def visit(node: Expr) -> Expr:
        hit = memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        rebuilt = with_children(node, tuple(visit(c) for c in children(node)))
        out = fn(rebuilt)
        memo[id(node)] = (node, rebuilt if out is None else out)
        return memo[id(node)][1]

    return visit(e)


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables (by identity) with expressions."""
    if not mapping:
        return e
    by_id = {id(k): v for k, v in mapping.items()}
    return transform(e, lambda n: by_id.get(id(n)) if isinstance(n, Var) else None)


def free_vars(e: Expr) -> list[Var]:
    seen: dict[int, Var] = {}
    for node in walk(e):
        if isinstance(node, Var):
            seen.setdefault(id(node), node)
    return list(seen.values())


def loaded_tensors(e: Expr) -> list:
    """Tensors read by `e`, in first-read order, without duplicates."""
    seen: dict[int, object] = {}
    for node in walk(e):
        if isinstance(node, Load):
            seen.setdefault(id(node.tensor), node.tensor)
    return list(seen.values())


def is_const(e: Expr, value=None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


# Structural keys are interned ints: a node's key is looked up by its head and its children's keys,
# so making or hashing one costs the node's own size, not its subtree's (nested tuples were rehashed
# whole at every dict lookup: quadratic on a Winograd tile's deep index sums). Each node keeps its key.
_interned: dict = {}
_fresh = itertools.count()
_generation = 0  # bumped when the table starts over: a node's cached key from before is recomputed,
MAX_INTERNED = 1 << 20  # so equal nodes keep equal keys whatever was compiled earlier in the process


def structural_key(e: Expr) -> int:
    """An int equal for structurally equal expressions (vars by identity, tensors by identity,
    constants by value and dtype)."""
    global _interned, _generation
    cached = e.__dict__.get("_skey")
    if cached is not None and (cached[0] == _generation or isinstance(e, Var)):
        return cached[1]
    if isinstance(e, Var):
        k = next(_fresh)
    else:
        if isinstance(e, Const):  # -0.0 == 0.0 in Python: the sign keeps them apart
            sign = math.copysign(1.0, float(e.value)) if e.dtype.is_float else 0
            flat = ("const", e.value, sign, e.dtype)
        else:
            head = [type(e).__name__, e.dtype]
            for attr in ("op", "func", "stride", "lanes"):
                if hasattr(e, attr):
                    head.append(getattr(e, attr))
            if isinstance(e, Load):
                head.append(id(e.tensor))
            if isinstance(e, Reduce):
                head.append(id(e.combiner))
                head.append(tuple(id(a) for a in e.axes))
            flat = (tuple(head), tuple(structural_key(c) for c in children(e)))
        k = _interned.get(flat)
        if k is None:
            if _interned and len(_interned) >= MAX_INTERNED:
                _interned, _generation = {}, _generation + 1
                return structural_key(e)  # the children's keys now belong to the old table
            k = _interned.setdefault(flat, next(_fresh))
    object.__setattr__(e, "_skey", (_generation, k))
    return k
