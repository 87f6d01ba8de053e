"""The problems a CPU template computes, as plain data with a NumPy reference.

A problem is a GEMM `out[M, N] = epilogue(A[M, K] @ B[K, N])` where B is a constant weight
(packed once, as a deployed model packs it), or an NHWC convolution computed as an implicit
GEMM: rows are output pixels (n, oh, ow), columns output channels, and the reduction runs over
(kh, kw, ic) of a weight laid out HWIO. A convolution may read and write channel-blocked data
instead (NCHW{b}c, TVM's packed layout, what a model compiled with layout "NCHWc" passes between
its kernels): `in_block` / `out_block` channels innermost; the weight stays HWIO."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError


def _positive(what: str, **dims) -> None:
    for name, v in dims.items():
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ShapeError(f"{what}: {name} must be a positive integer, got {v!r}")


@dataclass(frozen=True)
class GemmProblem:
    """out[M, N] = A[M, K] @ B[K, N] (B constant)."""
    M: int
    N: int
    K: int

    def __post_init__(self):
        _positive("GemmProblem", M=self.M, N=self.N, K=self.K)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.M, self.K)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.K, self.N)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.M, self.N)

    @property
    def name(self) -> str:
        return f"gemm_{self.M}x{self.N}x{self.K}"

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a.astype(np.float64) @ b.astype(np.float64)

    def to_rows(self, y: np.ndarray) -> np.ndarray:
        """An output-shaped array as [M, N] rows."""
        return y.reshape(self.M, self.N)

    def from_rows(self, rows: np.ndarray) -> np.ndarray:
        return rows.reshape(self.output_shape)


@dataclass(frozen=True)
class ConvProblem:
    """NHWC conv2d: x[batch, H, W, IC] * w[KH, KW, IC, OC] -> out[batch, OH, OW, OC]; with blocks
    (both set): x[batch, IC/in_block, H, W, in_block] -> out[batch, OC/out_block, OH, OW, out_block]."""
    batch: int
    H: int
    W: int
    IC: int
    OC: int
    KH: int
    KW: int
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    in_block: int = 0  # 0: NHWC
    out_block: int = 0

    def __post_init__(self):
        _positive("ConvProblem", batch=self.batch, H=self.H, W=self.W, IC=self.IC, OC=self.OC, KH=self.KH,
                  KW=self.KW, stride=self.stride, dilation=self.dilation)
        if (self.in_block > 0) != (self.out_block > 0) or min(self.in_block, self.out_block) < 0:
            raise ShapeError(f"ConvProblem: in_block and out_block are both 0 (NHWC) or both positive (NCHW{{b}}c), "
                             f"got {self.in_block} and {self.out_block}")
        if self.blocked and (self.IC % self.in_block or self.OC % self.out_block):
            raise ShapeError(f"ConvProblem: {self.IC} input / {self.OC} output channels do not split into blocks of "
                             f"{self.in_block} / {self.out_block}")
        if self.pad < 0:
            raise ShapeError(f"ConvProblem: pad must be >= 0, got {self.pad}")
        if self.OH < 1 or self.OW < 1:
            raise ShapeError(f"ConvProblem: a {self.KH}x{self.KW} kernel (dilation {self.dilation}) does not fit the "
                             f"{self.H}x{self.W} input padded by {self.pad}")

    @property
    def OH(self) -> int:
        return (self.H + 2 * self.pad - self.dilation * (self.KH - 1) - 1) // self.stride + 1

    @property
    def OW(self) -> int:
        return (self.W + 2 * self.pad - self.dilation * (self.KW - 1) - 1) // self.stride + 1

    @property
    def M(self) -> int:
        return self.batch * self.OH * self.OW

    @property
    def N(self) -> int:
        return self.OC

    @property
    def K(self) -> int:
        return self.KH * self.KW * self.IC

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def blocked(self) -> bool:
        return self.out_block > 0

    @property
    def input_shape(self) -> tuple[int, ...]:
        if self.blocked:
            return (self.batch, self.IC // self.in_block, self.H, self.W, self.in_block)
        return (self.batch, self.H, self.W, self.IC)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.KH, self.KW, self.IC, self.OC)

    @property
    def output_shape(self) -> tuple[int, ...]:
        if self.blocked:
            return (self.batch, self.OC // self.out_block, self.OH, self.OW, self.out_block)
        return (self.batch, self.OH, self.OW, self.OC)

    def to_rows(self, y: np.ndarray) -> np.ndarray:
        """An output-shaped array as [M, N] rows (pixels x output channels)."""
        y = np.asarray(y).reshape(self.output_shape)
        return (y.transpose(0, 2, 3, 1, 4) if self.blocked else y).reshape(self.M, self.N)

    def from_rows(self, rows: np.ndarray) -> np.ndarray:
        y = np.asarray(rows).reshape(self.batch, self.OH, self.OW, self.OC)
        if not self.blocked:
            return y
        y = y.reshape(self.batch, self.OH, self.OW, -1, self.out_block)
        return np.ascontiguousarray(y.transpose(0, 3, 1, 2, 4))

    @property
    def pointwise(self) -> bool:
        """A 1x1, stride-1, unpadded conv: a GEMM over the pixels (what may follow in a b2b pair)."""
        return self.KH == self.KW == self.stride == 1 and self.pad == 0

    @property
    def name(self) -> str:
        return (f"conv_n{self.batch}_{self.H}x{self.W}_{self.IC}to{self.OC}_k{self.KH}x{self.KW}_s{self.stride}"
                f"_p{self.pad}" + (f"_d{self.dilation}" if self.dilation > 1 else "")
                + (f"_c{self.in_block}c{self.out_block}" if self.blocked else ""))

    def reference(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """float64, in the problem's output layout."""
        p, s, d = self.pad, self.stride, self.dilation
        x = np.asarray(x).reshape(self.input_shape)
        if self.blocked:
            x = x.transpose(0, 2, 3, 1, 4).reshape(self.batch, self.H, self.W, self.IC)
        xp = np.pad(x.astype(np.float64), ((0, 0), (p, p), (p, p), (0, 0)))
        out = np.zeros((self.batch, self.OH, self.OW, self.OC))
        for kh in range(self.KH):
            for kw in range(self.KW):
                patch = xp[:, kh * d: kh * d + s * (self.OH - 1) + 1: s, kw * d: kw * d + s * (self.OW - 1) + 1: s, :]
                out += patch @ w[kh, kw].astype(np.float64)
        return self.from_rows(out) if self.blocked else out
