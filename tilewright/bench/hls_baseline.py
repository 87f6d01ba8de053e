"""The FPGA'15 design family (Zhang et al., "Optimizing FPGA-based Accelerator Design for Deep
Convolutional Neural Networks"), FlexTensor's FPGA baseline, expressed in the same design space and
costed by the same model as our searched designs: loop tiling <Tm, Tn, Tr, Tc> with the kernel
window whole in every tile, the PE array unrolling Tm output by Tn input channels, double-buffered
(our dataflow stages), one (Tm, Tn) for every layer of the network (the paper's cross-layer design:
the hardware is fixed) and Tr, Tc chosen per layer. Tiles need not divide the layer: the fixed
hardware then computes zero-padded channels and rows (the paper's ceil terms), which here is the
same model evaluated on the padded layer while the work counted is the real layer's.

`fpga15_point()` reproduces the paper's own design point: AlexNet's five conv layers (the original
two-group layers 2, 4 and 5 as two convolutions each) at <Tm, Tn> = <64, 7> on a VC707 at 100 MHz,
reported at 61.62 GFLOPS."""

from __future__ import annotations

import functools

from .. import ops, te
from ..errors import ScheduleError
from ..lower.hls_form import hls_form
from ..runtime.hls_model import estimate
from ..space.hls import beats_for, design_of

# (out and in channels per group, output size, kernel, stride, padding, groups): AlexNet as in
# Krizhevsky et al. 2012 (227 x 227 input), the network FPGA'15 implements
ALEXNET = ((96, 3, 55, 11, 4, 0, 1), (128, 48, 27, 5, 1, 2, 2), (384, 256, 13, 3, 1, 1, 1),
           (192, 192, 13, 3, 1, 1, 2), (128, 192, 13, 3, 1, 1, 2))
FPGA15_TM_TN = (64, 7)
FPGA15_GFLOPS = 61.62
TR_TC = (4, 7, 8, 13, 14, 16, 27, 28, 32, 55, 56)


@functools.lru_cache(maxsize=4096)
def conv_form(m: int, n: int, out: int, k: int, stride: int, pad: int, dtype: str = "float32"):
    """The HLS form of a batch-1 square convolution producing `out` x `out` from `n` channels."""
    size = (out - 1) * stride + k - 2 * pad
    x = te.placeholder((1, n, size, size), dtype, name="x")
    w = te.placeholder((m, n, k, k), dtype, name="w")
    y = ops.conv2d(x, w, stride=stride, padding=pad, out_dtype=None if dtype == "float32" else "int32")
    return hls_form(y)


def _up(x: int, t: int) -> int:
    return -(-x // t) * t


def layer_design(layer, tm: int, tn: int, device, dtype: str = "float32"):
    """(estimate, design, Tr, padded form) of the best Tr = Tc for one layer on the fixed <Tm, Tn>
    hardware, or None."""
    m, n, out, k, stride, pad = layer[:6]
    best = None
    for tr in (t for t in TR_TC if t <= out):
        form = conv_form(_up(m, tm), _up(n, tn), _up(out, tr), k, stride, pad, dtype)
        tile = {"n": 1, "o": tm, "h": tr, "w": tr, "rc": tn, "rh": k, "rw": k}
        unroll = {"n": 1, "o": tm, "h": 1, "w": 1, "rc": tn, "rh": 1, "rw": 1}
        d = design_of(form, tile, unroll, beat=beats_for(form, device)[-1], double_buffer=True)
        try:
            e = estimate(form, d, device)
        except ScheduleError:
            continue
        if best is None or e.cycles < best[0].cycles:
            best = (e, d, tr, form)
    return best


def network_time(layers, tm: int, tn: int, device, dtype: str = "float32"):
    """(seconds, per-layer [(estimate, design, Tr, padded form, groups)]) of the network on <Tm, Tn>, or None."""
    total, rows = 0.0, []
    for layer in layers:
        got = layer_design(layer, tm, tn, device, dtype)
        if got is None:
            return None
        groups = layer[6] if len(layer) > 6 else 1
        total += got[0].seconds * groups
        rows.append((*got, groups))
    return total, rows


def _compute_bound(layers, tm: int, tn: int, device) -> float:
    """Seconds the <Tm, Tn> array needs for `layers` at one multiply-accumulate per PE and cycle: no
    design of that array is faster (the model's time includes every padded trip of the loop nest)."""
    cycles = sum(-(-m // tm) * -(-n // tn) * out * out * k * k * (layer[6] if len(layer) > 6 else 1)
                 for layer in layers for m, n, out, k in [layer[:4]])
    return cycles / (device.clock_mhz * 1e6)


def _arrays(layers, device, dtype: str, min_dsp_share: float):
    """<Tm, Tn> pairs within the DSP share, the most promising first (by their compute bound)."""
    budget = device.dsp / device.dsp_per_mac(dtype)
    pairs = [(tm, tn) for tm in range(4, 513, 4) for tn in range(1, 65) if min_dsp_share * budget <= tm * tn <= budget]
    return sorted(((_compute_bound(layers, tm, tn, device), tm, tn) for tm, tn in pairs))


def choose_tm_tn(layers, device, dtype: str = "float32", min_dsp_share: float = 0.7):
    """FPGA'15's design-space exploration: the one <Tm, Tn> whose network time is least, among the
    arrays that use at least `min_dsp_share` of the DSPs (smaller ones are never faster). Arrays whose
    compute bound alone exceeds the best time found are skipped: they cannot win."""
    best = None
    for bound, tm, tn in _arrays(layers, device, dtype, min_dsp_share):
        if best is not None and bound >= best[0]:
            break
        got = network_time(layers, tm, tn, device, dtype)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], tm, tn, got[1])
    return best


def best_per_layer(layer, device, dtype: str = "float32", min_dsp_share: float = 0.85):
    """(estimate, design, Tr, padded form, Tm, Tn) of FPGA'15's tiling with its own <Tm, Tn> for this
    layer alone: the strongest form of the baseline (the paper fixes one array for the network)."""
    best = None
    for bound, tm, tn in _arrays([layer], device, dtype, min_dsp_share):
        if best is not None and bound >= best[0].seconds:
            break
        got = layer_design(layer, tm, tn, device, dtype)
        if got is not None and (best is None or got[0].cycles < best[0].cycles):
            best = (*got, tm, tn)
    return best


def fpga15_point(device) -> dict:
    """The paper's own point: AlexNet at <64, 7> on `device` (the VC707 preset)."""
    got = network_time(ALEXNET, *FPGA15_TM_TN, device)
    if got is None:
        raise ScheduleError(f"<64, 7> does not fit {device.name}")
    seconds, rows = got
    flops = sum(layer_flops(layer) for layer in ALEXNET)
    return {"gflops": flops / seconds / 1e9, "ms": seconds * 1e3, "paper_gflops": FPGA15_GFLOPS,
            "layers": [{"ms": round(e.seconds * g * 1e3, 3), "tr": tr, "bound": e.bound, "dsp": e.dsp,
                        "bram36": e.bram36} for e, _, tr, _, g in rows]}


def layer_flops(layer) -> int:
    m, n, out, k = layer[:4]
    return 2 * m * n * out * out * k * k * (layer[6] if len(layer) > 6 else 1)


__all__ = ["ALEXNET", "FPGA15_GFLOPS", "FPGA15_TM_TN", "best_per_layer", "choose_tm_tn", "conv_form", "fpga15_point",
           "layer_design", "layer_flops", "network_time"]
