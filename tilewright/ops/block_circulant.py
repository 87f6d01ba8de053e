"""Block-circulant projection of a dense matrix (FlexTensor's BCM workload).

With F = block, the [rows, cols] input is cut into F x F blocks; each block is
replaced by the circulant matrix that best approximates it: its generator is
the mean of the block's wrapped diagonals. Two stages:

    compress[i, j] = (1/F) * sum_{t<F} x[i*F + t, (j//F)*F + ((j%F) + t) % F]
        for i < rows//F, j < (cols//F)*F
    out[i, j] = compress[i//F, (j//F)*F + ((j%F) - (i%F)) mod F]
        if i < (rows//F)*F and j < (cols//F)*F, else 0

Rows and columns beyond the last whole block are zero.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..te import all as all_of
from ..te import compute, if_then_else, reduce_axis
from ..te import sum as sum_of
from ..te.tensor import Tensor
from .params import expect_ndim, require_float


def block_circulant(x: Tensor, block: int, *, name: str = "block_circulant") -> Tensor:
    """The block-circulant projection of 2-D float `x` with F x F blocks, F = block."""
    expect_ndim(x, 2, "block_circulant", "input", "[rows, cols]")
    require_float(x, "block_circulant")
    rows, cols = x.shape
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ShapeError(f"block_circulant: block must be a positive int, got {block!r}")
    if block > rows or block > cols:
        raise ShapeError(
            f"block_circulant: block {block} is larger than input '{x.name}' {list(x.shape)}; "
            f"no whole {block}x{block} block fits"
        )
    f = block
    row_end, col_end = (rows // f) * f, (cols // f) * f
    t = reduce_axis(f, "t")
    # Dividing each term (as FlexTensor does) keeps the reduction the whole body.
    compress = compute(
        (rows // f, col_end),
        lambda i, j: sum_of(x[i * f + t, (j // f) * f + (j % f + t) % f] / f, axis=t),
        name=f"{name}_compress",
    )

    def body(i, j):
        value = compress[i // f, (j // f) * f + (j % f - i % f) % f]
        conds = ([i < row_end] if row_end < rows else []) + ([j < col_end] if col_end < cols else [])
        return if_then_else(all_of(*conds), value, 0.0) if conds else value

    return compute((rows, cols), body, name=name)
