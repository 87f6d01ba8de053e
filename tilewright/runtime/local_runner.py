"""`LocalRunner`: the runner half of measuring. Built libraries are loaded, checked against the reference
and timed one at a time in an isolated interpreter (runtime/runner.py, or a backend's own runner module)
that reads its inputs and references from a data directory; a crash, a hang or a wrong result comes back
as a MeasureResult with its error kind, the process is restarted and the next candidate goes on. The
timeout is the runner's own: it counts from the request to this process, never time spent queued."""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import time

from ..config import runner_stderr_path, usable_cores
from .result import ErrorKind, MeasureResult

# Timeouts scale with the default point's time (a candidate 50x slower is not worth waiting for), with
# a floor: under load, a fixed 1 s deadline once stored candidates of 13 and 59 us as timeouts.
TIMEOUT_FACTOR, TIMEOUT_FLOOR_S = 50.0, 5.0

# A candidate whose first timed call is this many times slower than the best so far is not repeated:
# its single time already ranks it, and repeating a 1 s kernel costs the search seconds per trial.
SLOW_FACTOR = 4.0


class LocalRunner:
    """Runs libraries in a runner process started as `python -m module` with `config` (data_dir,
    n_inputs, threads, tolerances, dtypes, loader, flush_bytes). `timeout`: the most seconds one
    candidate may take; `best` (fastest correct so far) and `baseline` (the untuned default's time,
    set by the tuner) scale it down (`time_limit`)."""

    def __init__(self, module: str, config: dict, timeout: float = 10.0, repeat: int = 3,
                 min_repeat_ms: float = 20.0):
        self.module, self.config = module, config
        self.timeout, self.repeat, self.min_repeat_ms = timeout, repeat, min_repeat_ms
        self.flush_bytes = config.get("flush_bytes", 0)
        self._proc: subprocess.Popen | None = None
        self._fresh = False
        self.best = float("inf")  # fastest correct cost so far: much slower candidates are timed once
        self.baseline = float("inf")  # the default point's time, which the tuner sets: timeouts scale with it
        self.retries = 0  # timeouts measured once more because the machine was loaded

    def _start(self) -> None:
        # A fresh interpreter (not multiprocessing): no re-import of the user's __main__. Its stderr goes to
        # a file (TILEWRIGHT_RUNNER_STDERR, else one in the data directory) whose tail a crash report quotes.
        self._stderr_path = runner_stderr_path() or os.path.join(self.config["data_dir"], "runner.stderr")
        with open(self._stderr_path, "a") as err:
            self._stderr_start = err.tell()
            self._proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        self._proc.stdin.write(json.dumps(self.config) + "\n")
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
        deadline = self.deadline(self._fresh)
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
            result = MeasureResult(costs=tuple(reply["costs"]), run_s=elapsed)
            self.best = min(self.best, result.cost)
            return result
        kind = ErrorKind.WRONG_RESULT if reply["status"] == "wrong_result" else ErrorKind.RUNTIME
        return MeasureResult(error_kind=kind, error_msg=reply["message"], run_s=elapsed)

    def deadline(self, fresh: bool) -> float:
        """Seconds one request may take: the candidate's time limit, its timed repeats, cache flushes,
        and for a `fresh` runner process its start (it first imports NumPy)."""
        return (self.time_limit() + (30.0 if fresh else 0.0) + self.repeat * self.min_repeat_ms / 1e3
                + (self.flush_bytes / 2e9) * 8)

    def time_limit(self) -> float:
        """Seconds a candidate may take: TIMEOUT_FACTOR times the reference (the default point's
        time once the tuner sets `baseline`, else the best so far), at least TIMEOUT_FLOOR_S (a
        loaded machine must not turn good candidates into timeouts), at most `timeout`."""
        ref = self.baseline if math.isfinite(self.baseline) else self.best
        if not math.isfinite(ref):
            return self.timeout
        return min(self.timeout, max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * ref))

    def run_retrying(self, library: str) -> MeasureResult:
        """A timeout on a loaded machine (load average over the cores) is measured once more."""
        r = self.run(library)
        if r.error_kind is ErrorKind.TIMEOUT and _machine_loaded():
            self.retries += 1
            again = self.run(library)
            if again.error_kind is ErrorKind.TIMEOUT:
                return MeasureResult(error_kind=ErrorKind.TIMEOUT, run_s=r.run_s + again.run_s,
                                     error_msg=f"{again.error_msg} (twice: retried once because the machine was "
                                               f"loaded)")
            return again
        return r

    def _end(self, grace: float) -> None:
        """Close the runner's input (it exits by itself) and wait `grace` seconds before killing it."""
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._stop(grace)

    def suspend(self) -> None:
        """End the runner process; the next `run` starts a fresh one (an idle tuning task holds none)."""
        self._end(grace=2.0)

    def close(self) -> None:
        self._end(grace=0.0)


def _machine_loaded() -> bool:
    try:
        return os.getloadavg()[0] > usable_cores()
    except OSError:
        return False


__all__ = ["SLOW_FACTOR", "TIMEOUT_FACTOR", "TIMEOUT_FLOOR_S", "LocalRunner"]
