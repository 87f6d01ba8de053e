"""The runner half of tuning on Ray: one `DeviceActor` per device for the executor's whole life, serving every
tuning task that measures on that device. A task registers its program once (inputs, references, runner
configuration: `add`); the actor keeps each program's files in a local directory and runs its candidates
through a LocalRunner (runtime/local_runner.py), an isolated process, so a crashing kernel costs one
measurement. Measurements on the device never overlap: the actor takes requests from many callers but
times one at a time under a lock, and no build runs on its machine meanwhile (runtime/core_lock.py). A
candidate's timeout is its LocalRunner's, counted from the moment the actor starts it; time queued
behind other measurements never counts, and the driver declares the actor hung only when one
measurement has run past its deadline and grace. A killed actor is restarted by Ray (or replaced),
every program registers again from the arguments its driver keeps alive, and the candidate that was
running is measured again once."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path

from ..errors import TilewrightError
from ..runtime.core_lock import timing_cores
from ..runtime.local_runner import LocalRunner
from ..runtime.result import ErrorKind, MeasureResult


def pack_artefact(path: str) -> tuple[str, bytes]:
    """An artefact as (its name's suffix, bytes) to send to another node: a file's bytes, or a directory
    (an OpenCL artefact: source and metadata) as a tar archive, whose suffix then ends in "/"."""
    p = Path(path)
    if not p.is_dir():
        return p.suffix, p.read_bytes()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for f in sorted(p.rglob("*")):
            tar.add(f, arcname=str(f.relative_to(p)), recursive=False)
    return p.suffix + "/", buffer.getvalue()


def unpack_artefact(directory, packed: tuple[str, bytes]) -> str:
    """The packed artefact as a file or directory under `directory`, named by its content (kept if there)."""
    suffix, data = packed
    path = Path(directory, hashlib.sha256(data).hexdigest()[:20] + suffix.rstrip("/"))
    if path.exists():
        return str(path)
    staging = Path(tempfile.mkdtemp(dir=directory))
    if suffix.endswith("/"):
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(staging / "a", filter="data")
    else:
        (staging / "a").write_bytes(data)
    os.replace(staging / "a", path)  # whole or not at all: a concurrent reader never sees half of it
    shutil.rmtree(staging, ignore_errors=True)
    return str(path)


ACTOR_GRACE_S = 60.0  # beyond a measurement's own deadline before the driver declares the actor hung
STATUS_WAIT_S = 30.0  # an actor that cannot say what it is doing within this is hung
CALLERS = 32  # requests one device actor accepts at once (they queue for the device's lock)


class RayRunner(LocalRunner):
    """A tuning task's handle on its device's actor. The timeout state (`best`, `baseline`) lives here and
    goes with each request, so a restarted actor times out exactly as the one it replaced."""

    def __init__(self, executor, resource: str, target, module: str, config: dict, files: dict, timeout: float,
                 repeat: int, min_repeat_ms: float):
        super().__init__(module, config, timeout, repeat, min_repeat_ms)
        self.executor, self.ray, self.resource = executor, executor.ray, resource
        self.id = uuid.uuid4().hex
        # held here for the task's life: a restarted actor registers the program again from these objects
        self._args = [self.ray.put(a) for a in (target, module, config, files, timeout, repeat, min_repeat_ms)]
        self._registered = None  # the actor handle this program is registered with
        self._spans: list[tuple[float, float]] = []  # of the program's runs on actors since replaced
        self.restarts = 0
        self.answered_s: list[float] = []  # per run: seconds from the request to its answer (queue included)
        self._register(self.actor)  # waits for the device: another driver may hold it

    @property
    def actor(self):
        """The device's actor, shared by every task of the executor that measures on this device."""
        return self.executor.device_actor(self.resource)

    def _register(self, actor) -> None:
        try:
            self.ray.get(actor.add.remote(self.id, *self._args))
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, TilewrightError):
                raise TilewrightError(str(cause)) from None
            raise
        self._registered = actor

    def run(self, library: str) -> MeasureResult:
        data = pack_artefact(library)
        own = self.deadline(fresh=True) + ACTOR_GRACE_S  # the actor's runner process may be a new one
        failures = 0
        while True:
            actor = self.actor
            try:
                if self._registered is not actor:
                    self._register(actor)
                asked = time.perf_counter()
                r = self._wait(actor, actor.run.remote(self.id, data, self.best, self.baseline), own)
            except _Hung as hung:
                self.ray.kill(actor, no_restart=False)
                self.restarts += 1
                self._registered = None
                return MeasureResult(error_kind=ErrorKind.TIMEOUT, error_msg=f"{hung}; the runner actor was "
                                                                             f"restarted")
            except self.ray.exceptions.RayActorError as exc:  # the actor or its node died: not the kernel's fault
                self.restarts += 1
                failures += 1
                self._registered = None
                if failures == 2:  # Ray's restart did not bring it back: a new actor
                    self.executor.replace_actor(self.resource, actor)
                if failures == 3:
                    return MeasureResult(error_kind=ErrorKind.RUNTIME, error_msg=f"runner actor died three times "
                                                                                 f"on this candidate: {str(exc)[:300]}")
                continue
            if r is None:  # a restarted actor that has not seen this program yet
                self._registered = None
                continue
            self.answered_s.append(time.perf_counter() - asked)
            if r.ok:
                self.best = min(self.best, r.cost)
            return r

    def _wait(self, actor, ref, own: float):
        """The request's answer. Waiting longer than `own` asks the actor what it is doing: queued behind
        other tasks' measurements is not a hang; one measurement running past `own` is."""
        while True:
            try:
                return self.ray.get(ref, timeout=own)
            except self.ray.exceptions.GetTimeoutError:
                try:
                    busy = self.ray.get(actor.busy.remote(), timeout=STATUS_WAIT_S)
                except self.ray.exceptions.GetTimeoutError:
                    raise _Hung(f"runner actor gave no answer in {own + STATUS_WAIT_S:.0f}s") from None
                if busy is not None and busy > own:
                    raise _Hung(f"a measurement has run {busy:.0f}s, past the {own:.0f}s allowed") from None

    def run_retrying(self, library: str) -> MeasureResult:
        return self.run(library)  # the actor retries a timeout on a loaded machine itself

    def spans(self) -> list[tuple[float, float]]:
        """(start, end) wall-clock times of this program's runs on the device (a killed actor's aside)."""
        live = self.ray.get(self._registered.spans.remote(self.id)) if self._registered is not None else []
        return self._spans + live

    def suspend(self) -> None:
        """End this program's runner process on the device (an idle task holds none); the program stays
        registered, so the next run needs no new transfer."""
        if self._registered is not None:
            try:
                self.ray.get(self._registered.suspend.remote(self.id), timeout=STATUS_WAIT_S)
            except Exception:  # a dead or unreachable actor holds nothing to release
                self._registered = None

    def close(self) -> None:
        if self._registered is not None:
            try:
                self._spans += self.ray.get(self._registered.drop.remote(self.id), timeout=STATUS_WAIT_S)
            except Exception:
                pass
            self._registered = None


