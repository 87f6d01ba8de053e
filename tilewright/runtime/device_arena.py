"""Device memory for a whole model run on a GPU: allocations carved into
regions at byte offsets (a model's arena and its weights are one allocation
each), device-to-device copies, host uploads and downloads, and the launches
of a run, all queued in order on one CUDA stream or one in-order OpenCL queue
without waiting. A region is passed to a kernel as a device pointer (CUDA:
base + offset) or a sub-buffer (OpenCL: its origin must be a multiple of the
device's CL_DEVICE_MEM_BASE_ADDR_ALIGN, `align`). `CudaGraph` records a run's
launches once as a CUDA graph and replays it. Timing is the device's own:
CUDA events around runs queued behind a spin kernel, OpenCL profiling events.
Imports runtime pieces and errors only."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import MeasureError

# A kernel argument's address must be a multiple of this on CUDA: generated kernels use vector
# loads of up to 16 bytes (float4), as runtime.cuda.device_pointer checks for a caller's array.
CUDA_ARG_ALIGN = 16


@dataclass(eq=False)
class Block:
    """One device allocation (`owned`: freed with its memory) or a caller's buffer."""
    handle: object  # CUDA: int device pointer; OpenCL: a pyopencl Buffer
    nbytes: int
    owned: bool = False
    subs: dict = field(default_factory=dict)  # OpenCL sub-buffers cut from it, by (offset, nbytes)


@dataclass(frozen=True, eq=False)
class Region:
    block: Block
    offset: int
    nbytes: int


@dataclass(frozen=True, eq=False)
class Copy:
    """A device-to-device copy queued among a run's launches."""
    dst: Region
    src: Region


