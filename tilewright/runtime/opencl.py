"""Running OpenCL kernels through pyopencl (in CI on PoCL's CPU device):
buffers, launches in order (global size = grid * block, local size = block),
profiling-event timing, export and loading of exported artefacts."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ..build.opencl import build_program, opencl_available
from ..codegen.device import DeviceModule
from ..errors import MeasureError
from .device_args import check_array, device_dtype, from_device_layout, to_device_layout
from .device_export import read_artefact, write_artefact
from .timing import TimingResult


def _cl():
    why = opencl_available()
    if why is not None:
        raise MeasureError(f"no OpenCL device: {why}")
    import pyopencl as cl

    return cl


@functools.cache
def default_context(platform: int = 0, device: int = 0):
    """(context, profiling queue) on one device, made once per process."""
    cl = _cl()
    dev = cl.get_platforms()[platform].get_devices()[device]
    ctx = cl.Context([dev])
    return ctx, cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


class OpenCLLaunches:
    """A module's launches bound to device buffers: `set_arg` repoints one argument, `enqueue` launches
    every kernel in order without waiting (the same interface as runtime.cuda.CudaLaunches)."""

    def __init__(self, kernel: OpenCLKernel, bufs):
        self.kernel, self.bufs = kernel, list(bufs)

    def set_arg(self, index: int, buf) -> None:
        self.bufs[index] = buf

    def enqueue(self, queue=None) -> list:
        return self.kernel._launch(self.bufs, queue)


class OpenCLKernel:
    """A DeviceModule built for an OpenCL device. Call it with NumPy arrays (copied in, outputs copied
    back) or pyopencl Buffers / Arrays (used in place), in the order of the function's arguments."""

    def __init__(self, module: DeviceModule, context=None, queue=None, program=None):
        """`program`: the module's source already built for `context` (not built again)."""
        if module.dialect != "opencl":
            raise MeasureError(f"OpenCLKernel needs an OpenCL module, got {module.dialect!r}")
        cl = _cl()
        if context is None:
            context, queue = default_context()
        elif queue is None:
            queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.module, self.context, self.queue = module, context, queue
        self.program = program if program is not None else build_program(module.source, context)
        self._kernels = [cl.Kernel(self.program, k.name) for k in module.kernels]
        self._scratch = None

    @property
    def source(self) -> str:
        return str(self.module)

    def _device_args(self, arrays, copy_in: bool = True):
        cl = _cl()
        m = self.module
        if len(arrays) != len(m.args):
            raise MeasureError(f"{m.func_name} takes {len(m.args)} arrays ({', '.join(b.name for b in m.args)}), "
                               f"got {len(arrays)}")
        bufs, host = [], []
        for a, b in zip(arrays, m.args):
            if isinstance(a, np.ndarray):
                check_array(a, b, m.func_name)
                dev = to_device_layout(a, b.dtype)
                flags = cl.mem_flags.READ_WRITE | (cl.mem_flags.COPY_HOST_PTR if copy_in else 0)
                bufs.append(cl.Buffer(self.context, flags, size=max(dev.nbytes, 1),
                                      hostbuf=dev if copy_in else None))
                host.append((a, dev))
            else:
                bufs.append(getattr(a, "data", a))  # pyopencl.array.Array -> its Buffer
                host.append(None)
        return bufs, host

    def _intermediates(self):
        if self._scratch is None:  # allocated once per kernel object and reused across calls
            cl = _cl()
            self._scratch = [cl.Buffer(self.context, cl.mem_flags.READ_WRITE,
                                       size=max(b.size * device_dtype(b.dtype).itemsize, 1))
                             for b in self.module.intermediates]
        return self._scratch

    def _launch(self, bufs, queue=None):
        by_role = {"arg": bufs, "intermediate": self._intermediates()}
        events = []
        for k, launch in zip(self._kernels, self.module.kernels):
            params = [by_role[p.role][p.index] for p in launch.params]
            events.append(k(queue or self.queue, launch.global_size, launch.block, *params))
        return events

    def pack(self, bufs) -> OpenCLLaunches:
        """The module's launches on device buffers `bufs` (one per argument, in order)."""
        return OpenCLLaunches(self, bufs)

    def launch(self, bufs, queue=None) -> list:
        """Enqueue every kernel on `queue` (default: the kernel's) with buffers `bufs`; no copy, no wait.
        The launches' events, in order."""
        return self._launch(list(bufs), queue)

    def __call__(self, *arrays) -> None:
        cl = _cl()
        bufs, host = self._device_args(arrays)
        try:
            self._launch(bufs)
            for n in self.module.outputs:
                if host[n] is not None:
                    a, dev = host[n]
                    out = np.empty_like(dev)
                    cl.enqueue_copy(self.queue, out, bufs[n])
                    from_device_layout(out, a, self.module.args[n].dtype)
            self.queue.finish()
        except cl.Error as exc:
            raise MeasureError(f"OpenCL launch of {self.module.func_name} failed: {exc}") from None

    def time(self, *arrays, number: int = 3, repeat: int = 5) -> TimingResult:
        """Device seconds per call (profiling events, all kernels) over `repeat` runs of `number`
        calls. Arrays are copied in once; nothing is copied back."""
        bufs, _ = self._device_args(arrays)
        self._launch(bufs)  # warm-up
        self.queue.finish()
        samples = []
        for _ in range(repeat):
            events = []
            for _ in range(number):
                events += self._launch(bufs)
            self.queue.finish()
            samples.append(sum(e.profile.end - e.profile.start for e in events) * 1e-9 / number)
        return TimingResult.of(samples, number)

    def export(self, directory) -> Path:
        """Write kernel.cl and launch.json into `directory`."""
        return write_artefact(directory, self.module)


def load_exported(directory, context=None, queue=None) -> OpenCLKernel:
    """An OpenCLKernel from a directory written by OpenCLKernel.export, on `context` (default: the platform
    and device launch.json names, else the first device of the first platform)."""
    module, desc, _ = read_artefact(directory, "opencl")
    if context is None:
        context, queue = default_context(desc.get("platform", 0), desc.get("device", 0))
    return OpenCLKernel(module, context, queue)


__all__ = ["OpenCLKernel", "OpenCLLaunches", "default_context", "load_exported"]
