"""The CUDA driver through cuda-bindings: loading it, its errors (which ones
poison the context: after those every later call fails too), and one device
per ordinal holding its primary context and one stream, made current on
whichever thread calls (a torch.compile backend thread, a thread pool).

"No GPU here" (bindings not installed, libcuda.so not loadable, no device)
is `NoCudaDevice`; anything else the driver reports is a `CudaError` naming
the call and the error, never a silent "no device"."""

from __future__ import annotations

import contextlib
import functools
import threading
import time

from ..errors import MeasureError
from ..targets.gpu import cuda_driver_status, cuda_error_name

# Errors after which the context is unusable: every later call in this process fails (CUDA
# Programming Guide, "Error Checking"; cuda.h documents each as leaving the context in an
# inconsistent state). A measuring process must exit after one of these.
STICKY_ERRORS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_CONTEXT_IS_DESTROYED", "CUDA_ERROR_UNKNOWN",
    "CUDA_ERROR_TOO_MANY_PEERS", "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
})


# Launches queued in one timed batch: the driver's launch queue holds about a thousand before the host
# blocks, and a batch must be queued whole while the spin kernel runs.
MAX_QUEUED = 512


class NoCudaDevice(MeasureError):
    """There is no CUDA device to run on here (bindings, driver or GPU missing)."""


class CudaError(MeasureError):
    """A driver call failed. `sticky`: the context is poisoned; only a new process recovers."""

    def __init__(self, message: str, name: str = "", sticky: bool = False):
        super().__init__(message)
        self.name, self.sticky = name, sticky


def check(cu, result, what: str):
    """The values of a cuda-bindings call's `(CUresult, values...)`, or CudaError naming `what`."""
    err, *rest = result
    if int(err) != 0:
        name = cuda_error_name(cu, err)
        hint = _HINTS.get(name, "")
        raise CudaError(f"CUDA {what} failed: {name}{hint}", name, name in STICKY_ERRORS)
    return rest[0] if len(rest) == 1 else (rest or None)


