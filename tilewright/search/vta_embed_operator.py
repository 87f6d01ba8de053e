"""`tw.tune` and `tw.build` of an NCHW int8 convolution on the VTA-like target:
the accelerator's layout comes from an embedding (search/vta_embed.py), any
channel count. Tuning searches TVM's padding template and the top-k
embeddings together, each tiling tuned against the cycle model
(`tune_embedding`); building without tuning picks the realization with the
fewest simulated cycles (`choose_embedding`), with the best recorded tiling
of the active store where there is one. The kernel takes the program's
arguments in order (NCHW data, OIHW weights, bias [O], NCHW output) and runs
the realization's host transforms (compiled) around the accelerator's convolution."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..lower.vta_operator import NchwConvOperator
from ..runtime.vta_kernel import by_role
from .vta_embed import ConvProblem, EmbeddedConv, Realization, choose_embedding, tune_embedding

TOP_K = 5


def problem_of(op: NchwConvOperator) -> ConvProblem:
    return ConvProblem(op.batch, op.in_channels, op.height, op.width, op.out_channels, *op.kernel, *op.padding,
                       *op.stride, *op.dilation)


class EmbeddedOperatorKernel(EmbeddedConv):
    """Called with every argument in the build's order (the output preallocated, as every tilewright
    kernel): the data packed into the realization's layout, the weights and bias too (constants
    that a deployment packs once: EmbeddedConv does), the simulated accelerator run, the output
    unpacked. `stats()` and `time()` are the accelerator's (simulated), `transform_seconds` the
    last call's host transforms of data and output (measured)."""

    def __init__(self, r: Realization, tiling, epilogue, roles: tuple[str, ...]):
        super().__init__(r, None, None, epilogue, tiling)
        self.tiling, self.roles = tiling, roles

    def __call__(self, *arrays):
        named = by_role(self.roles, arrays)
        weight, bias = self.pack_constants(named["kernel"], named.get("bias"))
        out = named["out"]
        direct = out.dtype == np.int8 and out.flags.c_contiguous
        result = self.run(named["data"], weight, bias, out if direct else None)
        if not direct:
            out[...] = result
        return out


@dataclass
class VTAEmbeddedTuneResult:
    realization: Realization
    tiling: object
    seconds: float  # simulated, the accelerator's convolution
    tried: list  # (label, tiling, simulated seconds or None, why not)
    args: list
    target: object
    epilogue: object
    roles: tuple

    def report(self) -> str:
        lines = [f"VTA tuning of {self.realization.problem} through embeddings (simulated time, "
                 f"{self.target.vta.describe()}): best {self.realization.describe()}, {self.tiling}: "
                 f"{self.seconds * 1e3:.3f} ms"]
        for label, tiling, seconds, why in self.tried:
            lines.append(f"  {label}: " + (f"{seconds * 1e3:.3f} ms ({tiling})" if seconds is not None and
                                            math.isfinite(seconds) else f"not run: {why}"))
        return "\n".join(lines)

    def build(self) -> EmbeddedOperatorKernel:
        return EmbeddedOperatorKernel(self.realization, self.tiling, self.epilogue, self.roles)


def tune_nchw(args, op: NchwConvOperator, target, trials: int, method: str, seed: int, store):
    r, tiling, seconds, tried = tune_embedding(problem_of(op), target.vta, trials=trials, top_k=TOP_K,
                                               epilogue=op.epilogue, seed=seed, method=method, records=store)
    return VTAEmbeddedTuneResult(r, tiling, seconds, tried, list(args), target, op.epilogue, op.roles)


def build_nchw(op: NchwConvOperator, target, store) -> EmbeddedOperatorKernel:
    from .vta_tune import best_tiling

    r, tiling, _ = choose_embedding(problem_of(op), target.vta, top_k=TOP_K, epilogue=op.epilogue)
    if store is not None:
        tiling = best_tiling(r.shape, target.vta, store, op.epilogue) or tiling
    return EmbeddedOperatorKernel(r, tiling, op.epilogue, op.roles)


__all__ = ["EmbeddedOperatorKernel", "VTAEmbeddedTuneResult", "build_nchw", "problem_of", "tune_nchw"]
