"""One baseline variant of the whole-model benchmark: its label and family
(eager, torch.compile or onnxruntime), the call that is timed, its output on
the held-out input, its setup time, and how to rebuild it in a fresh process
for the memory step. A variant that cannot run carries the reason instead."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

FAMILIES = ("eager", "torch.compile", "onnxruntime")


@dataclass
class Baseline:
    name: str  # the label in the tables, e.g. "torch.compile frozen channels_last"
    family: str  # one of FAMILIES
    run: Callable[[], object] | None  # one inference on the timing input; None: not timed (see note)
    check: np.ndarray | None = None  # its output on the held-out input, compared with eager's
    setup_s: float = 0.0  # compile / export / session time, first call included
    note: str = ""
    extra: dict = field(default_factory=dict)  # e.g. the op types a graph optimizer fused
    rebuild: dict | None = None  # what bench/footprint.py needs to build this side again

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"baseline {self.name!r}: family {self.family!r} is not one of {', '.join(FAMILIES)}")


def skipped(name: str, family: str, why: str) -> Baseline:
    """A variant that was asked for but cannot run here, with the reason the report prints."""
    return Baseline(name, family, None, note=why)


def as_numpy(out) -> np.ndarray:
    out = out[0] if isinstance(out, (tuple, list)) else out
    return out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)


def clone(model):
    """A deep copy, so layout changes and compilers never touch the model the others use."""
    return copy.deepcopy(model)


def failure(exc: BaseException) -> str:
    return f"failed: {type(exc).__name__}: {str(exc)[:300]}"
