"""Lesson 5: schedule an int8 convolution for a VTA-like accelerator by hand, as in TVM's VTA
tutorial, and run it in the simulator (every time printed is simulated, not measured).

The computation is TVM's VTA benchmark operator in the GEMM core's blocked layout:
out = clip((conv(pad(data), weight) >> 8) + bias, 0, 127) as int8. The schedule:
- the output is tiled (`tile_o` output channel blocks x `tile_h` rows x the whole width);
- the padded input tile goes to the input scratchpad (`set_scope("vta.inp")`), the weights
  to the weight scratchpad (`cache_read(weight, "vta.wgt")`), per step of the input channels
  (`compute_at` the reduction's outer loop); the padding becomes the DMA's zero padding;
- the convolution accumulates in the accumulator scratchpad (`set_scope("vta.acc")`), its
  block multiply tensorized with the accelerator's GEMM intrinsic (`tw.intrin.vta_gemm`);
- the bias goes to the accumulator scratchpad (`cache_read(bias, "vta.acc")`); the shift,
  bias add and clip run on the ALU, in place, and the stores keep each lane's low 8 bits;
- virtual threads (`vthread`) split the output channel tiles: each thread has its own tiles,
  and the compiler interleaves their instructions with dependence tokens between the load,
  compute and store units, so one thread's loads overlap another's GEMM (TVM section 3.5).

Run: python examples/05_conv_on_vta.py [--vthreads 2] [--block 1x16x16]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw
from tilewright.ops import pad
from tilewright.ops.blocked_conv import conv2d_blocked, shift_bias_clip


def conv_schedule(cfg, h=14, c=4, o=8, k=3, stride=1, vthreads=1, tile_o=2, tile_h=7, bias=True,
                  scope_out="vta.acc", tensorize=True):
    """(schedule, [data, weight, bias, out]): `c` / `o` input / output channel blocks of the core."""
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    data = tw.placeholder((1, c, h, h, b, bi), "int8", "data")
    weight = tw.placeholder((o, c, k, k, bo, bi), "int8", "weight")
    bias_t = tw.placeholder((1, o, 1, 1, b, bo), "int32", "bias") if bias else None
    p = k // 2
    dpad = pad(data, (0, 0, 0, 0, p, p, p, p), name="data_pad") if p else data
    conv = conv2d_blocked(dpad, weight, stride, 0)
    res = shift_bias_clip(conv, bias_t)
    s = tw.create_schedule(res)
    if p:
        s[dpad].set_scope("vta.inp")
    else:
        dpad = s.cache_read(data, "vta.inp", [conv])
    wbuf = s.cache_read(weight, "vta.wgt", [conv])
    bbuf = s.cache_read(bias_t, "vta.acc", [res]) if bias else None
    s[conv].set_scope(scope_out)
    n, oc, y, x, bb, kk = res.op.axis
    oo, oi = s[res].split(oc, tile_o)
    yo, yi = s[res].split(y, tile_h)
    if vthreads > 1:
        oo, v = s[res].split(oo, vthreads)  # the inner part: one output channel tile per thread
        s[res].reorder(v, n, oo, yo, oi, yi, x, bb, kk)
        s[res].bind(v, tw.thread_axis("vthread"))
    else:
        s[res].reorder(n, oo, yo, oi, yi, x, bb, kk)
    s[conv].compute_at(s[res], yo)
    if bbuf is not None:
        s[bbuf].compute_at(s[res], yo)
    cn, co, cy, cx, cb, ck = conv.op.axis
    rc, rh, rw, ri = conv.op.reduce_axis
    s[conv].reorder(cn, rc, co, cy, rh, rw, cx, cb, ck, ri)
    s[dpad].compute_at(s[conv], rc)
    s[wbuf].compute_at(s[conv], rc)
    if tensorize:
        s[conv].tensorize(cb, tw.intrin.vta_gemm(cfg))
    return s, [data, weight] + ([bias_t] if bias else []) + [res]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vthreads", type=int, default=2)
    ap.add_argument("--block", default="1x16x16")
    args = ap.parse_args()
    target = tw.Target(f"vta -block={args.block}")
    cfg = target.vta
    # ResNet-18's 14 x 14, 256 -> 256 channel 3 x 3 layer (the one TVM's tutorial schedules)
    s, tensors = conv_schedule(cfg, h=14, c=256 // cfg.block_in, o=256 // cfg.block_out,
                               tile_o=max(1, 128 // cfg.block_out // cfg.batch), vthreads=args.vthreads)
    kernel = tw.build(s, tensors, target=target)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(-128, 128, t.shape, dtype=np.int8) if t.dtype.name == "int8"
              else rng.integers(-64, 64, t.shape, dtype=np.int32) for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, np.int8)
    kernel(*arrays, out)
    want = tw.evaluate([tensors[-1]], dict(zip(tensors[:-1], arrays)))[0]
    print("\n".join(kernel.source.splitlines()[:14]), "\n  ...")
    print(kernel.stats().report())
    print(f"bit-exact against the reference evaluator: {np.array_equal(out, want)}; {kernel.time()}")


if __name__ == "__main__":
    main()
