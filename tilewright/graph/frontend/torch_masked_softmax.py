"""The guard torch's attention decomposition writes around its softmax (scaled_dot_product_attention
in math form): `where(not any(not (s == -inf), -1), 0, softmax(s))`, zeros for rows that are -inf
throughout. Its boolean steps are followed here as markers, not graph values, and the `where`
becomes the graph's softmax with `masked_rows_zero`; any other use of a boolean mask is refused
by name."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RowMask:
    """A boolean tensor derived from graph value `of`: `kind` is "neginf" (of == -inf), "not_neginf",
    "row_any_finite" (any over the last axis), "row_all_neginf", or "zeros" (zeros shaped like `of`)."""
    kind: str
    of: str


_NOT = {"neginf": "not_neginf", "row_any_finite": "row_all_neginf"}


def _marker(c, arg) -> RowMask | None:
    got = c.env.get(getattr(arg, "name", None))
    return got if isinstance(got, RowMask) else None


def eq_scalar(c, a):
    if isinstance(a["other"], float) and math.isinf(a["other"]) and a["other"] < 0:
        return RowMask("neginf", c.v(a["self"]))
    return None


def logical_not(c, a):
    m = _marker(c, a["self"])
    return RowMask(_NOT[m.kind], m.of) if m is not None and m.kind in _NOT else None


def any_dim(c, a):
    m = _marker(c, a["self"])
    rank = len(c.b.types[m.of].shape) if m is not None else 0
    if m is not None and m.kind == "not_neginf" and int(a["dim"]) % rank == rank - 1 and a.get("keepdim"):
        return RowMask("row_any_finite", m.of)
    return None


def zeros_like(c, a):
    return RowMask("zeros", c.v(a["self"])) if a.get("fill_value") == 0 else None


def where_masked_softmax(c, a):
    """The guarded softmax: the softmax node of the same scores, emitted again with the flag."""
    cond, zeros = _marker(c, a["condition"]), _marker(c, a["self"])
    if cond is None or zeros is None or cond.kind != "row_all_neginf" or zeros.kind != "zeros":
        return None
    soft = c.v(a["other"])
    node = next((n for n in c.b.nodes if soft in n.outputs), None)
    if node is None or node.op != "softmax" or node.inputs[0] != cond.of:
        return None
    rank = len(c.b.types[cond.of].shape)
    if int(node.attrs.get("axis", -1)) % rank != rank - 1:
        return None
    return c.out("softmax", [cond.of], {"axis": -1, "masked_rows_zero": True})


__all__ = ["RowMask", "any_dim", "eq_scalar", "logical_not", "where_masked_softmax", "zeros_like"]
