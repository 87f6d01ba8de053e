"""Tuning on a Ray cluster (`tw.RayExecutor`, the optional extra `tilewright[ray]`), passed as `executor=` to
`tw.tune`, `tw.compile` and `TuningTask`. The search and the records stay in the driver, the only writer of
the records; what moves out is the measuring:
- builders: lowering and rendering stay in the driver (Python objects), the compiler runs as stateless Ray
  tasks spread over the cluster's CPUs; each returns the artefact's bytes (nodes share no file system);
- one runner actor per device: it holds the program's inputs and references and runs candidates through a
  LocalRunner (runtime/local_runner.py) in its own isolated process, so a crashing kernel costs one
  measurement; the actor claims the device's custom resource (`RayExecutor.resource(target)`), so
  measurements on one device never overlap; its timeout counts from the request to its own runner, never
  time spent queued; a killed actor is restarted and the candidate it was running measured again once.
A runner actor checks that its host has the target's ISA features before it measures anything."""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import time
from pathlib import Path

from ..config import usable_cores
from ..errors import BuildError, TilewrightError
from ..runtime.builder import BuildResult, message
from ..runtime.local_runner import LocalRunner
from ..runtime.measure import Measurer
from ..runtime.result import ErrorKind, MeasureResult

ACTOR_GRACE_S = 60.0  # beyond the runner's own deadline before the driver declares an actor hung
RUNNER_RESOURCE = "tilewright-runner"


def _ray():
    try:
        import ray
    except ImportError:
        raise TilewrightError("RayExecutor needs Ray: pip install 'tilewright[ray]' (or ray==2.60.0)") from None
    return ray


class RayExecutor:
    """Where a tuning's builders and runners run. `address=None` starts a local cluster on 127.0.0.1 with
    `num_cpus` CPUs (default: the usable cores) and one runner slot for each of `devices` (default: the
    host CPU); with an address, connects to that cluster, which must offer each device's resource (start
    a node with `ray start --resources '{"<resource>": 1}'`, the name from `RayExecutor.resource(target)`).
    A Ray session this process had already started is used as it is."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None, devices=("cpu",)):
        from ..targets import as_target

        ray = _ray()
        self._owns = False
        if not ray.is_initialized():
            if address is None:
                slots = {self.resource(as_target(d)): 1 for d in devices}
                ray.init(num_cpus=num_cpus or usable_cores(), resources=slots, include_dashboard=False,
                         _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="ERROR")
            else:
                _probe(address)
                loopback = address.split("://", 1)[-1].rsplit(":", 1)[0] in ("127.0.0.1", "localhost")
                here = {"_node_ip_address": "127.0.0.1"} if loopback else {}
                constants = ray._private.ray_constants
                cluster_mode = constants.ENABLE_RAY_CLUSTER
                # Ray rewrites a loopback address to the host's own IP unless in this mode: a cluster
                # started on 127.0.0.1 listens there only
                constants.ENABLE_RAY_CLUSTER = cluster_mode and not loopback
                try:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                             **here)
                except Exception as exc:  # Ray raises ConnectionError, RuntimeError or ValueError here
                    raise TilewrightError(f"cannot reach the Ray cluster at {address!r}: {type(exc).__name__}: "
                                          f"{exc}; start one with `ray start --head` or pass address=None for a "
                                          f"local cluster") from None
                finally:
                    constants.ENABLE_RAY_CLUSTER = cluster_mode
            self._owns = True
        self.ray = ray

    @staticmethod
    def resource(target) -> str:
        """The custom resource a node offers for each device of `target`'s kind and fingerprint."""
        return f"{RUNNER_RESOURCE}:{target.kind}:{hashlib.sha256(target.key.encode()).hexdigest()[:12]}"

    def check_resource(self, target) -> str:
        name = self.resource(target)
        if self.ray.cluster_resources().get(name, 0) < 1:
            raise TilewrightError(f"the Ray cluster offers no runner for target {target.key!r}: no node has the "
                                  f"resource {name!r}; start one on a host of that target with "
                                  f"`ray start --address=... --resources='{{\"{name}\": 1}}'`")
        return name

    def measurer(self, outputs, args, target, backend, **kwargs) -> RayMeasurer:
        return RayMeasurer(self, outputs, args, target, backend, **kwargs)

    def shutdown(self) -> None:
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        self._owns = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def _probe(address: str, wait_s: float = 5.0) -> None:
    """Fail fast where nothing listens at a host:port address (Ray itself retries for minutes)."""
    host_port = address.split("://", 1)[-1]
    if ":" not in host_port:
        return  # "auto" and the like: Ray resolves them
    host, port = host_port.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=wait_s).close()
    except (OSError, ValueError) as exc:
        raise TilewrightError(f"cannot reach the Ray cluster at {address!r}: nothing answers at {host}:{port} "
                              f"({exc}); start one with `ray start --head` or pass address=None for a local "
                              f"cluster") from None


