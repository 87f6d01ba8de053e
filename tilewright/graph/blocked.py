"""The packed activation layout of the graph, NCHW{b}c (channels cut into blocks
of b stored innermost, TVM's NCHWc), and its weight layout OIHW{ib}i{ob}o: the
layout strings, and the NumPy conversions that the reference, constant
packing and the tests share. Only NCHW and NCHW{b}c appear on graph values."""

from __future__ import annotations

import re

import numpy as np

from ..errors import ShapeError

_BLOCKED = re.compile(r"NCHW([1-9][0-9]*)c")


def block_of(layout: str | None) -> int:
    """The channel block of an activation layout: 0 for "NCHW", b for "NCHW{b}c";
    a ShapeError for anything else."""
    if layout in (None, "NCHW"):
        return 0
    m = _BLOCKED.fullmatch(layout) if isinstance(layout, str) else None
    if m is None:
        raise ShapeError(f"activation layout {layout!r} is not supported; valid: 'NCHW' or 'NCHW{{b}}c' "
                         f"such as 'NCHW8c'")
    return int(m.group(1))


def blocked(block: int) -> str:
    return f"NCHW{block}c" if block else "NCHW"


def blocked_shape(shape: tuple[int, ...], block: int) -> tuple[int, ...]:
    """The NCHW{block}c shape of a 4-D NCHW shape (block must divide C)."""
    n, c, h, w = shape
    return (n, c // block, h, w, block)


def unblocked_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, cb, h, w, b = shape
    return (n, cb * b, h, w)


def to_blocked(x: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def transform(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """`x` converted between NCHW and NCHW{b}c layouts."""
    plain = from_blocked(x) if block_of(src) else x
    return to_blocked(plain, block_of(dst)) if block_of(dst) else np.ascontiguousarray(plain)


def pack_weight(w: np.ndarray, in_block: int, out_block: int) -> np.ndarray:
    """OIHW -> OIHW{in_block}i{out_block}o: [O/ob, I/ib, KH, KW, ib, ob]."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o // out_block, out_block, i // in_block, in_block, kh, kw)
                                .transpose(0, 2, 4, 5, 3, 1))


def unpack_weight(w: np.ndarray) -> np.ndarray:
    ob_n, ib_n, kh, kw, ib, ob = w.shape
    return np.ascontiguousarray(w.transpose(0, 5, 1, 4, 2, 3).reshape(ob_n * ob, ib_n * ib, kh, kw))


__all__ = ["block_of", "blocked", "blocked_shape", "unblocked_shape", "to_blocked", "from_blocked", "transform",
           "pack_weight", "unpack_weight"]
