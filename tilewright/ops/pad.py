"""Constant padding (torch.nn.functional.pad with mode="constant")."""

from __future__ import annotations

from ..errors import ShapeError
from ..te import all as all_of
from ..te import compute, if_then_else
from ..te.tensor import Tensor


def pad(x: Tensor, pad: tuple[int, ...] | list[int], value=0, name: str = "pad") -> Tensor:
    """Pad the last len(pad)//2 axes: `pad` = (last_before, last_after, second_last_before, ...)
    as in PyTorch. Negative amounts crop. Reads outside `x` are guarded, never made."""
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim or any(isinstance(p, bool) or not isinstance(p, int) for p in pad):
        raise ShapeError(
            f"pad: pad must be an even number (<= {2 * x.ndim}) of ints (before, after) pairs starting from "
            f"the last axis of '{x.name}', got {pad!r}"
        )
    before = [0] * x.ndim
    after = [0] * x.ndim
    for k in range(len(pad) // 2):
        before[x.ndim - 1 - k], after[x.ndim - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return pad_axes(x, before, after, value, name)


def pad_axes(x: Tensor, before, after, value=0, name: str = "pad") -> Tensor:
    """Pad every axis d by before[d] / after[d] elements of `value`."""
    shape = tuple(n + b + a for n, b, a in zip(x.shape, before, after))
    for d, n in enumerate(shape):
        if n <= 0:
            raise ShapeError(f"pad: axis {d} of '{x.name}' ({x.shape[d]}) would become {n} after padding")
    if not any(before) and not any(after):
        return x

    def body(*idx):
        src = [i - b for i, b in zip(idx, before)]
        conds = []
        for d, (s, b, a) in enumerate(zip(src, before, after)):
            if b > 0:
                conds.append(s >= 0)
            if a > 0:
                conds.append(s < x.shape[d])
        inner = x[tuple(src)]
        return if_then_else(all_of(*conds), inner, value) if conds else inner

    return compute(shape, body, name=name)
