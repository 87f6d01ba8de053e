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
stay are the convolution's own loops. Data and output move through compiled
host kernels of the layout's index maps (vta_host_transforms.py); constant
weights are gathered through an index array, once, ahead (on both sides);
the simulator runs the rewritten convolution. TVM's template is the
embedding batch -> n, out -> o, in -> ic with padding, no unroll, and
dilation blown up into zero taps: `reference_embedding`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError, TilewrightError
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

    def te(self, data_dtype: str = "int8"):
        """The operator as a te computation (what `tw.intrin.embed` analyses); x86's dot products read uint8
        activations."""
        from ..ops import conv2d

        x = placeholder((self.batch, self.in_channels, self.height, self.width), data_dtype, name="data")
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
    layout: Layout  # the transforms in and out

    def describe(self) -> str:
        return f"{self.mapping.label}: runs {self.shape} (MACs x{self.shape.macs / self.problem.macs:.3f})"


def realize(p: ConvProblem, mapping: Mapping, cfg: VTAConfig, epilogue: Epilogue = TVM_EPILOGUE) -> Realization:
    """The native convolution and the host transforms for `mapping`; EmbeddingError if the accelerator's loads cannot
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


def pad_and_block(x: np.ndarray, cfg: VTAConfig, channels: int) -> np.ndarray:
    """TVM's own transform for its template: pad batch and channels to the block, then block
    (N, C, H, W) -> (N/b, C/bi, H, W, b, bi) with one transpose; what the padding reference pays."""
    n, c, h, w = x.shape
    nb, cb = -(-n // cfg.batch), channels // cfg.block_in
    xp = np.zeros((nb * cfg.batch, channels, h, w), x.dtype)
    xp[:n, :c] = x
    return np.ascontiguousarray(xp.reshape(nb, cfg.batch, cb, cfg.block_in, h, w).transpose(0, 2, 4, 5, 1, 3))


def unblock(out: np.ndarray, n: int, k: int) -> np.ndarray:
    """(N/b, K/bo, OH, OW, b, bo) -> (N, K, OH, OW), cropping the padding."""
    nb, kb, oh, ow, b, bo = out.shape
    return np.ascontiguousarray(out.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, kb * bo, oh, ow)[:n, :k])


def run_realization(r: Realization, x: np.ndarray, w: np.ndarray, bias: np.ndarray, tiling=None,
                    epilogue: Epilogue = TVM_EPILOGUE):
    """(NCHW int8 output, the simulated kernel) of `r` on the simulator with `tiling` (default: untuned)."""
    conv = EmbeddedConv(r, w, bias, epilogue, tiling)
    return conv(x), conv.kernel


class EmbeddedConv:
    """A convolution run on the accelerator through an embedding: the realization's host transforms around one
    native accelerator convolution. Constant weights and bias are packed once, here (or per call through
    `run`, where `weight` is None). Called with NCHW int8 data, returns NCHW int8; `stats()` / `time()`
    are the simulated kernel's, `transform_seconds` the host transforms' wall time of the last call
    (measured)."""

    def __init__(self, r: Realization, weight: np.ndarray | None, bias: np.ndarray | None,
                 epilogue: Epilogue = TVM_EPILOGUE, tiling=None):
        from ..lower.vta_conv import lower_conv2d
        from ..runtime.vta_kernel import VTAKernel
        from .vta_tune import default_tiling

        self.realization, self.epilogue = r, epilogue
        self.kernel = VTAKernel(lower_conv2d(r.shape, r.cfg, tiling or default_tiling(r.shape, r.cfg, epilogue),
                                             epilogue))
        self.weight, self.bias = self.pack_constants(weight, bias) if weight is not None else (None, None)
        self.transform_seconds = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.run(x, self.weight, self.bias)

    def run(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, out: np.ndarray | None = None):
        """NCHW int8 data through the accelerator with weights and bias already packed; the result is unpacked
        into `out` where given (a C-contiguous int8 NCHW array), else into a new array."""
        t0 = time.perf_counter()
        data = self.realization.layout.pack_data(np.asarray(x, np.int8))
        t1 = time.perf_counter()
        blocked = self.kernel(data, weight, bias)
        t2 = time.perf_counter()
        result = self.realization.layout.unpack(blocked, out)
        self.transform_seconds = (t1 - t0) + (time.perf_counter() - t2)
        return result

    def pack_constants(self, weight: np.ndarray, bias: np.ndarray | None):
        lay = self.realization.layout
        return (lay.pack_weight(np.asarray(weight, np.int8)),
                lay.pack_bias(np.asarray(bias, np.int32)) if self.epilogue.bias else None)

    def stats(self):
        return self.kernel.stats()

    def time(self):
        return self.kernel.time()

    @property
    def source(self) -> str:
        return f"; {self.realization.describe()}\n{self.kernel.source}"


def _candidates(p: ConvProblem, cfg: VTAConfig, top_k: int, epilogue: Epilogue, tried: list):
    """(mapping, realization) of TVM's template and of each of the top-k embeddings the accelerator can run;
    the others go to `tried` with their reason."""
    from ..intrin import embed, vta_gemm

    for m in [reference_embedding(p, cfg)] + [Mapping.of(e) for e in embed(p.te(), vta_gemm(cfg), top_k=top_k)]:
        try:
            yield m, realize(p, m, cfg, epilogue)
        except (EmbeddingError, ShapeError) as exc:
            tried.append((m.label, None, None, str(exc)))


def choose_embedding(p: ConvProblem, cfg: VTAConfig, top_k: int = 5, epilogue: Epilogue = TVM_EPILOGUE):
    """The realization with the fewest simulated cycles (untuned tilings) among TVM's padding template and the
    top-k embeddings: (best realization, its tiling, [(label, tiling, cycles, why not)]). The search's choice
    among embeddings, by the simulator's cycles."""
    from ..lower.vta_conv import lower_conv2d
    from ..runtime.vta_kernel import VTAKernel
    from .vta_tune import seed_tilings

    tried, best = [], None
    for m, r in _candidates(p, cfg, top_k, epilogue, tried):
        try:
            tilings = seed_tilings(r.shape, cfg, epilogue)
        except TilewrightError as exc:  # no tiling fits (a pad over 15)
            tried.append((m.label, None, None, str(exc)))
            continue
        for tiling in tilings:
            kernel = VTAKernel(lower_conv2d(r.shape, cfg, tiling, epilogue))
            sh = kernel.shapes
            kernel(np.zeros(sh["data"], np.int8), np.zeros(sh["kernel"], np.int8),
                   np.zeros(sh["bias"], np.int32) if epilogue.bias else None)
            cycles = kernel.stats().cycles
            tried.append((m.label, tiling, cycles, ""))
            if best is None or cycles < best[2]:
                best = (r, tiling, cycles)
    if best is None:
        raise EmbeddingError(f"VTA {cfg.block}: no realization of {p} runs: " + "; ".join(w for *_, w in tried))
    return best[0], best[1], tried


