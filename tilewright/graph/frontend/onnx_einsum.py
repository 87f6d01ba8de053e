"""ONNX `Einsum` as graph ops. The equation is parsed (ellipsis, implicit output); each operand's
repeated subscripts become its diagonal (permute, flatten the pair, a strided slice), subscripts no
other term uses are summed out first; two operands whose subscripts split into batch, row, column and
contracted sets are one batched matmul, anything else one broadcast product summed over the
contracted subscripts."""

from __future__ import annotations

import string

import numpy as np


def _parse(imp, equation: str, ranks: list[int]):
    """(subscripts per operand, output subscripts) with the ellipsis spelled out in capital letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise imp.fail(f"equation '{equation}' names {len(terms)} operands, {len(ranks)} given")
    spare = [c for c in string.ascii_uppercase if c not in eq]
    width = max([r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t] or [0])
    ell = "".join(spare[:width])
    subs = []
    for t, r in zip(terms, ranks):
        explicit = t.replace("...", "")
        if "..." in t:
            t = t.replace("...", ell[width - (r - len(explicit)):])
        if len(t) != r or (t and not t.isalpha()):
            raise imp.fail(f"term '{t}' of equation '{equation}' for an operand of rank {r}")
        subs.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: sum(s.count(c) for s in subs) for c in set("".join(subs))}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    if len(set(out)) != len(out) or any(c not in "".join(subs) for c in out):
        raise imp.fail(f"output '{rhs}' of equation '{equation}'")
    return subs, out


def _diagonal(imp, x: str, s: str) -> tuple[str, str]:
    """x with every repeated subscript reduced to its diagonal."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        shape = imp.b.types[x].shape
        rest = [k for k in range(len(s)) if k not in (i, j)]
        x = imp.emit("permute", [x], {"dims": (*rest, i, j)})
        n = shape[i]
        x = imp.emit("reshape", [x], {"shape": (*(shape[k] for k in rest), n * n)})
        full = imp.b.types[x].shape
        x = imp.emit("slice", [x], {"begin": (0,) * len(full), "end": full, "step": (*(1,) * len(rest), n + 1)})
        s = "".join(s[k] for k in rest) + c
    return x, s


def _sum_out(imp, x: str, s: str, keep: set) -> tuple[str, str]:
    axes = tuple(k for k, c in enumerate(s) if c not in keep)
    if not axes:
        return x, s
    return imp.emit("reduce_sum", [x], {"axes": axes, "keepdims": False}), "".join(c for c in s if c in keep)


def _arrange(imp, x: str, s: str, order: str) -> str:
    """x permuted to `order`'s subscripts it has, with unit axes for the ones it lacks."""
    mine = [c for c in order if c in s]
    if mine != list(s):
        x = imp.emit("permute", [x], {"dims": tuple(s.index(c) for c in mine)})
    shape = dict(zip(mine, imp.b.types[x].shape))
    full = tuple(shape.get(c, 1) for c in order)
    return x if len(full) == len(mine) else imp.emit("reshape", [x], {"shape": full})


def einsum(imp, n, ins, a):
    values = [imp.value(i) for i in ins]
    subs, out = _parse(imp, a["equation"], [len(imp.b.types[v].shape) for v in values])
    terms = []
    for k, (v, s) in enumerate(zip(values, subs)):
        v, s = _diagonal(imp, v, s)
        others = set(out).union(*(set(t) for j, t in enumerate(subs) if j != k))
        terms.append(_sum_out(imp, v, s, others))
    sizes = {}
    for v, s in terms:
        for c, d in zip(s, imp.b.types[v].shape):
            if sizes.setdefault(c, d) != d and 1 not in (d, sizes[c]):
                raise imp.fail(f"subscript '{c}' spans {sizes[c]} and {d}")
            sizes[c] = max(sizes[c], d)
    want = tuple(sizes[c] for c in out)
    if len(terms) == 2 and (y := _as_matmul(imp, terms, out, sizes)) is not None:
        result = y
    else:
        order = out + "".join(c for c in sizes if c not in out)
        result = None
        for v, s in terms:
            v = _arrange(imp, v, s, order)
            result = v if result is None else imp.emit("mul", [result, v])
        if len(order) > len(out):
            result = imp.emit("reduce_sum", [result], {"axes": tuple(range(len(out), len(order))), "keepdims": False})
    if imp.b.types[result].shape != want:  # a subscript of extent 1 in every term but broadcast in none
        ones = imp.b.constant(np.ones(want, np.bool_), "einsum_mask")
        zero = imp.b.constant(np.zeros((), imp.b.types[result].dtype), "zero")
        result = imp.emit("where", [ones, result, zero])
    imp.env[n.output[0]] = result


def _as_matmul(imp, terms, out, sizes):
    """[batch, M, K] @ [batch, K, N] when the subscripts split so (same extents on both sides), else None."""
    (x, s), (y, t) = terms
    batch = [c for c in out if c in s and c in t]
    rows, cols = [c for c in out if c in s and c not in t], [c for c in out if c in t and c not in s]
    inner = [c for c in s if c in t and c not in out]
    if not inner or set(s) != set(batch + rows + inner) or set(t) != set(batch + cols + inner):
        return None
    xs, ys = dict(zip(s, imp.b.types[x].shape)), dict(zip(t, imp.b.types[y].shape))
    if any(xs[c] != ys[c] for c in batch + inner):
        return None

    def size(cs):
        return int(np.prod([sizes[c] for c in cs], dtype=np.int64))

    lhs = imp.emit("reshape", [_arrange(imp, x, s, "".join(batch + rows + inner))],
                   {"shape": (*(sizes[c] for c in batch), size(rows), size(inner))})
    rhs = imp.emit("reshape", [_arrange(imp, y, t, "".join(batch + inner + cols))],
                   {"shape": (*(sizes[c] for c in batch), size(inner), size(cols))})
    z = imp.emit("matmul", [lhs, rhs])
    order = "".join(batch + rows + cols)
    z = imp.emit("reshape", [z], {"shape": tuple(sizes[c] for c in order)})
    if order != out:
        z = imp.emit("permute", [z], {"dims": tuple(order.index(c) for c in out)})
    return z


EINSUM_HANDLERS = {"Einsum": einsum}

__all__ = ["EINSUM_HANDLERS"]
