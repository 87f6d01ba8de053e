"""Generic traversal of expression trees: children, rebuild, walk, substitute."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator

from .expr import Binary, Broadcast, Call, Cast, Compare, Const, Expr, Load, Ramp, Reduce, Select, Unary, Var

# Per node class: how to read its children, and the fields a rebuild replaces. Looked up by exact
# type (an isinstance chain per call was the lowering's largest self time), filled on first use.
_SLOTS = ((Binary, ("a", "b")), (Compare, ("a", "b")), (Unary, ("a",)), (Cast, ("value",)),
          (Select, ("cond", "t", "f")), (Ramp, ("base",)), (Broadcast, ("value",)))
_getters: dict[type, Callable] = {}


def _getter(cls: type) -> Callable:
    for base, names in _SLOTS:
        if issubclass(cls, base):
            return operator.attrgetter(*names) if len(names) > 1 else (lambda e, n=names[0]: (getattr(e, n),))
    if issubclass(cls, Call):
        return operator.attrgetter("args")
    if issubclass(cls, Load):
        return operator.attrgetter("indices")
    if issubclass(cls, Reduce):
        return lambda e: (e.source,) if e.condition is None else (e.source, e.condition)
    return lambda e: ()


def children(e: Expr) -> tuple[Expr, ...]:
    get = _getters.get(type(e))
    if get is None:
        get = _getters[type(e)] = _getter(type(e))
    return get(e)


def _rebuilt_fields(e: Expr, new: tuple[Expr, ...]) -> dict:
    if isinstance(e, Call):
        return {"args": tuple(new)}
    if isinstance(e, Load):
        return {"indices": tuple(new)}
    if isinstance(e, Reduce):
        return {"source": new[0], "condition": new[1] if len(new) > 1 else None}
    names = next(names for base, names in _SLOTS if isinstance(e, base))
    return dict(zip(names, new))


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """`e` with its children replaced (e itself if nothing changed). The copy takes every other
    field as it is (what dataclasses.replace would pass to the constructor, which has no checks
    of its own), without a cached structural key."""
    old = children(e)
    if len(old) == len(new) and all(map(operator.is_, old, new)):
        return e
    if not old:
        return e
    fields = dict(e.__dict__)
    fields.pop("_skey", None)
    fields.update(_rebuilt_fields(e, new))
    out = object.__new__(type(e))
    out.__dict__.update(fields)
    return out


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