def tune_embedding(p: ConvProblem, cfg: VTAConfig, trials: int = 40, top_k: int = 5,
                   epilogue: Epilogue = TVM_EPILOGUE, seed: int = 0, method: str = "q", records=None):
    """The search over embeddings and tilings together: the template and the top-k embeddings are the
    choices of one knob, each tuned (the FlexTensor search against the cycle model) with an equal share of
    `trials` (`method`: the search's; `records`: the store its measurements go to). Returns (realization,
    tiling, simulated seconds, [(label, tiling, seconds or None, why not)])."""
    from .vta_tune import tune_conv

    tried, best = [], None
    candidates = list(_candidates(p, cfg, top_k, epilogue, tried))
    share = max(1, trials // (len(candidates) + len(tried)))
    for m, r in candidates:
        tiling, history = tune_conv(r.shape, cfg, trials=share, seed=seed, epilogue=epilogue, method=method,
                                    records=records)
        seconds = min(c for t, c, _ in history if t == tiling)
        tried.append((m.label, tiling, seconds, ""))
        if best is None or seconds < best[2]:
            best = (r, tiling, seconds)
    if best is None:
        raise EmbeddingError(f"VTA {cfg.block}: no realization of {p} runs: " + "; ".join(w for *_, w in tried))
    return (*best, tried)


__all__ = ["ConvProblem", "EmbeddedConv", "Mapping", "Realization", "choose_embedding", "pad_and_block", "realize",
           "reference_embedding", "run_realization", "tune_embedding", "unblock"]
