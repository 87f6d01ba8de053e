"""Measuring candidate schedules safely.

Candidates are lowered and rendered here, compiled in parallel (the C
compiler runs as a subprocess per candidate), then run one at a time in an
isolated runner process with a timeout. A candidate that fails to lower or
compile, crashes the runner, hangs, or computes a wrong result comes back as
a MeasureResult with its `error_kind` and message; the runner is restarted
and measurement goes on. Every result is checked against the NumPy
reference before its time counts."""

from __future__ import annotations

import enum
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..config import build_cpus, pin_this_thread, runner_stderr_path, usable_cores
from ..errors import BuildError, TilewrightError
from ..reference import evaluate
from ..stats import median
from ..targets import Target
from .inputs import check_fits_in_memory, positive_inputs, random_input
from .kernel import storage_dtype
from .runner import unusable_reference


class ErrorKind(enum.Enum):
    NONE = "none"
    INSTANTIATE = "instantiate"  # the point's schedule or its lowering was rejected
    COMPILE = "compile"
    RUNTIME = "runtime"  # crashed or returned an error code
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"


@dataclass(frozen=True)
class MeasureResult:
    costs: tuple[float, ...] = ()  # seconds per call, one per repeat
    error_kind: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.NONE

    @property
    def cost(self) -> float:
        """Median seconds per call; inf for a failed measurement."""
        return median(self.costs) if self.ok else math.inf


@dataclass
class _Built:
    library: str | None = None
    error: MeasureResult | None = None
    build_s: float = 0.0
    source: str = field(default="", repr=False)


TOLERANCE = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-9}


# Timeouts scale with the default point's time (a candidate 50x slower is not worth waiting for), with
# a floor: under load, a fixed 1 s deadline once stored candidates of 13 and 59 us as timeouts.
TIMEOUT_FACTOR, TIMEOUT_FLOOR_S = 50.0, 5.0

# A candidate whose first timed call is this many times slower than the best so far is not repeated:
# its single time already ranks it, and repeating a 1 s kernel costs the search seconds per trial.
SLOW_FACTOR = 4.0


