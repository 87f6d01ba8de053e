"""Winograd F(4x4, 3x3) for one NCHW 3x3 stride-1 pad-1 convolution, written in te and
hand-scheduled, timed beside the direct convolution's untuned default and PyTorch (both
layouts) in the same process. A feasibility experiment, not a library operator.

Why: ONNX Runtime runs ResNet-18 at about 88% of the fp32 FMA peak with direct NCHWc
convolutions, and our direct kernels reach 83-90% on its 3x3 layers, so beating it by the
1.2x that issue 15 asks needs fewer FLOPs: F(4x4, 3x3) does a 3x3 layer's multiply-adds as
36 batched GEMMs with 4x fewer operations, plus input and output transforms.

Stages: padding; the input transform V = B^T d B in two separable passes (T, then V), whose
coefficients are picked by `select` on unrolled loops (folded to constants by lowering); the
batched GEMM M[e] = V[e] U[e] over input channels (U = G g G^T, transformed once in NumPy as a
deployment would pack weights); the output transform Y = A^T M A in two passes, written straight
into the NCHW output (o vectorized, lanes stored a plane apart).

The kernel allocates 4.5 MB of temporaries and frees them on every call; with glibc's default
dynamic malloc thresholds the heap is trimmed and grown again each time (about 850 page faults
per call, 2-4x its time). `--keep-heap` sets the thresholds high first (mallopt), which measures
the computation alone; it applies to the whole process, PyTorch included.

Run: python benchmarks/winograd_prototype.py [--channels 64] [--out-channels 64] [--size 56] [--keep-heap]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tilewright as tw
from tilewright.stats import median

BT = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
      [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
AT = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]


def pick(var, exprs):
    """exprs[var] for a loop variable that lowering unrolls (the selects fold away)."""
    e = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        e = tw.select(var == k, exprs[k], e)
    return e


def combine(coefs, term):
    """sum_i coefs[i] * term(i) over the nonzero coefficients."""
    out = None
    for i, c in enumerate(coefs):
        if c:
            t = term(i) if c == 1 else term(i) * float(c)
            out = t if out is None else out + t
    return out


def winograd(c: int, o: int, h: int, rows: int = 7):
    tn = h // 4
    x = tw.placeholder((1, c, h, h), "float32", name="x")
    u = tw.placeholder((36, c, o), "float32", name="U")
    xp = tw.compute((c, h + 2, h + 2), lambda ci, i, j: tw.select(tw.all(i >= 1, i <= h, j >= 1, j <= h),
                    x[0, ci, i - 1, j - 1], tw.const(0.0, "float32")), name="xp")
    t = tw.compute((6, 6, c, tn, tn), lambda e1, j, ci, ty, tx: pick(
        e1, [combine(BT[k], lambda i: xp[ci, 4 * ty + i, 4 * tx + j]) for k in range(6)]), name="T")
    v = tw.compute((6, 6, c, tn, tn), lambda e1, e2, ci, ty, tx: pick(
        e2, [combine(BT[k], lambda j: t[e1, j, ci, ty, tx]) for k in range(6)]), name="V")
    rc = tw.reduce_axis(c, name="rc")
    m = tw.compute((36, tn, tn, o), lambda e, ty, tx, oc: tw.sum(v[e // 6, e % 6, rc, ty, tx] * u[e, rc, oc],
                                                                 axis=rc), name="M")
    s_ = tw.compute((6, 4, tn, tn, o), lambda e1, b, ty, tx, oc: pick(
        b, [combine(AT[k], lambda e2: m[e1 * 6 + e2, ty, tx, oc]) for k in range(4)]), name="S")
    y = tw.compute((o, tn, 4, tn, 4), lambda oc, ty, a, tx, b: pick(
        a, [combine(AT[k], lambda e1: s_[e1, b, ty, tx, oc]) for k in range(4)]), name="Y")

    s = tw.create_schedule(y)
    s[xp].parallel(xp.op.axis[0])
    ci, ty = v.op.axis[2], v.op.axis[3]
    s[v].reorder(ci, ty, v.op.axis[0], v.op.axis[1], v.op.axis[4])
    s[v].parallel(ci)
    s[v].unroll(v.op.axis[0])
    s[v].unroll(v.op.axis[1])
    s[v].vectorize(v.op.axis[4])
    _transform_pass(s, t, s[v], ty)
    ml = s.cache_write(m, "local")  # GEMM: `rows` tiles along tx, two vectors along o
    e, mty, mtx, mo = m.op.axis
    txo, txi = s[m].split(mtx, factor=rows)
    oo, oi = s[m].split(mo, factor=16)
    s[m].reorder(e, mty, txo, oo, txi, oi)
    s[m].parallel(s[m].fuse(e, mty))
    ov_o, ov = s[m].split(oi, factor=8)
    s[m].unroll(txi)
    s[m].unroll(ov_o)
    s[m].vectorize(ov)
    s[ml].compute_at(s[m], oo)
    lo_o, lo = s[ml].split(ml.op.axis[3], factor=8)
    s[ml].reorder(ml.op.reduce_axis[0], ml.op.axis[2], lo_o, lo)
    s[ml].unroll(ml.op.axis[2])
    s[ml].unroll(lo_o)
    s[ml].vectorize(lo)
    oc, yty, a, ytx, b = y.op.axis
    yoo, yoi = s[y].split(oc, factor=8)
    s[y].reorder(yty, ytx, yoo, a, b, yoi)
    s[y].parallel(yty)
    s[y].unroll(a)
    s[y].unroll(b)
    s[y].vectorize(yoi)
    _transform_pass(s, s_, s[y], ytx)
    return s, [x, u, y]


def _transform_pass(s, first, consumer, at) -> None:
    """A transform's first pass (5-D: two coefficient axes, then three data axes), computed per
    `at` iteration of its consumer: coefficient loops unrolled, the last data axis vectorized."""
    s[first].compute_at(consumer, at)
    a = first.op.axis
    s[first].reorder(a[2], a[3], a[0], a[1], a[4])
    s[first].unroll(a[0])
    s[first].unroll(a[1])
    s[first].vectorize(a[4])


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--out-channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=56, help="height = width, a multiple of 4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep-heap", action="store_true", help="glibc: never trim the heap nor mmap large blocks")
    a = ap.parse_args()
    if a.keep_heap:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 28)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    c, o, h = a.channels, a.out_channels, a.size
    if h % 4:
        raise SystemExit(f"--size {h}: the prototype needs a multiple of 4 (whole 4x4 output tiles)")
    torch.set_num_threads(a.threads)
    s, args = winograd(c, o, h)
    wino = tw.build(s, args, target="cpu")
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, c, h, h)).astype(np.float32)
    wa = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ua = np.ascontiguousarray(np.einsum("ai,ocij,bj->abco", G, wa.astype(np.float64), G).reshape(36, c, o),
                              dtype=np.float32)
    ya = np.zeros((o, h // 4, 4, h // 4, 4), np.float32)
    wino(xa, ua, ya)
    ref = torch.nn.functional.conv2d(torch.from_numpy(xa), torch.from_numpy(wa), padding=1).numpy()
    err = float(np.abs(ya.reshape(ref.shape) - ref).max() / np.abs(ref).max())
    if err > 1e-4:
        raise SystemExit(f"Winograd result differs from PyTorch: max error {err:.2e} of max |y|")
    xd = tw.placeholder((1, c, h, h), "float32", name="x")
    wd = tw.placeholder((o, c, 3, 3), "float32", name="w")
    direct = tw.build([xd, wd, tw.ops.conv2d(xd, wd, padding=1)], target="cpu")
    yd = np.zeros(ref.shape, np.float32)
    direct(xa, wa, yd)
    np.testing.assert_allclose(yd, ref, rtol=1e-3, atol=1e-4)

    def torch_time(fmt):
        xx = torch.from_numpy(xa).contiguous(memory_format=fmt)
        ww = torch.from_numpy(wa).contiguous(memory_format=fmt)
        for _ in range(3):
            torch.nn.functional.conv2d(xx, ww, padding=1)
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            torch.nn.functional.conv2d(xx, ww, padding=1)
            times.append(time.perf_counter() - t0)
        return median(times)

    res: dict[str, list[float]] = {"winograd F(4x4,3x3)": [], "direct, untuned default": [], "PyTorch NCHW": [],
                                   "PyTorch channels_last": []}
    for _ in range(a.rounds):
        res["winograd F(4x4,3x3)"].append(wino.time(xa, ua, ya).median)
        res["direct, untuned default"].append(direct.time(xa, wa, yd).median)
        res["PyTorch NCHW"].append(torch_time(torch.contiguous_format))
        res["PyTorch channels_last"].append(torch_time(torch.channels_last))
    flops = 2 * c * o * 9 * h * h
    print(f"conv {c}->{o}, {h}x{h}, 3x3: Winograd max error {err:.1e} of max |y|; medians of {a.rounds} rounds, "
          f"{a.threads} threads{', heap kept' if a.keep_heap else ''}")
    for k, v in res.items():
        print(f"  {k:24s} {median(v) * 1e3:7.3f} ms  {flops / median(v) / 1e9:5.0f} GFLOP/s (direct conv's FLOPs)")


if __name__ == "__main__":
    main()
