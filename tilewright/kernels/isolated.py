"""Template candidates measured in the isolated runner process every searched kernel goes through
(runtime/runner.py): the library is loaded, checked against the reference and timed there, so a
candidate that crashes or hangs costs one measurement, not the profiling process. One runner per
layout of the packed constants (they depend on the register tile's width)."""

from __future__ import annotations

import os
import tempfile
import types

import numpy as np

from ..runtime.measure import Measurer, MeasureResult

RUNNER = types.SimpleNamespace(runner="tilewright.runtime.runner", loader=None)


class TemplateRunner(Measurer):
    """Measurer's runner protocol on fixed arrays: `inputs` (activations and packed constants, in the
    kernel's argument order), one output of `ref`'s shape checked against `ref` within `tolerance`."""

    def __init__(self, inputs: list[np.ndarray], ref: np.ndarray, threads: int, tolerance: float,
                 timeout: float = 60.0, repeat: int = 3, min_repeat_ms: float = 20.0):
        self.backend, self.target = RUNNER, None
        self.timeout, self.repeat, self.min_repeat_ms = timeout, repeat, min_repeat_ms
        self.threads, self.flush_bytes = threads, 0
        self._dir = tempfile.TemporaryDirectory(prefix="tilewright-template-")
        for n, a in enumerate(inputs):
            np.save(os.path.join(self._dir.name, f"arg{n}.npy"), np.ascontiguousarray(a))
        self.n_inputs = len(inputs)
        np.save(os.path.join(self._dir.name, f"arg{self.n_inputs}.npy"), np.zeros(ref.shape, np.float32))
        np.save(os.path.join(self._dir.name, "ref0.npy"), ref.astype(np.float32))
        self.tolerances, self.dtypes = [tolerance], ["float32"]
        self._proc, self._fresh = None, False
        self.best = self.baseline = float("inf")

    def measure_library(self, library: str) -> MeasureResult:
        r = self.run(library)
        if r.ok:
            self.best = min(self.best, r.cost)
        return r
