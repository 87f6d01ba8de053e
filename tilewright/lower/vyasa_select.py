"""The shuffle network's operand selection (Vyasa's SELECT): given, per lane and column, which
element of a register a MAC must read, the intrinsic parameters that make the network read it,
or None where the network cannot (the candidate is then pruned or the schedule refused).

32-bit operands (8 lanes x 1 column): lane i reads x[xstart + xoffsets.i] with 4-bit offsets, so
any lane pattern within 16 words of `xstart` is expressible. 16-bit operands (16 x 2): the x
permute moves 32-bit words, in lane pairs (UG1079's rule): the even lane of pair k reads the word
at xstart/2 + a_k, the odd lane the word at xstart/2 + a_k + b_k + 1 (a_k, b_k 4-bit, xstart even),
and one `xsquare` (four nibbles, each 0..3, shared by all pairs) picks each lane's two columns among
those four 16-bit values. z (16-bit granularity): lane i, column c reads zstart + zoffsets.i + c*zstep."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class XSelect:
    start: int
    offsets: int
    offsets_hi: int = 0
    square: int = 0x3210


@dataclass(frozen=True)
class ZSelect:
    start: int
    offsets: int = 0
    offsets_hi: int = 0
    step: int = 0


def _nibbles(values) -> int:
    word = 0
    for k, v in enumerate(values):
        word |= v << (4 * k)
    return word


def select_x32(idx: tuple[int, ...], size: int) -> XSelect | None:
    """Lane i reads element idx[i] of a `size`-element register."""
    start = min(idx)
    offs = [i - start for i in idx]
    if max(offs) > 15 or start < 0 or max(idx) >= size:
        return None
    return XSelect(start, _nibbles(offs))


def select_z(idx: tuple[tuple[int, ...], ...], size: int) -> ZSelect | None:
    """Lane i, column c reads z element idx[i][c] of a `size`-element register."""
    start = min(row[0] for row in idx)
    offs = [row[0] - start for row in idx]
    steps = {row[c] - row[0] for row in idx for c in range(1, len(row))}
    cols = len(idx[0])
    if max(offs) > 15 or start < 0 or len(steps) > 1 and cols > 1:
        return None
    step = steps.pop() if steps else 0
    if cols > 2 and any(row[c] - row[0] != c * step for row in idx for c in range(cols)):
        return None
    if any(not 0 <= v < size for row in idx for v in row):
        return None
    lo, hi = offs[:8], offs[8:]
    return ZSelect(start, _nibbles(lo), _nibbles(hi), step)


def select_x16(idx: tuple[tuple[int, int], ...], size: int) -> XSelect | None:
    """Lane i (of 16), column c (of 2) reads 16-bit element idx[i][c] of a `size`-element register."""
    return _select_x16(tuple(tuple(r) for r in idx), size)


@functools.lru_cache(maxsize=4096)
def _select_x16(idx, size: int) -> XSelect | None:
    if any(not 0 <= v < size for row in idx for v in row):
        return None
    for square in itertools.product(range(4), repeat=4):
        words = _pair_words(idx, square)
        if words is None:
            continue
        # xstart/2 must be at most the smallest even-lane word, with every a_k, b_k in 0..15
        lowest = min(w for w, _ in words)
        for half in range(lowest, max(-1, lowest - 16), -1):
            a = [we - half for we, _ in words]
            b = [wo - we - 1 for we, wo in words]
            if all(0 <= x <= 15 for x in a) and all(0 <= x <= 15 for x in b):
                flat = [v for k in range(8) for v in (a[k], b[k])]
                return XSelect(2 * half, _nibbles(flat[:8]), _nibbles(flat[8:]),
                               _nibbles(square))
    return None


def _pair_words(idx, square):
    """Per lane pair, the (even, odd) 32-bit words that `square` needs, or None if none fit."""
    out = []
    for k in range(8):
        need = (idx[2 * k][0], idx[2 * k][1], idx[2 * k + 1][0], idx[2 * k + 1][1])
        word = [None, None]  # even lane's word, odd lane's word
        for value, field in zip(need, square):
            w, part = divmod(value, 2)
            if part != field % 2:
                return None
            slot = field // 2
            if word[slot] is None:
                word[slot] = w
            elif word[slot] != w:
                return None
        we = word[0] if word[0] is not None else (word[1] - 1 if word[1] is not None else 0)
        wo = word[1] if word[1] is not None else we + 1
        out.append((we, wo))
    return out


__all__ = ["XSelect", "ZSelect", "select_x16", "select_x32", "select_z"]
