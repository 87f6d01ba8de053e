"""Epilogues: what a template applies to each register tile before it leaves for memory
(Bolt's epilogue fusion): a bias per output column, a residual tensor of the output's
shape, and element-wise activations, in the order given. The same steps evaluate in NumPy
for the check of every kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ScheduleError

ACTIVATIONS = {
    "relu": "tw_relu(v)",
    "gelu": "0.5f * v * (1.0f + TW_ERF(v * 0.70710678118654752f))",
    "gelu_tanh": "0.5f * v * (1.0f + TW_TANH(0.79788456080286536f * (v + 0.044715f * v * v * v)))",
    "hardswish": "v * tw_clamp(v + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f)",
    "softplus": "tw_where_gt(v, 20.0f, v, TW_LOG(1.0f + TW_EXP(v)))",
    "sigmoid": "1.0f / (1.0f + TW_EXP(-v))",
    "silu": "v / (1.0f + TW_EXP(-v))",
}
STEPS = ("bias", "residual", *ACTIVATIONS)
# the same activations on one float `v`, for the GPU dialects (TW_ERF etc. name the dialect's functions)
SCALAR_ACTIVATIONS = {
    "relu": "v > 0.0f ? v : 0.0f",
    "gelu": "0.5f * v * (1.0f + TW_ERF(v * 0.70710678118654752f))",
    "gelu_tanh": "0.5f * v * (1.0f + TW_TANH(0.79788456080286536f * (v + 0.044715f * v * v * v)))",
    "hardswish": "v * TW_FMIN(TW_FMAX(v + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f)",
    "softplus": "v > 20.0f ? v : TW_LOG(1.0f + TW_EXP(v))",
    "sigmoid": "1.0f / (1.0f + TW_EXP(-v))",
    "silu": "v / (1.0f + TW_EXP(-v))",
}


@dataclass(frozen=True)
class Epilogue:
    """Steps applied in order to each output element v at (row, col)."""
    steps: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        for s in self.steps:
            if s not in STEPS:
                raise ScheduleError(f"epilogue step {s!r} is not one a template fuses; valid: {', '.join(STEPS)}")
        for s in ("bias", "residual"):
            if self.steps.count(s) > 1:
                raise ScheduleError(f"epilogue: '{s}' appears {self.steps.count(s)} times; give it at most once")

    @staticmethod
    def of(*steps: str) -> Epilogue:
        return Epilogue(tuple(steps))

    @property
    def bias(self) -> bool:
        return "bias" in self.steps

    @property
    def residual(self) -> bool:
        return "residual" in self.steps

    @property
    def name(self) -> str:
        return "+".join(self.steps) or "none"

    def c_body(self) -> str:
        """C statements on the vector `v` of columns `col` (vector `tw_vf`), `bv` the bias vector and `rv`
        the residual vector loaded by the caller."""
        lines = []
        for s in self.steps:
            if s == "bias":
                lines.append("v = v + bv;")
            elif s == "residual":
                lines.append("v = v + rv;")
            else:
                lines.append(f"v = {ACTIVATIONS[s]};")
        return "\n".join(lines)

    def c_scalar_body(self) -> str:
        """C statements on the float `v`, with `bv` the column's bias and `rv` the residual element."""
        table = {"bias": "v = v + bv;", "residual": "v = v + rv;"}
        return " ".join(table.get(s) or f"v = {SCALAR_ACTIVATIONS[s]};" for s in self.steps)

    def apply(self, acc: np.ndarray, bias: np.ndarray | None = None, residual: np.ndarray | None = None) -> np.ndarray:
        """NumPy (float64) reference of the steps on `acc` (rows x columns, or any shape ending in columns)."""
        v = acc.astype(np.float64)
        for s in self.steps:
            if s == "bias":
                v = v + bias.astype(np.float64)
            elif s == "residual":
                v = v + residual.astype(np.float64).reshape(v.shape)
            elif s == "relu":
                v = np.maximum(v, 0.0)
            elif s == "gelu":
                v = 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))
            elif s == "gelu_tanh":
                v = 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
            elif s == "hardswish":
                v = v * np.clip(v + 3.0, 0.0, 6.0) / 6.0
            elif s == "softplus":
                v = np.where(v > 20.0, v, np.log1p(np.exp(np.minimum(v, 20.0))))
            elif s == "sigmoid":
                v = 1.0 / (1.0 + np.exp(-v))
            elif s == "silu":
                v = v / (1.0 + np.exp(-v))
        return v


def _erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


NO_EPILOGUE = Epilogue()