class RayMeasurer(Measurer):
    """A Measurer whose compiler runs as Ray tasks and whose runner is an actor on the device's node."""

    def __init__(self, executor: RayExecutor, outputs, args, target, backend, **kwargs):
        super().__init__(outputs, args, target, backend, **kwargs)
        try:
            resource = executor.check_resource(target)
            self.builder = RayBuilder(executor.ray, self.builder, Path(self._dir.name))
            local = self.runner
            files = {f: (Path(self._dir.name) / f).read_bytes() for f in os.listdir(self._dir.name)
                     if f.endswith(".npy")}
            self.runner = RayRunner(executor.ray, resource, target, local.module, local.config, files,
                                    local.timeout, local.repeat, local.min_repeat_ms)
        except BaseException:
            self._dir.cleanup()
            raise


class RayBuilder:
    """LocalBuilder's lowering and rendering in the driver, its compiler as Ray tasks; artefacts come back
    as bytes and are kept under `directory` by content."""

    def __init__(self, ray, local, directory: Path):
        self.ray, self.local, self.directory = ray, local, directory
        self.backend = local.backend
        self._compile = ray.remote(num_cpus=1)(_compile_remote)

    def build(self, schedules: list) -> list[BuildResult]:
        self.local.backend = self.backend  # a caller may swap the backend (the cost model's lowering cache)
        rendered = [self.local.render_one(s) for s in schedules]
        futures = {i: self._compile.remote(self.backend.compile, r[0], self.local.target, self.local.compile_timeout)
                   for i, r in enumerate(rendered) if isinstance(r, tuple)}
        out = []
        for i, r in enumerate(rendered):
            if not isinstance(r, tuple):
                out.append(r)
                continue
            data, error, build_s = self.ray.get(futures[i])
            build_s += r[1]
            if error:
                out.append(BuildResult(error=MeasureResult(error_kind=ErrorKind.COMPILE, error_msg=error,
                                                           build_s=build_s)))
                continue
            path = self.directory / f"{hashlib.sha256(data).hexdigest()[:20]}.so"
            if not path.exists():
                path.write_bytes(data)
            out.append(BuildResult(library=str(path), build_s=build_s, source=str(r[0])))
        return out


def _compile_remote(compile_fn, source, target, timeout: float):
    """On a worker: compile `source` for `target` with the backend record's `compile`; (artefact bytes,
    error message, seconds)."""
    start = time.perf_counter()
    try:
        artefact = compile_fn(source, target, timeout)
    except BuildError as exc:
        return b"", message(exc), time.perf_counter() - start
    return Path(artefact.path).read_bytes(), "", time.perf_counter() - start


