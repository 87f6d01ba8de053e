"""The store of a fixed-point accumulator: shift right (rounding half up, or flooring), then
saturate to the result's integer type: what DSP and AI-Engine-like cores do when an accumulator
lane leaves the datapath (their `srs`). The compute records its operator and parameters in
`attrs`, which is how a backend that lowers whole operators (target "aie") recognises it."""

from __future__ import annotations

from ..errors import ShapeError
from ..ir.dtype import as_dtype
from ..te import compute, const
from ..te import max as te_max
from ..te import min as te_min
from ..te.tensor import Tensor
from .conv import expect_tensor


def shift_round_saturate(acc: Tensor, shift: int = 0, dtype: str = "int16", round_half_up: bool = False,
                         name: str = "srs") -> Tensor:
    """clip((acc [+ 2^(shift-1)]) >> shift, dtype's range) as `dtype`, elementwise; `acc` an integer
    tensor (a convolution summed in int64, say)."""
    op = "shift_round_saturate"
    expect_tensor(acc, op, "accumulator")
    if not acc.dtype.is_int:
        raise ShapeError(f"{op}: accumulator '{acc.name}' must be an integer tensor, got {acc.dtype}")
    out = as_dtype(dtype, f"{op} dtype")
    if not out.is_int or out.bits > acc.dtype.bits:
        raise ShapeError(f"{op}: dtype must be an integer type no wider than the accumulator's {acc.dtype}, "
                         f"got {out}")
    if isinstance(shift, bool) or not isinstance(shift, int) or not 0 <= shift < acc.dtype.bits:
        raise ShapeError(f"{op}: shift must be an int in 0..{acc.dtype.bits - 1}, got {shift!r}")
    lo, hi = out.int_range
    wide = acc.dtype.name

    def body(*i):
        v = acc[i]
        if round_half_up and shift:
            v = v + const(1 << (shift - 1), wide)
        if shift:
            v = v >> const(shift, wide)
        return te_min(te_max(v, const(lo, wide)), const(hi, wide)).astype(out.name)

    attrs = {"operator": op, "shift": shift, "dtype": out.name, "round": bool(round_half_up and shift)}
    return compute(acc.shape, body, name=name, attrs=attrs)


__all__ = ["shift_round_saturate"]
