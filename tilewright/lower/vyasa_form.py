"""What the Vyasa passes read from a te computation: a sum of products of two tensor reads with
affine indices (a convolution: CV filters, CONV2D / CONV3D layers), optionally stored through an
`ops.shift_round_saturate`, as the spatial and reduce axes and each operand's access matrix.

The bounds the hardware needs are proven here from the inputs' value ranges (a placeholder's
`value_range`, else its dtype): the sum must fit the datapath's accumulator lanes (80 bits for
32-bit operands, 48 for 16-bit) and the te's own reduction type, so that the kernel and the
reference compute the same integers; otherwise the error names the bound and what would fit."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..ir.expr import Binary, BinOp, Cast, IterVar, Load, Reduce
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from .affine_index import NotAffine, affine_rows
from .value_range import tensor_range


@dataclass(frozen=True)
class Operand:
    """tensor[matrix @ (spatial..., reduce...) + offset]: a read of the reduction's body."""

    tensor: Tensor
    matrix: tuple[tuple[int, ...], ...]
    offset: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def bits(self) -> int:
        return self.tensor.dtype.bits

    def column(self, axis: int) -> tuple[int, ...]:
        return tuple(row[axis] for row in self.matrix)

    def index(self, point) -> tuple[int, ...]:
        return tuple(sum(c * p for c, p in zip(row, point)) + o for row, o in zip(self.matrix, self.offset))


@dataclass(frozen=True)
class ConvForm:
    """The reduction `acc` (stored as `output`) over spatial then reduce axes."""

    output: Tensor
    acc: Tensor
    spatial: tuple[tuple[str, int], ...]
    reduce: tuple[tuple[str, int], ...]
    operands: tuple[Operand, Operand]
    bits: int  # operand width: selects the datapath
    out_bits: int
    shift: int
    round_half_up: bool
    sum_bound: int  # |sum| is at most this

    @property
    def macs(self) -> int:
        n = 1
        for _, e in (*self.spatial, *self.reduce):
            n *= e
        return n

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in (*self.spatial, *self.reduce))

    def spatial_index(self, name: str) -> int:
        names = [n for n, _ in self.spatial]
        if name not in names:
            raise LoweringError(f"'{self.output.name}' has no spatial axis '{name}'; its spatial axes: "
                                f"{', '.join(names)}")
        return names.index(name)


def _strip(e):
    while isinstance(e, Cast):
        if not e.dtype.is_int:
            raise LoweringError(f"the AIE datapath multiplies integers; `{e}` casts to {e.dtype}")
        e = e.value
    return e


def _operand(load, ivars: list[IterVar], where: str) -> Operand:
    if not isinstance(load, Load) or not isinstance(load.tensor.op, PlaceholderOp):
        raise LoweringError(f"{where}: each factor of the product must read an input tensor (a placeholder), "
                            f"got `{load}`; compute intermediate stages separately")
    try:
        rows, offs = affine_rows(load.indices, ivars)
    except NotAffine as exc:
        raise LoweringError(f"{where}: index {exc.dim} of '{load.tensor.name}' is `{exc.index}`, not affine in "
                            f"the axes; the AIE compiler needs affine reads (pad the input first)") from None
    return Operand(load.tensor, rows, offs)


def conv_form(output: Tensor, acc_bits_of, wrapping: bool = False) -> ConvForm:
    """Analyse `output`; `acc_bits_of(bits)` is the target's accumulator lane width for operands of `bits`.
    `wrapping`: the target sums 16-bit products in wrapping 32-bit lanes exactly as a te int32 sum does
    (x86 vpmaddwd + vpaddd), so an int32 output of 16-bit operands needs no range proof."""
    shift, rnd = 0, False
    acc = output
    if isinstance(output.op, ComputeOp) and output.op.attrs.get("operator") == "shift_round_saturate":
        shift, rnd = output.op.attrs["shift"], output.op.attrs["round"]
        acc = output.op.input_tensors[0]
    where = f"AIE operator '{output.name}'"
    if not isinstance(acc.op, ComputeOp) or not isinstance(acc.op.body, Reduce):
        raise LoweringError(f"{where}: expected a sum of products (tw.sum over reduce axes), optionally stored "
                            f"through tw.ops.shift_round_saturate; got `{str(getattr(acc.op, 'body', acc))[:80]}`")
    body = acc.op.body
    if body.combiner.name != "sum" or body.condition is not None:
        raise LoweringError(f"{where}: the reduction must be an unconditioned sum, got {body.combiner.name}")
    prod = _strip(body.source)
    if not (isinstance(prod, Binary) and prod.op is BinOp.MUL):
        raise LoweringError(f"{where}: the summand must be a product of two tensor reads, got `{prod}`")
    ivars = [*acc.op.axis, *acc.op.reduce_axis]
    for v in ivars:
        if v.begin:
            raise LoweringError(f"{where}: axis '{v.name}' starts at {v.begin}; axes must start at 0")
    ops = tuple(_operand(_strip(x), ivars, where) for x in (prod.a, prod.b))
    bits = {o.bits for o in ops}
    if len(bits) != 1 or not {o.tensor.dtype.is_int for o in ops} == {True}:
        raise LoweringError(f"{where}: both operands must be integers of one width (32 or 16 bits), got "
                            f"{ops[0].tensor.dtype} and {ops[1].tensor.dtype}")
    (b,) = bits
    out_bits = output.dtype.bits
    if wrapping:
        if (b, out_bits, acc.dtype.bits, shift) != (16, 32, 32, 0) or output is not acc:
            raise LoweringError(f"{where}: the x86 datapath sums int16 products in int32 lanes: write the te as an "
                                f"int32 sum of int16 reads, stored as it is; got {b}-bit operands, an "
                                f"{acc.dtype} sum and an {output.dtype} output")
        return ConvForm(output, acc, tuple((v.name, v.extent) for v in acc.op.axis),
                        tuple((v.name, v.extent) for v in acc.op.reduce_axis), ops, b, out_bits, 0, False, 0)
    if out_bits != b or not output.dtype.is_int:
        raise LoweringError(f"{where}: a {b}-bit datapath stores {b}-bit results (srs), but the output is "
                            f"{output.dtype}; use tw.ops.shift_round_saturate(acc, shift, 'int{b}')")
    ranges = [tensor_range(o.tensor) for o in ops]
    prod_bound = max(abs(x) for x in ranges[0]) * max(abs(x) for x in ranges[1])
    taps = 1
    for v in acc.op.reduce_axis:
        taps *= v.extent
    bound = prod_bound * taps
    hw = acc_bits_of(b)
    limits = [(hw, f"the {hw}-bit accumulator lanes of the {b}-bit datapath"),
              (acc.dtype.bits, f"the te reduction's {acc.dtype}")]
    for width, what in limits:
        if bound >= 1 << (width - 1):
            raise LoweringError(f"{where}: a sum of {taps} products of values in {ranges[0]} x {ranges[1]} can "
                                f"reach {bound:.3g}, which overflows {what}; declare narrower inputs "
                                f"(tw.placeholder(..., value_range=(lo, hi))) or sum in a wider type")
    return ConvForm(output, acc, tuple((v.name, v.extent) for v in acc.op.axis),
                    tuple((v.name, v.extent) for v in acc.op.reduce_axis), ops, b, out_bits, shift, rnd, bound)


__all__ = ["ConvForm", "Operand", "conv_form"]
