"""The polyhedral form an embedding is solved over (Rieber et al. section 3.2):
a reduction's instance set (its spatial then reduce axes, each a box
dimension) and, per tensor it reads or writes, the affine access from an
instance to a tensor element. Operator and intrinsic are both te computes,
analysed the same way; `pair_operands` says which operator read each
intrinsic input stands for, by matching the two bodies semantically (the
tensorize matcher's rule: commutative operands, casts and dtypes must agree)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TilewrightError
from ..ir.expr import IterVar, Load, Reduce
from ..lower.affine_index import NotAffine, affine_rows
from ..lower.tensorize import BodyMismatch, match_body
from ..te.tensor import ComputeOp, Tensor


class EmbeddingError(TilewrightError):
    """An intrinsic cannot be embedded (the message says which constraint class failed), or the inputs are not
    computations an embedding is defined for."""


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int
    reduce: bool


@dataclass(frozen=True)
class Access:
    """tensor[matrix @ instance + offset]; `matrix` rows are tensor dims, columns instance axes."""

    tensor: str
    shape: tuple[int, ...]
    matrix: tuple[tuple[int, ...], ...]
    offset: tuple[int, ...]

    def uses(self, axis: int) -> bool:
        return any(row[axis] for row in self.matrix)

    def dims_of(self, axis: int) -> list[int]:
        return [j for j, row in enumerate(self.matrix) if row[axis]]


@dataclass(frozen=True)
class AffineForm:
    name: str
    axes: tuple[Axis, ...]
    reads: tuple[Access, ...]  # in the order the body reads them
    write: Access
    body: Reduce
    _loads: tuple = ()  # the Load expressions behind `reads`, for pairing

    @property
    def macs(self) -> int:
        n = 1
        for a in self.axes:
            n *= a.extent
        return n

    def axis_index(self, name: str) -> int:
        for k, a in enumerate(self.axes):
            if a.name == name:
                return k
        raise EmbeddingError(f"'{self.name}' has no axis '{name}'; axes: {', '.join(a.name for a in self.axes)}")


def _access(load: Load, ivars: list[IterVar], what: str) -> Access:
    try:
        rows, offs = affine_rows(load.indices, ivars)
    except NotAffine as exc:
        raise EmbeddingError(f"{what}: index {exc.dim} of '{load.tensor.name}' is `{exc.index}`, not affine in the "
                             f"computation's axes; an embedding needs affine accesses (inline or "
                             f"precompute the non-affine part)") from None
    return Access(load.tensor.name, tuple(load.tensor.shape), rows, offs)


def _loads(e, out: list) -> None:
    if isinstance(e, Load):
        out.append(e)
        return
    for name in ("a", "b", "value", "source"):
        child = getattr(e, name, None)
        if child is not None and hasattr(child, "dtype"):
            _loads(child, out)


def affine_form(t: Tensor, what: str = "operator") -> AffineForm:
    """The instance set and affine accesses of a reduction `t` (a te compute whose body is a sum)."""
    if not isinstance(t, Tensor) or not isinstance(t.op, ComputeOp):
        raise EmbeddingError(f"{what}: expected a te compute tensor (a reduction over reduce axes), got {t!r:.80}")
    body = t.op.body
    if not isinstance(body, Reduce) or body.condition is not None:
        raise EmbeddingError(f"{what} '{t.name}': an embedding needs an unconditioned reduction body "
                             f"(tw.sum over reduce axes), got `{str(body)[:80]}`")
    ivars = [*t.op.axis, *t.op.reduce_axis]
    for v in ivars:
        if v.begin:
            raise EmbeddingError(f"{what} '{t.name}': axis '{v.name}' starts at {v.begin}; axes must start at 0")
    axes = tuple(Axis(v.name, v.extent, k >= len(t.op.axis)) for k, v in enumerate(ivars))
    loads: list[Load] = []
    _loads(body.source, loads)
    reads = tuple(_access(ld, ivars, what) for ld in loads)
    n_sp = len(t.op.axis)
    eye = tuple(tuple(int(k == j) for k in range(len(ivars))) for j in range(n_sp))
    write = Access(t.name, tuple(t.shape), eye, (0,) * n_sp)
    return AffineForm(t.name, axes, reads, write, body, tuple(loads))


def pair_operands(op: AffineForm, intrin: AffineForm) -> list[int]:
    """For each intrinsic read, the index of the operator read it stands for."""
    if op.body.combiner.name != intrin.body.combiner.name:
        raise EmbeddingError(f"'{op.name}' reduces with {op.body.combiner.name}, the intrinsic '{intrin.name}' with "
                             f"{intrin.body.combiner.name}")
    placeholders = {id(ld.tensor): ld.tensor for ld in intrin._loads}
    uses: list = []
    try:
        match_body(intrin.body.source, op.body.source, placeholders, uses)
    except BodyMismatch as exc:
        raise EmbeddingError(f"the dataflow of '{intrin.name}' does not occur in '{op.name}': {exc}") from None
    out = []
    for ld in intrin._loads:
        use = next(u for u in uses if u.placeholder is ld.tensor)
        hit = [k for k, o in enumerate(op._loads) if o is use.expr]
        if not hit:
            raise EmbeddingError(f"intrinsic operand '{ld.tensor.name}' stands for `{use.expr}` in '{op.name}', "
                                 f"which is not a plain tensor read")
        out.append(hit[0])
    return out


__all__ = ["Access", "AffineForm", "Axis", "EmbeddingError", "affine_form", "pair_operands"]
