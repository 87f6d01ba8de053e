"""The graph ops of a Winograd convolution (`graph/winograd.py` writes them; `ops/winograd.py`
is their te): their NumPy reference and lowering, one table each for `reference` and
`lower_te` (their types are in `infer`).

- `winograd_input(x)`, attrs `padding` (top, left, bottom, right): x [N, C/b, H, W, b] ->
  V [36, N * tiles, C], every 6x6 input tile transformed (B^T d B);
- `winograd_output(m, bias?)`, attr `shape` (the NCHW{b}c output): M [36, N * tiles, O] ->
  Y, every 4x4 output tile transformed back (A^T M A), plus the bias.
Between them a `matmul` with the transformed weights U [36, C, O]."""

from __future__ import annotations

import numpy as np

from ..ops import winograd as wino
from .blocked import from_blocked, to_blocked
from .infer import quad
from .ir import Node


def _padding(node: Node) -> tuple[int, int, int, int]:
    return quad(node.attr("padding", (1, 1, 1, 1)))


def out_hw(node: Node, h: int, w: int) -> tuple[int, int]:
    """The output size of the 3x3 convolution a `winograd_input` node transforms for."""
    return wino.conv_out_hw(h, w, _padding(node))


_BT, _AT = np.asarray(wino.BT, np.float64), np.asarray(wino.AT, np.float64)


def reference_input(node: Node, x: np.ndarray) -> np.ndarray:
    plain = from_blocked(x).astype(np.float64)
    n, c, h, w = plain.shape
    top, left, _, _ = _padding(node)
    th, tw = wino.tiles(*out_hw(node, h, w))
    side = wino.SIDE
    xp = np.zeros((n, c, th * wino.TILE + side - wino.TILE, tw * wino.TILE + side - wino.TILE))
    rows, cols = min(h, xp.shape[2] - top), min(w, xp.shape[3] - left)
    xp[:, :, top:top + rows, left:left + cols] = plain[:, :, :rows, :cols]
    d = np.stack([np.stack([xp[:, :, ty * wino.TILE:ty * wino.TILE + side, tx * wino.TILE:tx * wino.TILE + side]
                            for tx in range(tw)], 2) for ty in range(th)], 2)  # [n, c, th, tw, 6, 6]
    v = np.einsum("ai,nctuij,bj->abntuc", _BT, d, _BT)
    return np.ascontiguousarray(v.reshape(wino.POSITIONS, n * th * tw, c), dtype=x.dtype)


def reference_output(node: Node, m: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    n, ob, oh, ow, b = (int(d) for d in node.attr("shape"))
    th, tw = wino.tiles(oh, ow)
    side, t = wino.SIDE, wino.TILE
    mm = m.astype(np.float64).reshape(side, side, n, th, tw, ob * b)
    y = np.einsum("ai,ijntuo,bj->notaub", _AT, mm, _AT).reshape(n, ob * b, th * t, tw * t)[:, :, :oh, :ow]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return to_blocked(y.astype(m.dtype), b)


def lower_input(node: Node, a: list, name: str):
    top, left, _, _ = _padding(node)
    _, _, h, w, _ = a[0].shape
    return wino.winograd_input(a[0], (top, left), out_hw(node, int(h), int(w)), name=name)


def lower_output(node: Node, a: list, name: str):
    return wino.winograd_output(a[0], a[1] if len(a) > 1 else None, tuple(node.attr("shape")), name=name)


REFERENCE = {"winograd_input": reference_input, "winograd_output": reference_output}
LOWER = {"winograd_input": lower_input, "winograd_output": lower_output}

__all__ = ["REFERENCE", "LOWER", "out_hw"]
