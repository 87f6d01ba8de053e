"""Measuring candidate schedules safely: a `Measurer` is one program's random inputs and NumPy reference
(written once to a data directory), a `LocalBuilder` (runtime/builder.py: lower, render, compile in
parallel) and a `LocalRunner` (runtime/local_runner.py: load, check and time one at a time in an isolated
process with a timeout). A candidate that fails to lower or compile, crashes the runner, hangs, or
computes a wrong result comes back as a MeasureResult with its `error_kind` and message; the runner is
restarted and measurement goes on. Every result is checked against the NumPy reference before its time
counts."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from ..errors import TilewrightError
from ..reference import evaluate
from ..targets import Target
from .builder import BuildResult, LocalBuilder
from .inputs import check_fits_in_memory, positive_inputs, random_input
from .kernel import storage_dtype
from .local_runner import SLOW_FACTOR, TIMEOUT_FACTOR, TIMEOUT_FLOOR_S, LocalRunner
from .result import ErrorKind, MeasureResult
from .runner import unusable_reference

TOLERANCE = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-9}


class Measurer:
    """Measure schedules of one program on `target` with shared random inputs."""

    def __init__(self, outputs: list, args: list, target: Target, backend, timeout: float = 10.0, repeat: int = 3,
                 min_repeat_ms: float = 20.0, build_workers: int | None = None, seed: int = 0,
                 threads: int | None = None, flush_cache: bool = False, constants=()):
        """`flush_cache`: time single calls, each after evicting the caches (CPU kernels; a kernel inside
        a model meets colder caches than one called back to back). `constants`: the input tensors
        that are constant across calls (a model's weights): where the backend can, their packs are
        made once, outside the timed kernel, as a compiled model runs it."""
        self.outputs, self.args, self.target = outputs, args, target
        constant_names = frozenset(t.name for t in args if any(t is c for c in constants))
        flush_bytes = max(2 * (target.cache_bytes(3) or 0), 1 << 26) if flush_cache else 0
        self.builder = LocalBuilder(backend, target, args, constant_names, max(60.0, timeout * 6), build_workers)
        check_fits_in_memory(outputs, args)  # before allocating anything
        self._dir = tempfile.TemporaryDirectory(prefix="tilewright-measure-")
        out_ids = {id(t) for t in outputs}
        inputs = [t for t in args if id(t) not in out_ids]
        outs = [t for t in args if id(t) in out_ids]
        self.n_inputs = len(inputs)
        rng = np.random.default_rng(seed)
        values, positive = {}, positive_inputs(outs)
        for n, t in enumerate(inputs):
            values[t] = random_input(rng, t, id(t) in positive)  # from the operator's domain
            np.save(os.path.join(self._dir.name, f"arg{n}.npy"), _to_storage(values[t], t))
        refs = evaluate(outs, values)
        self.tolerances: list = []
        for n, (t, ref) in enumerate(zip(outs, refs)):
            bad = unusable_reference(ref)
            if bad:
                self._dir.cleanup()
                raise TilewrightError(
                    f"output '{t.name}' of the reference on random inputs is unusable as a check: {bad}; give the "
                    "operator inputs from its domain (e.g. positive values for log/sqrt) or guard the expression")
            np.save(os.path.join(self._dir.name, f"arg{self.n_inputs + n}.npy"), np.zeros(t.shape, _storage(t)))
            np.save(os.path.join(self._dir.name, f"ref{n}.npy"), _to_storage(ref, t))
            self.tolerances.append(TOLERANCE.get(t.dtype.name))
        config = {"data_dir": self._dir.name, "n_inputs": self.n_inputs, "threads": threads or target.cores,
                  "tolerances": self.tolerances, "dtypes": [t.dtype.name for t in outs],
                  "loader": backend.loader, "flush_bytes": flush_bytes}
        self.runner = LocalRunner(backend.runner, config, timeout, repeat, min_repeat_ms)

    # the builder's backend and the runner's timeout state, which the tuner and tests read and set here
    backend = property(lambda self: self.builder.backend, lambda self, v: setattr(self.builder, "backend", v))
    best = property(lambda self: self.runner.best, lambda self, v: setattr(self.runner, "best", v))
    baseline = property(lambda self: self.runner.baseline, lambda self, v: setattr(self.runner, "baseline", v))

    def run(self, library: str) -> MeasureResult:
        return self.runner.run(library)

    def time_limit(self) -> float:
        return self.runner.time_limit()

    def measure(self, schedules: list, on_result=None, libraries: list | None = None,
                rounds: int = 1) -> list[MeasureResult]:
        """Results in order (with `rounds` > 1, every schedule is run that many times, round after round,
        and the results come back round by round). `on_result(index, result)` is called as each one
        completes, so a caller can commit it before the next runs (a kill loses nothing measured).
        `libraries`: per schedule, an artefact built before (run as is) or None (built here)."""
        libraries = libraries or [None] * len(schedules)
        missing = [i for i, lib in enumerate(libraries) if not (lib and os.path.exists(lib))]
        built = dict(zip(missing, self.builder.build([schedules[i] for i in missing])))
        out = []
        for _ in range(rounds):
            for i in range(len(schedules)):
                b = built.get(i) or BuildResult(library=libraries[i])
                if b.error is not None:
                    out.append(b.error)
                else:
                    r = self.runner.run_retrying(b.library)
                    out.append(MeasureResult(r.costs, r.error_kind, r.error_msg, b.build_s, r.run_s, b.library))
                if on_result is not None:
                    on_result(i, out[-1])
        return out

    def suspend(self) -> None:
        """End the runner process while the measurer stays (inputs, reference, timeouts)."""
        self.runner.suspend()

    def close(self) -> None:
        self.runner.close()
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _storage(t) -> np.dtype:
    from ..ir.stmt import Buffer

    return storage_dtype(Buffer(t.name, t.shape, t.dtype))


def _to_storage(value: np.ndarray, t) -> np.ndarray:
    if t.dtype.name == "bfloat16":
        from ..reference.values import round_to_bfloat16

        return (round_to_bfloat16(value).view(np.uint32) >> 16).astype(np.uint16)
    return np.ascontiguousarray(value.astype(_storage(t)))


__all__ = ["SLOW_FACTOR", "TIMEOUT_FACTOR", "TIMEOUT_FLOOR_S", "ErrorKind", "MeasureResult", "Measurer"]
