"""Template candidates measured in the isolated runner process every searched kernel goes through
(runtime/runner.py via LocalRunner): the library is loaded, checked against the reference and timed
there, so a candidate that crashes or hangs costs one measurement, not the profiling process. One runner
per layout of the packed constants (they depend on the register tile's width)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from ..runtime.local_runner import LocalRunner
from ..runtime.result import MeasureResult

RUNNER_MODULE = "tilewright.runtime.runner"


class TemplateRunner(LocalRunner):
    """A LocalRunner on fixed arrays: `inputs` (activations and packed constants, in the kernel's
    argument order), one output of `ref`'s shape checked against `ref` within `tolerance`."""

    def __init__(self, inputs: list[np.ndarray], ref: np.ndarray, threads: int, tolerance: float,
                 timeout: float = 60.0, repeat: int = 3, min_repeat_ms: float = 20.0):
        self._dir = tempfile.TemporaryDirectory(prefix="tilewright-template-")
        for n, a in enumerate(inputs):
            np.save(os.path.join(self._dir.name, f"arg{n}.npy"), np.ascontiguousarray(a))
        np.save(os.path.join(self._dir.name, f"arg{len(inputs)}.npy"), np.zeros(ref.shape, np.float32))
        np.save(os.path.join(self._dir.name, "ref0.npy"), ref.astype(np.float32))
        config = {"data_dir": self._dir.name, "n_inputs": len(inputs), "threads": threads, "tolerances": [tolerance],
                  "dtypes": ["float32"], "loader": None, "flush_bytes": 0}
        super().__init__(RUNNER_MODULE, config, timeout, repeat, min_repeat_ms)

    def measure_library(self, library: str) -> MeasureResult:
        return self.run(library)

    def close(self) -> None:
        super().close()
        self._dir.cleanup()