class CudaMemory:
    """Memory and queued work on one CudaDevice's stream."""

    kind = "cuda"
    align = CUDA_ARG_ALIGN

    def __init__(self, device):
        from .cuda_driver import check

        self.device, self.cu, self.stream, self._check = device, device.cu, device.stream, check
        self._owned: list = []

    def alloc(self, nbytes: int, what: str) -> Block:
        self.device.make_current()
        p = self._check(self.cu, self.cu.cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc of {what} ({nbytes} bytes)")
        self._owned.append(p)
        return Block(int(p), nbytes, owned=True)

    @staticmethod
    def wrap(handle, nbytes: int) -> Block:
        return Block(int(handle), nbytes)

    def arg(self, r: Region) -> int:
        return r.block.handle + r.offset

    def upload(self, r: Region, host: np.ndarray) -> None:
        self._check(self.cu, self.cu.cuMemcpyHtoDAsync(self.arg(r), host.ctypes.data, host.nbytes, self.stream),
                    "cuMemcpyHtoDAsync")

    def download(self, host: np.ndarray, r: Region) -> None:
        self._check(self.cu, self.cu.cuMemcpyDtoHAsync(host.ctypes.data, self.arg(r), host.nbytes, self.stream),
                    "cuMemcpyDtoHAsync")

    def copy(self, dst: Region, src: Region) -> None:
        self._check(self.cu, self.cu.cuMemcpyDtoDAsync(self.arg(dst), self.arg(src), src.nbytes, self.stream),
                    "cuMemcpyDtoDAsync")

    def run(self, items) -> list:
        """Queue `items` (launches objects and Copy) in order; nothing to wait on is returned."""
        for it in items:
            if isinstance(it, Copy):
                self.copy(it.dst, it.src)
            else:
                it.enqueue(self.stream)
        return []

    def synchronize(self, what: str) -> None:
        self.device.synchronize(self.stream, what)

    def order_before(self, stream_handle: int) -> None:
        """Make work queued later on the caller's stream `stream_handle` wait for what is queued here
        (torch reading the outputs on its current stream). The legacy default stream (0) already waits
        for this blocking stream."""
        if stream_handle:
            self.device.order(self.cu.CUstream(int(stream_handle)), self.stream)

    def time_runs(self, run, launches_per_run: int, number: int, repeat: int) -> list[float]:
        """Device seconds per call of `run` (which queues one whole run): CUDA events around batches of
        runs queued behind a spin kernel, so the GPU runs them back to back whatever the host's pace."""
        from .cuda_driver import MAX_QUEUED

        return self.device.time_queued(run, number, repeat, max(1, MAX_QUEUED // max(1, launches_per_run)))

    def step_times(self, steps: list[list]) -> list[float]:
        """Device seconds of each group of items, run once in order (events between them)."""
        cu, s = self.cu, self.stream
        events = [self._check(cu, cu.cuEventCreate(0), "cuEventCreate") for _ in range(len(steps) + 1)]
        try:
            self.device.spin(20e-6 * sum(len(items) for items in steps) + 50e-6, s)
            self._check(cu, cu.cuEventRecord(events[0], s), "cuEventRecord")
            for ev, items in zip(events[1:], steps):
                self.run(items)
                self._check(cu, cu.cuEventRecord(ev, s), "cuEventRecord")
            self._check(cu, cu.cuEventSynchronize(events[-1]), "the profiled run")
            return [self._check(cu, cu.cuEventElapsedTime(a, b), "cuEventElapsedTime") * 1e-3
                    for a, b in zip(events, events[1:])]
        finally:
            for ev in events:
                cu.cuEventDestroy(ev)

    def close(self) -> None:
        try:
            self.device.make_current()
            for p in self._owned:
                self.cu.cuMemFree(p)
        except Exception:  # noqa: BLE001 - interpreter shutdown, a poisoned context
            pass
        self._owned = []


class CudaGraph:
    """A run's launches captured once on the memory's stream as a CUDA graph and replayed with one
    cuGraphLaunch. `record(run, key)` captures again when `key` (the pointers bound into the
    launches) changed, and patches the instantiated graph in place (cuGraphExecUpdate) where the
    driver allows, else instantiates it anew. The captured graph is kept while its instantiation
    lives (the driver would allow freeing it; keeping it costs little and asks less of a driver)."""

    def __init__(self, memory: CudaMemory):
        self.memory, self.exec, self.graph, self.key = memory, None, None, None

    def record(self, run, key) -> None:
        if self.exec is not None and key == self.key:
            return
        m = self.memory
        cu, check, s = m.cu, m._check, m.stream
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(cu, cu.cuStreamBeginCapture(s, mode), "cuStreamBeginCapture")
        try:
            run()
        except BaseException:
            err, *rest = cu.cuStreamEndCapture(s)
            if int(err) == 0 and rest and rest[0] is not None:
                cu.cuGraphDestroy(rest[0])
            raise
        graph = check(cu, cu.cuStreamEndCapture(s), "cuStreamEndCapture")
        self.key = None
        if self.exec is not None and self._update(graph):
            cu.cuGraphDestroy(self.graph)
        else:
            self.close()
            try:
                self.exec = check(cu, cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            except BaseException:
                cu.cuGraphDestroy(graph)
                raise
        self.graph, self.key = graph, key

    def _update(self, graph) -> bool:
        """Whether the instantiated graph took `graph`'s parameters in place."""
        try:
            err, *_ = self.memory.cu.cuGraphExecUpdate(self.exec, graph)
        except Exception:  # noqa: BLE001 - a driver without the entry point: instantiate anew
            return False
        return int(err) == 0

    def launch(self) -> None:
        m = self.memory
        m._check(m.cu, m.cu.cuGraphLaunch(self.exec, m.stream), "cuGraphLaunch")

    def close(self) -> None:
        cu = self.memory.cu
        try:
            if self.exec is not None:
                cu.cuGraphExecDestroy(self.exec)
            if self.graph is not None:
                cu.cuGraphDestroy(self.graph)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
        self.exec = self.graph = None


class OpenCLMemory:
    """Memory and queued work on one in-order OpenCL queue (with profiling, for `time_runs`)."""

    kind = "opencl"

    def __init__(self, context, queue):
        import pyopencl as cl

        self.cl, self.context, self.queue = cl, context, queue
        # CL_DEVICE_MEM_BASE_ADDR_ALIGN is in bits
        self.align = max(CUDA_ARG_ALIGN, max(int(d.mem_base_addr_align) for d in context.devices) // 8)

    def alloc(self, nbytes: int, what: str) -> Block:
        cl = self.cl
        try:
            buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(nbytes, 1))
        except cl.Error as exc:
            raise MeasureError(f"OpenCL allocation of {what} ({nbytes} bytes) failed: {exc}") from None
        return Block(buf, nbytes, owned=True)

    @staticmethod
    def wrap(handle, nbytes: int) -> Block:
        return Block(handle, nbytes)

    def arg(self, r: Region):
        if r.offset == 0 and r.nbytes >= r.block.nbytes:
            return r.block.handle
        if r.offset % self.align:
            raise MeasureError(f"an OpenCL sub-buffer must start at a multiple of {self.align} bytes "
                               f"(CL_DEVICE_MEM_BASE_ADDR_ALIGN), not at byte {r.offset}")
        key = (r.offset, r.nbytes)
        if key not in r.block.subs:
            r.block.subs[key] = r.block.handle.get_sub_region(r.offset, max(r.nbytes, 1))
        return r.block.subs[key]

    def upload(self, r: Region, host: np.ndarray):
        return self.cl.enqueue_copy(self.queue, r.block.handle, host, dst_offset=r.offset, is_blocking=False)

    def download(self, host: np.ndarray, r: Region):
        return self.cl.enqueue_copy(self.queue, host, r.block.handle, src_offset=r.offset, is_blocking=False)

    def copy(self, dst: Region, src: Region):
        return self.cl.enqueue_copy(self.queue, dst.block.handle, src.block.handle, byte_count=src.nbytes,
                                    src_offset=src.offset, dst_offset=dst.offset)

    def run(self, items) -> list:
        """Queue `items` (launches objects and Copy) in order; their events."""
        events = []
        for it in items:
            if isinstance(it, Copy):
                events.append(self.copy(it.dst, it.src))
            else:
                events += it.enqueue(self.queue)
        return events

    def synchronize(self, what: str) -> None:
        try:
            self.queue.finish()
        except self.cl.Error as exc:
            raise MeasureError(f"OpenCL {what} failed: {exc}") from None

    def time_runs(self, run, launches_per_run: int, number: int, repeat: int) -> list[float]:
        """Device seconds per call of `run` (which queues one run and returns its events): from the
        first command's start to the last one's end, by profiling events."""
        run()
        self.synchronize("warm-up run")
        samples = []
        for _ in range(repeat):
            runs = [run() for _ in range(number)]
            self.synchronize("timed runs")
            spans = [ev[-1].profile.end - ev[0].profile.start for ev in runs if ev]
            samples.append(sum(spans) * 1e-9 / max(1, len(spans)))
        return samples

    def step_times(self, steps: list[list]) -> list[float]:
        """Device seconds of each group of items, run once in order (their profiling events)."""
        per_step = [self.run(items) for items in steps]
        self.synchronize("profiled run")
        return [sum(e.profile.end - e.profile.start for e in events) * 1e-9 for events in per_step]

    def close(self) -> None:
        pass  # pyopencl releases buffers with their last reference


__all__ = ["CUDA_ARG_ALIGN", "Block", "Copy", "CudaGraph", "CudaMemory", "OpenCLMemory", "Region"]