class RayRunner(LocalRunner):
    """The driver's handle on the device's runner actor. The timeout state (`best`, `baseline`) lives here
    and goes with each request, so a restarted actor times out exactly as the one it replaced."""

    def __init__(self, ray, resource: str, target, module: str, config: dict, files: dict, timeout: float,
                 repeat: int, min_repeat_ms: float):
        super().__init__(module, config, timeout, repeat, min_repeat_ms)
        self.ray = ray
        # held here for the runner's life: a restarted actor is rebuilt from these same objects
        self._args = [ray.put(a) for a in (target, module, config, files, timeout, repeat, min_repeat_ms)]
        self._actor_class = ray.remote(_RunnerActor).options(resources={resource: 1}, num_cpus=0, max_restarts=-1,
                                                             max_task_retries=0)
        self.actor = None  # made at the first run, released by `suspend` (the device's resource with it)
        self._spans: list[tuple[float, float]] = []  # of released actors
        self.restarts = 0

    def _ready_actor(self):
        """The actor, started and holding the device: waiting for the device (another task or driver holds
        its resource) is queue time and never counts against a candidate's timeout."""
        if self.actor is None:
            self.actor = self._actor_class.remote(*self._args)
            self.ray.get(self.actor.pid.remote())
        return self.actor

    def run(self, library: str) -> MeasureResult:
        data = Path(library).read_bytes()
        wait = self.time_limit() + 30.0 + self.repeat * self.min_repeat_ms / 1e3 + ACTOR_GRACE_S
        for attempt in range(3):
            ref = self._ready_actor().run.remote(data, self.best, self.baseline)
            try:
                r = self.ray.get(ref, timeout=wait)
            except self.ray.exceptions.GetTimeoutError:
                self.ray.kill(self.actor, no_restart=False)
                self.restarts += 1
                return MeasureResult(error_kind=ErrorKind.TIMEOUT, error_msg=f"runner actor gave no answer in "
                                                                             f"{wait:.0f}s; it was restarted")
            except self.ray.exceptions.RayActorError as exc:  # the actor (or its node) died: not the kernel's fault
                self.restarts += 1
                if attempt == 0:
                    continue  # Ray restarts it
                if attempt == 1:  # it did not come back: a new one
                    self.ray.kill(self.actor, no_restart=True)
                    self.actor = self._actor_class.remote(*self._args)
                    continue
                return MeasureResult(error_kind=ErrorKind.RUNTIME, error_msg=f"runner actor died three times on "
                                                                             f"this candidate: {str(exc)[:300]}")
            if r.ok:
                self.best = min(self.best, r.cost)
            return r
        raise AssertionError("unreachable")

    def run_retrying(self, library: str) -> MeasureResult:
        return self.run(library)  # the actor retries a timeout on a loaded machine itself

    def spans(self) -> list[tuple[float, float]]:
        """(start, end) wall-clock times of every run on the device (a restarted actor's lost ones aside)."""
        return self._spans + (self.ray.get(self.actor.spans.remote()) if self.actor is not None else [])

    def suspend(self) -> None:
        """Release the actor and the device's resource (another task's runner may take it); the next run
        starts a new one from the same inputs."""
        if self.actor is None:
            return
        try:
            self._spans += self.ray.get(self.actor.spans.remote(), timeout=30)
            self.ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # a dead or unreachable actor holds nothing to release
            pass
        self.ray.kill(self.actor, no_restart=True)
        self.actor = None

    def close(self) -> None:
        self.suspend()


class _RunnerActor:
    """On the device's node: the program's inputs and references in a local directory, a LocalRunner."""

    def __init__(self, target, module, config, files, timeout, repeat, min_repeat_ms):
        if target.kind == "cpu":
            from ..targets import as_target

            missing = sorted(set(target.features) - set(as_target("cpu").features))
            if missing:
                raise TilewrightError(f"the runner node {socket.gethostname()} lacks ISA features "
                                      f"{', '.join(missing)} of target {target.key}; run this target's "
                                      f"device resource on a host that has them")
        self.dir = tempfile.mkdtemp(prefix="tilewright-ray-runner-")
        for name, data in files.items():
            Path(self.dir, name).write_bytes(data)
        self.runner = LocalRunner(module, dict(config, data_dir=self.dir), timeout, repeat, min_repeat_ms)
        self._spans: list[tuple[float, float]] = []

    def run(self, library: bytes, best: float, baseline: float) -> MeasureResult:
        path = Path(self.dir, f"{hashlib.sha256(library).hexdigest()[:20]}.so")
        if not path.exists():
            path.write_bytes(library)
        self.runner.best, self.runner.baseline = best, baseline
        start = time.time()
        r = self.runner.run_retrying(str(path))
        self._spans.append((start, time.time()))
        return r

    def spans(self) -> list[tuple[float, float]]:
        return self._spans

    def pid(self) -> int:
        return os.getpid()

    def suspend(self) -> None:
        self.runner.suspend()

    def close(self) -> None:
        import shutil

        self.runner.close()
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = ["RayExecutor", "RayMeasurer"]
