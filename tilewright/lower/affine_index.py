"""A read's indices as an affine map of the loop axes: `matrix @ axes + offset`, or the first
index that is not affine (for the caller's error message)."""

from __future__ import annotations

from ..ir.expr import Var
from .simplify import to_linear


class NotAffine(ValueError):
    def __init__(self, dim: int, index):
        super().__init__(f"index {dim} is `{index}`")
        self.dim, self.index = dim, index


def affine_rows(indices, ivars) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """(rows, offsets) with rows[d][k] the coefficient of ivars[k] in indices[d]; NotAffine otherwise."""
    col = {id(v): k for k, v in enumerate(ivars)}
    rows, offs = [], []
    for d, ix in enumerate(indices):
        row = [0] * len(ivars)
        lin = to_linear(ix)
        for atom, c in lin.terms.values():
            if not (isinstance(atom, Var) and id(atom) in col):
                raise NotAffine(d, ix)
            row[col[id(atom)]] += int(c)
        rows.append(tuple(row))
        offs.append(int(lin.const))
    return tuple(rows), tuple(offs)


__all__ = ["NotAffine", "affine_rows"]