class Measurer:
    """Measure schedules of one program on `target` with shared random inputs."""

    def __init__(self, outputs: list, args: list, target: Target, backend, timeout: float = 10.0, repeat: int = 3,
                 min_repeat_ms: float = 20.0, build_workers: int | None = None, seed: int = 0,
                 threads: int | None = None, flush_cache: bool = False, constants=()):
        """`flush_cache`: time single calls, each after evicting the caches (CPU kernels; a kernel inside
        a model meets colder caches than one called back to back). `constants`: the input tensors
        that are constant across calls (a model's weights): where the backend can, their packs are
        made once, outside the timed kernel, as a compiled model runs it."""
        self.outputs, self.args, self.target, self.backend = outputs, args, target, backend
        self.constants = {t.name for t in args if any(t is c for c in constants)}
        self.flush_bytes = max(2 * (target.cache_bytes(3) or 0), 1 << 26) if flush_cache else 0
        self.timeout, self.repeat, self.min_repeat_ms = timeout, repeat, min_repeat_ms
        self.threads = threads or target.cores
        self.build_cpus = build_cpus()  # TILEWRIGHT_BUILD_CPUS, checked here: a bad list fails before any work
        self.build_workers = build_workers or len(self.build_cpus or ()) or usable_cores()
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
        self.dtypes = [t.dtype.name for t in outs]
        self._proc: subprocess.Popen | None = None
        self._fresh = False
        self.best = float("inf")  # fastest correct cost so far: much slower candidates are timed once
        self.baseline = float("inf")  # the default point's time, which the tuner sets: timeouts scale with it

    # ---- building ---------------------------------------------------------
    def _build(self, schedule) -> _Built:
        start = time.perf_counter()
        if isinstance(schedule, BaseException):
            return _Built(error=MeasureResult(error_kind=ErrorKind.INSTANTIATE, error_msg=_message(schedule)))
        b = self.backend
        try:
            func = b.lower(schedule, self.args, "kernel", self.target)
            source = None
            if self.constants and b.render_packed is not None:
                source = b.render_packed(func, self.target, self.constants)
            source = source or b.render(func, self.target)
        except TilewrightError as exc:
            return _Built(error=MeasureResult(error_kind=ErrorKind.INSTANTIATE, error_msg=_message(exc)))
        try:
            artefact = b.compile(source, self.target, max(60.0, self.timeout * 6))
        except BuildError as exc:
            return _Built(error=MeasureResult(error_kind=ErrorKind.COMPILE, error_msg=_message(exc),
                                              build_s=time.perf_counter() - start))
        return _Built(library=str(artefact.path), build_s=time.perf_counter() - start, source=str(source))

    def build_all(self, schedules: list) -> list[_Built]:
        # Lowering is Python (serial); the compiler runs in parallel subprocesses, on TILEWRIGHT_BUILD_CPUS
        # where set (the runner, started from the main thread, keeps the process's cores).
        with ThreadPoolExecutor(self.build_workers, initializer=pin_this_thread, initargs=(self.build_cpus,)) as pool:
            return list(pool.map(self._build, schedules))

    # ---- running ----------------------------------------------------------
    def _start(self) -> None:
        # A fresh interpreter (not multiprocessing): no re-import of the user's __main__. Its stderr goes to
        # a file (TILEWRIGHT_RUNNER_STDERR, else one in the data directory) whose tail a crash report quotes.
        self._stderr_path = runner_stderr_path() or os.path.join(self._dir.name, "runner.stderr")
        with open(self._stderr_path, "a") as err:
            self._stderr_start = err.tell()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", self.backend.runner], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True, bufsize=1,
            )
        config = {"data_dir": self._dir.name, "n_inputs": self.n_inputs, "threads": self.threads,
                  "tolerances": self.tolerances, "dtypes": self.dtypes, "loader": self.backend.loader,
                  "flush_bytes": self.flush_bytes}
        self._proc.stdin.write(json.dumps(config) + "\n")
        self._fresh = True

    def _stop(self, grace: float = 0.0) -> None:
        """End the runner: let it exit by itself within `grace` seconds (it announced it would), else kill it."""
        if self._proc is not None:
            try:
                self._proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None

    def _stderr_tail(self, chars: int = 1500) -> str:
        """The end of what the runner wrote to stderr since it started (its traceback, a driver message)."""
        try:
            with open(self._stderr_path, errors="replace") as f:
                f.seek(self._stderr_start)
                text = f.read().strip()
        except OSError:
            return ""
        return f"; runner stderr: ...{text[-chars:]}" if text else ""

    def run(self, library: str) -> MeasureResult:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        start = time.perf_counter()
        limit = self.time_limit()
        deadline = limit + (30.0 if self._fresh else 0.0)  # a new runner first imports NumPy
        deadline += self.repeat * self.min_repeat_ms / 1e3 + (self.flush_bytes / 2e9) * 8
        self._fresh = False
        try:
            cutoff = SLOW_FACTOR * self.best if self.best < float("inf") else None
            self._proc.stdin.write(json.dumps({"library": library, "repeat": self.repeat,
                                               "min_repeat_ms": self.min_repeat_ms, "cutoff": cutoff}) + "\n")
        except (BrokenPipeError, OSError):
            self._stop()
            return MeasureResult(error_kind=ErrorKind.RUNTIME,
                                 error_msg=f"runner died before the request{self._stderr_tail()}")
        ready, _, _ = select.select([self._proc.stdout], [], [], deadline)
        if not ready:
            self._stop()
            return MeasureResult(error_kind=ErrorKind.TIMEOUT, error_msg=f"no result within {deadline:.1f}s",
                                 run_s=time.perf_counter() - start)
        line = self._proc.stdout.readline()
        elapsed = time.perf_counter() - start
        if not line:
            code = self._proc.wait(5)
            self._proc = None
            reason = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return MeasureResult(error_kind=ErrorKind.RUNTIME,
                                 error_msg=f"kernel crashed the runner ({reason}){self._stderr_tail()}",
                                 run_s=elapsed)
        reply = json.loads(line)
        if reply.get("exit"):  # the device context is poisoned: the next candidate gets a fresh runner
            self._stop(grace=10.0)
        if reply["status"] == "ok":
            return MeasureResult(costs=tuple(reply["costs"]), run_s=elapsed)
        kind = ErrorKind.WRONG_RESULT if reply["status"] == "wrong_result" else ErrorKind.RUNTIME
        return MeasureResult(error_kind=kind, error_msg=reply["message"], run_s=elapsed)

    def time_limit(self) -> float:
        """Seconds a candidate may take: TIMEOUT_FACTOR times the reference (the default point's
        time once the tuner sets `baseline`, else the best so far), at least TIMEOUT_FLOOR_S (a
        loaded machine must not turn good candidates into timeouts), at most `timeout`."""
        ref = self.baseline if math.isfinite(self.baseline) else self.best
        if not math.isfinite(ref):
            return self.timeout
        return min(self.timeout, max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * ref))

    def _run_retrying(self, library: str) -> MeasureResult:
        """A timeout on a loaded machine (load average over the cores) is measured once more."""
        r = self.run(library)
        if r.error_kind is ErrorKind.TIMEOUT and _machine_loaded():
            again = self.run(library)
            if again.error_kind is ErrorKind.TIMEOUT:
                return MeasureResult(error_kind=ErrorKind.TIMEOUT, run_s=r.run_s + again.run_s,
                                     error_msg=f"{again.error_msg} (twice: retried once because the machine was "
                                               f"loaded)")
            return again
        return r

    def measure(self, schedules: list, on_result=None) -> list[MeasureResult]:
        """Results in order. `on_result(index, result)` is called as each one completes,
        so a caller can commit it before the next runs (a kill loses nothing measured)."""
        out = []
        for built in self.build_all(schedules):
            if built.error is not None:
                out.append(built.error)
            else:
                r = self._run_retrying(built.library)
                if r.ok:
                    self.best = min(self.best, r.cost)
                out.append(MeasureResult(r.costs, r.error_kind, r.error_msg, built.build_s, r.run_s))
            if on_result is not None:
                on_result(len(out) - 1, out[-1])
        return out

    def suspend(self) -> None:
        """End the runner process while the measurer stays (inputs, reference, timeouts): an idle tuning task
        holds no process; the next `run` starts a fresh one."""
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._stop(grace=2.0)

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._stop()
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _machine_loaded() -> bool:
    try:
        return os.getloadavg()[0] > usable_cores()
    except OSError:
        return False


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _storage(t) -> np.dtype:
    from ..ir.stmt import Buffer

    return storage_dtype(Buffer(t.name, t.shape, t.dtype))


def _to_storage(value: np.ndarray, t) -> np.ndarray:
    if t.dtype.name == "bfloat16":
        from ..reference.values import round_to_bfloat16

        return (round_to_bfloat16(value).view(np.uint32) >> 16).astype(np.uint16)
    return np.ascontiguousarray(value.astype(_storage(t)))


__all__ = ["ErrorKind", "MeasureResult", "Measurer"]
