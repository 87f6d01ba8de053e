"""What the HLS path reads from a te computation: a sum over reduce axes of the product of two
input reads with affine indices (GEMM, convolutions of any rank, stride and dilation), where an
input may reach the product through a zero-padding stage (`ops.pad_axes`, which every padded
convolution uses). The pad is not a stage on the FPGA: the read stage fetches the input's box and
supplies zeros outside the input, so the form records each read's index into the input itself.

int8 / int16 operands cast to a wider integer before multiplying (TVM's `out_dtype`) accumulate
exactly in that type; float32 operands accumulate in float32."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..ir.expr import Binary, BinOp, Cast, Const, IterVar, Load, Reduce, Select
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from .affine_index import NotAffine, affine_rows

OPERAND_DTYPES = ("float32", "int8", "uint8", "int16", "uint16")


@dataclass(frozen=True)
class HLSOperand:
    """source[matrix @ (spatial..., reduce...) + offset], zero where that index is outside `source`."""

    source: Tensor
    matrix: tuple[tuple[int, ...], ...]
    offset: tuple[int, ...]
    padded: bool  # reads outside the source happen (and read zero)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.source.shape)


@dataclass(frozen=True)
class HLSForm:
    output: Tensor
    spatial: tuple[tuple[str, int], ...]
    reduce: tuple[tuple[str, int], ...]
    operands: tuple[HLSOperand, HLSOperand]
    in_dtype: str
    acc_dtype: str

    @property
    def axes(self) -> tuple[tuple[str, int], ...]:
        return (*self.spatial, *self.reduce)

    @property
    def macs(self) -> int:
        n = 1
        for _, e in self.axes:
            n *= e
        return n

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(o.source for o in self.operands)


def _strip_casts(e, acc_dtype, where: str):
    while isinstance(e, Cast):
        if e.dtype.name != acc_dtype:
            raise LoweringError(f"{where}: operands may only be cast to the accumulation type {acc_dtype}, got "
                                f"`{e}`")
        e = e.value
    return e


def _through_pad(load: Load, where: str):
    """(placeholder load, shift per dim) of a read of a zero-padding stage, or of the placeholder itself."""
    t = load.tensor
    if isinstance(t.op, PlaceholderOp):
        return load, None
    op = t.op
    if not isinstance(op, ComputeOp) or isinstance(op.body, Reduce):
        raise LoweringError(f"{where}: '{t.name}' is computed; the HLS compiler reads inputs (placeholders) or "
                            f"zero-padded inputs only. Build '{t.name}' as its own kernel and pass it as an input")
    body = op.body
    inner = body
    if isinstance(body, Select):
        if not (isinstance(body.f, Const) and body.f.value == 0):
            raise LoweringError(f"{where}: '{t.name}' pads with {body.f}, not zero; the read stage supplies zeros only")
        inner = body.t
    if not (isinstance(inner, Load) and isinstance(inner.tensor.op, PlaceholderOp)):
        raise LoweringError(f"{where}: '{t.name}' is computed (`{str(body)[:60]}`), not a zero padding of an input; "
                            f"build '{t.name}' as its own kernel and pass it as an input")
    try:
        rows, offs = affine_rows(inner.indices, list(op.axis))
    except NotAffine:
        rows, offs = None, None
    n = len(op.axis)
    if rows is None or any(rows[d][k] != (d == k) for d in range(n) for k in range(n)):
        raise LoweringError(f"{where}: '{t.name}' reads '{inner.tensor.name}' at `{inner.indices}`, not shifted "
                            f"by constants; only zero padding is folded into the read stage")
    return inner, tuple(offs)


def hls_form(output: Tensor) -> HLSForm:
    where = f"HLS operator '{output.name}'"
    op = output.op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
        raise LoweringError(f"{where}: expected a sum of products over reduce axes (tw.sum(a[...] * b[...], "
                            f"axis=[...])), got `{str(getattr(op, 'body', output))[:80]}`")
    body = op.body
    if body.combiner.name != "sum" or body.condition is not None:
        raise LoweringError(f"{where}: the reduction must be an unconditioned sum, got {body.combiner.name}")
    acc_dtype = output.dtype.name
    prod = _strip_casts(body.source, acc_dtype, where)
    if not (isinstance(prod, Binary) and prod.op is BinOp.MUL):
        raise LoweringError(f"{where}: the summand must be a product of two tensor reads, got `{prod}`")
    ivars: list[IterVar] = [*op.axis, *op.reduce_axis]
    for v in ivars:
        if v.begin:
            raise LoweringError(f"{where}: axis '{v.name}' starts at {v.begin}; axes must start at 0")
    operands = []
    for factor in (prod.a, prod.b):
        load = _strip_casts(factor, acc_dtype, where)
        if not isinstance(load, Load):
            raise LoweringError(f"{where}: each factor must read a tensor, got `{factor}`")
        try:
            rows, offs = affine_rows(load.indices, ivars)
        except NotAffine as exc:
            raise LoweringError(f"{where}: index {exc.dim} of '{load.tensor.name}' is `{exc.index}`, not affine in "
                                f"the axes") from None
        src, shift = _through_pad(load, where)
        if shift is not None:
            offs = tuple(o + s for o, s in zip(offs, shift))
        padded = shift is not None and any(shift)
        operands.append(HLSOperand(src.tensor, rows, offs, padded))
    dtypes = {o.source.dtype.name for o in operands}
    if len(dtypes) != 1 or next(iter(dtypes)) not in OPERAND_DTYPES:
        raise LoweringError(f"{where}: both operands must have one dtype of {', '.join(OPERAND_DTYPES)}; got "
                            f"{' and '.join(o.source.dtype.name for o in operands)}")
    (in_dtype,) = dtypes
    if in_dtype == "float32" and acc_dtype != "float32":
        raise LoweringError(f"{where}: float32 operands accumulate in float32, not {acc_dtype}")
    if in_dtype != "float32" and acc_dtype not in ("int32", "int64"):
        raise LoweringError(f"{where}: {in_dtype} products must accumulate in int32 or int64 (cast the operands: "
                            f"x.astype('int32')), got {acc_dtype}")
    return HLSForm(output, tuple((v.name, v.extent) for v in op.axis),
                   tuple((v.name, v.extent) for v in op.reduce_axis), tuple(operands), in_dtype, acc_dtype)


__all__ = ["OPERAND_DTYPES", "HLSForm", "HLSOperand", "hls_form"]
