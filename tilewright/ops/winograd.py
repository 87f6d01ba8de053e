"""Winograd convolution F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks") on NCHW{b}c data, as the stages a graph runs one after another:

1. `winograd_input`: every 6x6 input tile d (tiles 4 apart) becomes V = B^T d B, stored
   V[e, p, c] (e: the 36 transformed positions, p: the tile, c: the input channel);
2. a batched GEMM over input channels, M[e] = V[e] U[e] (`ops.matmul`), with U = G g G^T
   the transformed weights [36, C, O], computed once in NumPy (`winograd_weight`), as a
   deployment packs constant weights;
3. `winograd_output`: every 4x4 output tile Y = A^T M A (plus the bias), written straight
   into the NCHW{b}c output.

A 3x3 layer's multiply-adds drop from 9 to 36/16 = 2.25 per output (4x fewer), at the
price of the transforms and their temporaries. Each transform's coefficients are picked by
`select` on a dispatch loop (`e`; the output's `h % 4` and `w % 4`); the CPU space keeps
such loops whole in the unrolled register tile (space/cpu_plan.dispatch_periods), so the
selects fold to constants and the compiler shares the separable passes' partial sums."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..te import all as all_of
from ..te import compute, const, select
from ..te.tensor import Tensor

TILE = 4  # outputs per tile side
TAPS = 3  # the window
SIDE = TILE + TAPS - 1  # inputs per tile side
POSITIONS = SIDE * SIDE

# Interpolation points 0, -1, 1, -2, 2 and infinity
BT = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0),
      (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))
G = ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6), (1 / 24, 1 / 12, 1 / 6),
     (1 / 24, -1 / 12, 1 / 6), (0, 0, 1))
AT = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))


def conv_out_hw(h: int, w: int, padding: tuple[int, int, int, int]) -> tuple[int, int]:
    """The output size of a 3x3 stride-1 convolution of an h x w input padded (top, left, bottom, right)."""
    top, left, bottom, right = padding
    return h + top + bottom - TAPS + 1, w + left + right - TAPS + 1


def tiles(out_h: int, out_w: int) -> tuple[int, int]:
    """Output tiles along h and w (the last ones may reach past the output)."""
    return math.ceil(out_h / TILE), math.ceil(out_w / TILE)


def winograd_weight(w: np.ndarray) -> np.ndarray:
    """OIHW 3x3 weights -> U[36, I, O] = G w G^T, float32 (computed in float64)."""
    if w.ndim != 4 or w.shape[2:] != (TAPS, TAPS):
        raise ShapeError(f"winograd_weight: expected OIHW weights with a 3x3 window, got shape {w.shape}")
    g = np.asarray(G, np.float64)
    u = np.einsum("ai,ocij,bj->abco", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(POSITIONS, w.shape[1], w.shape[0]), dtype=np.float32)


def _dispatch(var, branches: list):
    """branches[var] as a chain of selects (folded where `var` is a constant)."""
    out = branches[-1]
    for k in range(len(branches) - 2, -1, -1):
        out = select(var == k, branches[k], out)
    return out


def _combine(coefs, term):
    """sum_i coefs[i] * term(i) over the nonzero coefficients, in a fixed order (so equal partial
    sums of different branches are equal expressions a compiler shares)."""
    out = None
    for i, c in enumerate(coefs):
        if c:
            t = term(i) if c == 1 else -term(i) if c == -1 else term(i) * float(c)
            out = t if out is None else out + t
    return out


def winograd_input(x: Tensor, padding=(1, 1), out_hw: tuple[int, int] | None = None, *,
                   name: str = "winograd_input") -> Tensor:
    """x [N, C/b, H, W, b] (NCHW{b}c) -> V [36, N * tiles, C]: each tile's 6x6 inputs (zero
    outside the image) transformed, V = B^T d B. `padding`: (top, left) of the 3x3 convolution;
    `out_hw`: its output size (default: a 'same' convolution, H x W)."""
    if x.ndim != 5:
        raise ShapeError(f"winograd_input: '{x.name}' must be NCHW{{b}}c (5-D), got shape {x.shape}")
    n, cb, h, w, b = (int(d) for d in x.shape)
    oh, ow = out_hw or (h, w)
    top, left = (int(p) for p in padding)
    th, tw = tiles(oh, ow)
    ph, pw = th * TILE + TAPS - 1, tw * TILE + TAPS - 1
    zero = const(0.0, x.dtype)
    xp = compute((n, cb, ph, pw, b), lambda ni, ci, i, j, bi: select(
        all_of(i >= top, i < top + h, j >= left, j < left + w), x[ni, ci, i - top, j - left, bi], zero),
        name=f"{name}_pad")

    def body(e, p, c):
        ni, ty, tx = p // (th * tw), p // tw % th, p % tw
        cb_, ci = c // b, c % b
        d = [[xp[ni, cb_, ty * TILE + i, tx * TILE + j, ci] for j in range(SIDE)] for i in range(SIDE)]
        # the first pass's partial sums, one expression each, shared by the branches that use them
        rows = [[_combine(BT[e1], lambda i, j=j: d[i][j]) for j in range(SIDE)] for e1 in range(SIDE)]
        return _dispatch(e, [_combine(BT[k % SIDE], lambda j, k=k: rows[k // SIDE][j]) for k in range(POSITIONS)])

    return compute((POSITIONS, n * th * tw, cb * b), body, name=name)


def winograd_output(m: Tensor, bias: Tensor | None, shape: tuple[int, ...], *, name: str = "winograd_output") -> Tensor:
    """M [36, N * tiles, O] -> Y [N, O/b, OH, OW, b] (NCHW{b}c, `shape`): Y = A^T M A per 4x4 tile,
    plus bias [O] when given."""
    n, ob, oh, ow, b = (int(d) for d in shape)
    th, tw = tiles(oh, ow)
    if tuple(int(d) for d in m.shape) != (POSITIONS, n * th * tw, ob * b):
        raise ShapeError(f"winograd_output: '{m.name}' must have shape {(POSITIONS, n * th * tw, ob * b)} for an "
                         f"output of {tuple(shape)}, got {m.shape}")

    def body(ni, o, hi, wi, bi):
        p = ni * (th * tw) + hi // TILE * tw + wi // TILE
        c = o * b + bi
        loads = [m[e, p, c] for e in range(POSITIONS)]
        # the first pass's partial sums, shared by the branches that use them
        cols = [[_combine(AT[a], lambda e1, e2=e2: loads[e1 * SIDE + e2]) for e2 in range(SIDE)] for a in range(TILE)]
        shift = None if bias is None else bias[c]

        def tile(a, col):
            y = _combine(AT[col], lambda e2: cols[a][e2])
            return y if shift is None else y + shift

        return _dispatch(hi % TILE, [_dispatch(wi % TILE, [tile(a, col) for col in range(TILE)]) for a in range(TILE)])

    return compute(tuple(shape), body, name=name)


__all__ = ["winograd_input", "winograd_output", "winograd_weight", "conv_out_hw", "tiles", "TILE", "POSITIONS"]