_HINTS = {
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": " (the block needs more registers or shared memory than an SM has: "
                                          "fewer threads per block or a smaller register tile)",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": " (the cubin is for another architecture and no PTX was loaded)",
}


@functools.cache
def driver():
    """The driver module, initialised; NoCudaDevice saying why there is no CUDA device, or CudaError
    when the driver is there but unusable (older than the bindings, ...)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:
        raise NoCudaDevice(f"no CUDA device: cuda-bindings is not installed ({exc}); "
                           f"`pip install cuda-bindings` on a machine with an NVIDIA driver") from None
    status = cuda_driver_status(cu)
    if status is not None:
        no_gpu, why = status
        raise NoCudaDevice(why) if no_gpu else CudaError(why)
    count = check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount")
    if count == 0:
        raise NoCudaDevice("no CUDA device: the driver lists none")
    return cu


class CudaDevice:
    """One GPU: its primary context (the one torch's runtime uses too), retained once per process,
    and one blocking stream (ordered with the legacy default stream, so torch tensors written there
    are ready) that every kernel of this process launches on unless given another."""

    def __init__(self, ordinal: int):
        cu = self.cu = driver()
        count = check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise MeasureError(f"CUDA device {ordinal} does not exist: the driver lists {count} "
                               f"(valid: 'cuda -device=0'{f' to {count - 1}' if count > 1 else ''})")
        self.ordinal = ordinal
        self.handle = check(cu, cu.cuDeviceGet(ordinal), "cuDeviceGet")
        major = self.attribute("COMPUTE_CAPABILITY_MAJOR")
        minor = self.attribute("COMPUTE_CAPABILITY_MINOR")
        self.arch = f"sm_{major}{minor}"
        self.clock_hz = self.attribute("CLOCK_RATE") * 1000
        self.max_grid = tuple(self.attribute(f"MAX_GRID_DIM_{d}") for d in "XYZ")
        self.ctx = check(cu, cu.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self.make_current()
        self.stream = check(cu, cu.cuStreamCreate(0), "cuStreamCreate")
        self._spin = None
        self._lock = threading.Lock()
        self.poisoned: str | None = None  # the sticky error that made the context unusable

    @contextlib.contextmanager
    def guard(self):
        """Around work on this device: once a sticky error has poisoned the context, every later use says
        so at once (instead of each call failing with an error that names only itself)."""
        if self.poisoned is not None:
            raise CudaError(f"CUDA device {self.ordinal} is unusable in this process since an earlier kernel "
                            f"failed ({self.poisoned}); every later CUDA call fails: start a new process "
                            f"(tuning measures each candidate in a process of its own for this reason)",
                            "CUDA_ERROR_POISONED", True)
        try:
            yield
        except CudaError as exc:
            if exc.sticky:
                self.poisoned = str(exc)
            raise

    def attribute(self, name: str) -> int:
        a = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(check(self.cu, self.cu.cuDeviceGetAttribute(a, self.handle), f"attribute {name}"))

    def make_current(self) -> None:
        """Make this device's context current on the calling thread (a no-op when it already is)."""
        cu = self.cu
        current = check(cu, cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is None or int(current) != int(self.ctx):
            check(cu, cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def synchronize(self, stream=None, what: str = "stream") -> None:
        check(self.cu, self.cu.cuStreamSynchronize(self.stream if stream is None else stream), what)

    def order(self, waiter, producer) -> None:
        """Make work queued later on stream `waiter` wait for the work queued so far on stream `producer`."""
        cu = self.cu
        ev = check(cu, cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        try:
            check(cu, cu.cuEventRecord(ev, producer), "cuEventRecord")
            check(cu, cu.cuStreamWaitEvent(waiter, ev, 0), "cuStreamWaitEvent")
        finally:
            cu.cuEventDestroy(ev)

    def time_queued(self, enqueue, number: int, repeat: int, max_batch: int = MAX_QUEUED) -> list[float]:
        """Device seconds per call of `enqueue` (which queues one call on this device's stream, no wait) in
        each of `repeat` runs of `number` calls: CUDA events around batches of at most `max_batch` calls
        queued behind a spin kernel that covers their queueing from Python, so that the GPU runs them back
        to back however short they are."""
        cu, s = self.cu, self.stream
        enqueue()  # warm-up
        self.synchronize(s, "the warm-up call")
        t0 = time.perf_counter()
        for _ in range(4):
            enqueue()
        host_s = (time.perf_counter() - t0) / 4
        self.synchronize(s, "the warm-up calls")
        start = check(cu, cu.cuEventCreate(0), "cuEventCreate")
        end = check(cu, cu.cuEventCreate(0), "cuEventCreate")
        samples = []
        try:
            for _ in range(repeat):
                ms, left = 0.0, number
                while left:
                    batch = min(left, max_batch)
                    self.spin(batch * host_s * 1.5 + 50e-6, s)
                    check(cu, cu.cuEventRecord(start, s), "cuEventRecord")
                    for _ in range(batch):
                        enqueue()
                    check(cu, cu.cuEventRecord(end, s), "cuEventRecord")
                    check(cu, cu.cuEventSynchronize(end), "the timed calls")
                    ms += check(cu, cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")
                    left -= batch
                samples.append(ms * 1e-3 / number)
        finally:
            cu.cuEventDestroy(start)
            cu.cuEventDestroy(end)
        return samples

    def spin(self, seconds: float, stream=None) -> None:
        """Queue a one-thread kernel that keeps the GPU busy for about `seconds`, so that launches queued
        behind it run back to back (their timing then measures the GPU, not the host's launch rate)."""
        with self._lock:
            if self._spin is None:
                from .cuda_spin import SpinKernel

                self._spin = SpinKernel(self)
        self._spin.launch(max(1, int(seconds * self.clock_hz)), self.stream if stream is None else stream)


@functools.cache
def cuda_device(ordinal: int = 0) -> CudaDevice:
    """The process's CudaDevice for `ordinal` (NoCudaDevice / MeasureError when it does not exist)."""
    return CudaDevice(ordinal)


__all__ = ["MAX_QUEUED", "STICKY_ERRORS", "CudaDevice", "CudaError", "NoCudaDevice", "check", "cuda_device", "driver"]
