"""Tuning on a Ray cluster (`tw.RayExecutor`, the optional extra `tilewright[ray]`), passed as `executor=` to
`tw.tune`, `tw.compile` and `TuningTask`. The search and the records stay in the driver, the only writer of
the records; what moves out is the measuring:
- builders: lowering and rendering stay in the driver (Python objects), the compiler runs as stateless Ray
  tasks spread over the cluster's CPUs; each returns the artefact's bytes (nodes share no file system),
  first checks that its worker has the target's compiler, and waits while a kernel is timed on its machine;
- one runner actor per device (ray_runner.py), made when a task first registers and kept for the executor's
  life, serving every task: it claims the device's custom resource (`RayExecutor.resource(target)`), so
  measurements on one device never overlap, and times candidates in an isolated process with a timeout
  that never counts time queued.
A runner actor checks that its host has the target's ISA features before it measures anything."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

from ..config import usable_cores
from ..errors import BuildError, TilewrightError
from ..runtime.builder import BuildResult, message
from ..runtime.core_lock import building_cores
from ..runtime.measure import Measurer
from ..runtime.result import ErrorKind, MeasureResult
from .ray_runner import CALLERS, DeviceActor, RayRunner, pack_artefact, unpack_artefact

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
        self._actors: dict = {}  # device resource -> its runner actor
        self._made: set[str] = set()  # the resources whose actor this executor made (and ends)

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

    def device_actor(self, resource: str):
        """The runner actor of the device offering `resource`, made at first use (it waits for the device
        while another driver holds it). Executors of one driver share it: a second actor would wait
        forever for the device the first one holds."""
        actor = self._actors.get(resource)
        if actor is None:
            name = f"tilewright-device:{resource}"
            try:
                actor = self.ray.get_actor(name)
            except ValueError:  # none yet in this driver
                actor = self.ray.remote(DeviceActor).options(
                    name=name, get_if_exists=True, resources={resource: 1}, num_cpus=0, max_restarts=-1,
                    max_task_retries=0, max_concurrency=CALLERS).remote()
                self._made.add(resource)
            self._actors[resource] = actor
        return actor

    def replace_actor(self, resource: str, dead) -> None:
        """Give up on an actor Ray could not restart; the next `device_actor` makes a new one."""
        if self._actors.get(resource) is dead:
            self.ray.kill(dead, no_restart=True)
            del self._actors[resource]
            self._made.discard(resource)

    def measurer(self, outputs, args, target, backend, **kwargs) -> RayMeasurer:
        return RayMeasurer(self, outputs, args, target, backend, **kwargs)

    def shutdown(self) -> None:
        if self.ray.is_initialized():  # the devices go back to the cluster even when the session stays
            for resource in self._made:
                self.ray.kill(self._actors[resource], no_restart=True)
        self._actors.clear()
        self._made.clear()
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
    """A Measurer whose compiler runs as Ray tasks and whose runner is the device's actor."""

    def __init__(self, executor: RayExecutor, outputs, args, target, backend, **kwargs):
        super().__init__(outputs, args, target, backend, **kwargs)
        try:
            resource = executor.check_resource(target)
            self.builder = RayBuilder(executor.ray, self.builder, Path(self._dir.name))
            local = self.runner
            files = {f: (Path(self._dir.name) / f).read_bytes() for f in os.listdir(self._dir.name)
                     if f.endswith(".npy")}
            self.runner = RayRunner(executor, resource, target, local.module, local.config, files,
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
        with building_cores():  # lowering and rendering are build work too: never while this machine times
            rendered = [self.local.render_one(s) for s in schedules]
        futures = {i: self._compile.remote(self.backend.compile, r[0], self.local.target, self.local.compile_timeout)
                   for i, r in enumerate(rendered) if isinstance(r, tuple)}
        out = []
        for i, r in enumerate(rendered):
            if not isinstance(r, tuple):
                out.append(r)
                continue
            data, error, build_s, mismatch = self.ray.get(futures[i])
            if mismatch:
                raise TilewrightError(mismatch)
            build_s += r[1]
            if error:
                out.append(BuildResult(error=MeasureResult(error_kind=ErrorKind.COMPILE, error_msg=error,
                                                           build_s=build_s)))
                continue
            out.append(BuildResult(library=unpack_artefact(self.directory, data), build_s=build_s,
                                   source=str(r[0])))
        return out


def _compile_remote(compile_fn, source, target, timeout: float):
    """On a worker: compile `source` for `target` with the backend record's `compile`; (the packed
    artefact, error message, seconds, why this worker cannot build for the target or "")."""
    mismatch = compiler_mismatch(target)
    if mismatch:
        return b"", "", 0.0, mismatch
    try:
        with building_cores():  # never while a kernel is timed on this machine
            start = time.perf_counter()
            artefact = compile_fn(source, target, timeout)
    except BuildError as exc:
        return b"", message(exc), time.perf_counter() - start, ""
    return pack_artefact(artefact.path), "", time.perf_counter() - start, ""


def compiler_mismatch(target) -> str:
    """Why this host cannot build a CPU target's kernels ("" when it can): its C compiler is not the one in
    the target's fingerprint, so records would be filed under a compiler that never built them."""
    if target.kind != "cpu":
        return ""
    from ..targets import as_target

    host = as_target("cpu")
    if (host.compiler, host.compiler_version) == (target.compiler, target.compiler_version):
        return ""
    return (f"the build worker {socket.gethostname()} has compiler {host.compiler!r} ({host.compiler_version}), not "
            f"{target.compiler!r} ({target.compiler_version}) of target {target.key}; install that compiler on "
            f"every node (or set CC to it) or tune for the target this cluster builds for")


__all__ = ["RayExecutor", "RayMeasurer"]