class _Hung(Exception):
    pass


class DeviceActor:
    """On the device's node: every registered program's inputs and references in a local directory, a
    LocalRunner each, and one lock so that the device times one candidate at a time."""

    def __init__(self):
        self.programs: dict[str, LocalRunner] = {}
        self._spans: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._started: float | None = None  # when the running measurement began

    def add(self, program: str, target, module, config, files, timeout, repeat, min_repeat_ms) -> None:
        if program in self.programs:
            return
        if target.kind == "cpu":
            from ..targets import as_target

            missing = sorted(set(target.features) - set(as_target("cpu").features))
            if missing:
                raise TilewrightError(f"the runner node {socket.gethostname()} lacks ISA features "
                                      f"{', '.join(missing)} of target {target.key}; run this target's "
                                      f"device resource on a host that has them")
        directory = tempfile.mkdtemp(prefix="tilewright-ray-runner-")
        for name, data in files.items():
            Path(directory, name).write_bytes(data)
        self._spans[program] = []
        self.programs[program] = LocalRunner(module, dict(config, data_dir=directory), timeout, repeat,
                                             min_repeat_ms)

    def run(self, program: str, library: tuple[str, bytes], best: float, baseline: float) -> MeasureResult | None:
        runner = self.programs.get(program)
        if runner is None:
            return None
        path = unpack_artefact(runner.config["data_dir"], library)
        with self._lock, timing_cores():
            runner.best, runner.baseline = best, baseline
            self._started = start = time.time()
            try:
                r = runner.run_retrying(path)
            finally:
                self._started = None
            self._spans[program].append((start, time.time()))
        return r

    def busy(self) -> float | None:
        """Seconds the running measurement has taken; None when the device is idle."""
        started = self._started
        return None if started is None else time.time() - started

    def spans(self, program: str) -> list[tuple[float, float]]:
        return list(self._spans.get(program, ()))

    def retries(self, program: str) -> int:
        """Timeouts of the program's candidates measured once more because the machine was loaded."""
        runner = self.programs.get(program)
        return runner.retries if runner is not None else 0

    def pid(self) -> int:
        return os.getpid()

    def suspend(self, program: str) -> None:
        runner = self.programs.get(program)
        if runner is not None:
            with self._lock:
                runner.suspend()

    def drop(self, program: str) -> list[tuple[float, float]]:
        """Forget a program (its runner process and files); its spans."""
        runner = self.programs.pop(program, None)
        if runner is not None:
            with self._lock:
                runner.close()
            shutil.rmtree(runner.config["data_dir"], ignore_errors=True)
        return self._spans.pop(program, [])


__all__ = ["CALLERS", "DeviceActor", "RayRunner", "pack_artefact", "unpack_artefact"]
