"""Realizing an embedding of the VTA GEMM in a convolution: the rewrites of
`tw.intrin.embed` turned into one convolution the accelerator runs natively
(blocked layouts, batch lanes x input-channel block x output-channel block)
plus host-side layout transforms around it, as the paper's Relay rewrites
do on the ARM host.

A rewritten problem: batch' = (batch outer, dilation phases, lanes), where
lanes are the embedding's batch-axis digits (the batch itself, or strips or
blocks of image rows and columns: Image pack); channel' = (extra reduction
axes, digit tiles, digit lanes) over the input channels and every kernel
axis that is unrolled (Stencil unroll, im2col) or fused; kernel axes that
stay are the convolution's own loops. Every transform is one gather through
an index array built once (constant weights are packed ahead, once, on both
sides); the simulator runs the rewritten convolution, and its output is
gathered back to NCHW. TVM's template is the embedding batch -> n,
out -> o, in -> ic with padding, no unroll, and dilation blown up into
zero taps: `reference_embedding`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ShapeError
from ..intrin.affine_form import EmbeddingError
from ..lower.vta_conv import TVM_EPILOGUE, ConvShape, Epilogue
from ..targets.vta import VTAConfig
from ..te import placeholder
from .vta_layouts import Layout, build_layout


@dataclass(frozen=True)
class ConvProblem:
    """An int8 NCHW convolution (int32 accumulate) as DeepBench lists it, dilation included."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    name: str = ""

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.pad_h - (self.kernel_h - 1) * self.dilation_h - 1) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.pad_w - (self.kernel_w - 1) * self.dilation_w - 1) // self.stride_w + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_h * self.out_w * self.in_channels * self.kernel_h
                * self.kernel_w)

    def te(self):
        """The operator as a te computation (what `tw.intrin.embed` analyses)."""
        from ..ops import conv2d

        x = placeholder((self.batch, self.in_channels, self.height, self.width), "int8", name="data")
        w = placeholder((self.out_channels, self.in_channels, self.kernel_h, self.kernel_w), "int8", name="weight")
        return conv2d(x, w, stride=(self.stride_h, self.stride_w), padding=(self.pad_h, self.pad_w),
                      dilation=(self.dilation_h, self.dilation_w), out_dtype="int32")

    def __str__(self) -> str:
        dil = f" d{self.dilation_h}" if max(self.dilation_h, self.dilation_w) > 1 else ""
        return (f"{self.name + ': ' if self.name else ''}{self.batch}x{self.in_channels}x{self.height}x{self.width}"
                f" -> {self.out_channels} k{self.kernel_h}x{self.kernel_w} s{self.stride_h} p{self.pad_h}{dil}")


@dataclass(frozen=True)
class Mapping:
    """An embedding reduced to what a convolution realization needs: digits per intrinsic axis as
    (operator axis names, extent, stride), and the input dims that are unrolled."""

    batch: tuple[tuple[tuple[str, ...], int, int], ...]
    out: tuple[tuple[tuple[str, ...], int, int], ...]
    inp: tuple[tuple[tuple[str, ...], int, int], ...]
    unrolled: frozenset[str]  # of "h", "w"
    label: str = ""
    # a dilated axis the embedding leaves alone: "phase" runs its dilation phases as separate dense images in
    # the batch (space-to-batch, the paper's packing), "blown" widens the kernel with zero taps (TVM's way)
    dilation: str = "phase"

    @classmethod
    def of(cls, embedding) -> Mapping:
        (_, b), (_, o), (_, i) = embedding.mapping
        dims = {2: "h", 3: "w"}
        unrolled = frozenset(dims[j] for _, j in embedding.unrolled if j in dims)
        return cls(b, o, i, unrolled, f"embedding #{embedding.rank}")


def reference_embedding(p: ConvProblem, cfg: VTAConfig) -> Mapping:
    """TVM's VTA conv2d template: n -> batch, o -> out, ic -> in, each padded to the block."""
    b = ((("n",), cfg.batch, 1),) if cfg.batch > 1 else ()
    return Mapping(b, ((("o",), cfg.block_out, 1),), ((("rc",), cfg.block_in, 1),), frozenset(), "padding reference",
                   dilation="blown")


@dataclass
class Realization:
    problem: ConvProblem
    mapping: Mapping
    cfg: VTAConfig
    shape: ConvShape  # the convolution the accelerator runs
    layout: Layout  # the gathers in and out

    @property
    def native(self) -> bool:
        return self.shape.macs == self.problem.macs

    def describe(self) -> str:
        return f"{self.mapping.label}: runs {self.shape} (MACs x{self.shape.macs / self.problem.macs:.3f})"


def realize(p: ConvProblem, mapping: Mapping, cfg: VTAConfig, epilogue: Epilogue = TVM_EPILOGUE) -> Realization:
    """The native convolution and the gathers for `mapping`; EmbeddingError if the accelerator's loads cannot
    express it (a strided strip over a dilated, un-unrolled window)."""
    for what, digits, ext in (("batch", mapping.batch, cfg.batch), ("out", mapping.out, cfg.block_out),
                              ("in", mapping.inp, cfg.block_in)):
        if math.prod(f for _, f, _ in digits) != ext:
            raise EmbeddingError(f"VTA {cfg.block}: the '{what}' digits {digits} do not multiply to {ext}")
    layout = build_layout(p, mapping, cfg)
    shape = ConvShape(layout.batch, layout.channels, layout.in_h, layout.in_w, layout.out_channels,
                      layout.kernel_h, layout.kernel_w, layout.pad_h, layout.pad_w, layout.stride_h,
                      layout.stride_w, name=f"{p.name or 'conv'} as {mapping.label}")
    if shape.out_h != layout.out_h or shape.out_w != layout.out_w:
        raise ShapeError(f"VTA realization of {p}: the rewritten conv gives {shape.out_h}x{shape.out_w}, the "
                         f"layout expects {layout.out_h}x{layout.out_w}")
    return Realization(p, mapping, cfg, shape, layout)


__all__ = ["ConvProblem", "Mapping", "Realization", "realize", "reference_embedding"]
