"""The VTA-like accelerator's GEMM instruction as a te intrinsic: one micro-op
computes acc[b, o] += sum_i inp[b, i] * wgt[o, i] on a (batch x block_in x
block_out) block, int8 x int8 -> int32. `s[C].tensorize(axis, vta_gemm(cfg))`
marks the block; the accelerator's instruction selection (lower/vta_select.py)
turns each marked call, with the loops around it, into GEMM micro-op loops.
It has no C spelling: only target "vta" lowers it."""

from __future__ import annotations

import functools

from ..targets.vta import VTAConfig
from ..te import compute, placeholder, reduce_axis
from ..te import sum as te_sum
from .declare import Emitter, TensorIntrin, decl_tensor_intrin


def _no_c(_operands) -> str:
    raise NotImplementedError("the VTA GEMM intrinsic is lowered to accelerator instructions, never to C")


@functools.cache
def vta_gemm(cfg: VTAConfig = VTAConfig()) -> TensorIntrin:  # noqa: B008 - frozen, hashable configuration
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    inp = placeholder((b, bi), "int8", name="inp")
    wgt = placeholder((bo, bi), "int8", name="wgt")
    i = reduce_axis(bi, name="i")
    out = compute((b, bo), lambda n, o: te_sum(inp[n, i].astype("int32") * wgt[o, i].astype("int32"), axis=i),
                  name="acc")
    return decl_tensor_intrin(out, [Emitter("vta", (), _no_c, note="one GEMM micro-op of the accelerator")],
                              f"vta.gemm_{cfg.block}", inputs=[inp, wgt])


__all__ = ["vta_gemm"]
