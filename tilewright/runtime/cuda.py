"""Running CUDA kernels through the driver API (cuda-bindings): module load of
the cubin (PTX when the cubin is for another arch or is refused), a check of
every kernel's launch resources at load time, launches in order on one
stream, and event timing of launches queued behind a spin kernel. Arguments
are NumPy arrays (copied in, outputs copied back) or device arrays exposing
`__cuda_array_interface__` (torch CUDA tensors, CuPy), used in place. Without
a GPU, compiling works and constructing a kernel raises NoCudaDevice."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..build.nvcc import CudaBinary, compile_cuda
from ..codegen.device import DeviceModule
from ..errors import MeasureError
from .cuda_driver import CudaError, check, cuda_device
from .device_args import check_array, device_dtype, from_device_layout, to_device_layout
from .device_export import read_artefact, write_artefact
from .timing import TimingResult

# What a binary refused by the driver reads as; the PTX is tried instead.
_BINARY_REFUSED = {"CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_INVALID_SOURCE",
                   "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}


class CudaLaunches:
    """Every kernel of a module with its parameters packed once: (function, launch, parameter values,
    their addresses). `set_arg` repoints one argument in place (a model's inputs and outputs change
    per call, its arena does not); `enqueue` launches them all in order without waiting."""

    def __init__(self, kernel: CudaKernel, ptrs: list[int]):
        self.kernel = kernel
        by_role = {"arg": list(ptrs), "intermediate": kernel._intermediates()}
        self._items = []
        self._slots: dict[int, list[tuple[np.ndarray, int]]] = {}  # argument -> (values, position)
        for f, k in zip(kernel.functions, kernel.module.kernels):
            values = np.array([by_role[p.role][p.index] for p in k.params], dtype=np.uint64)
            addresses = np.array([values.ctypes.data + 8 * n for n in range(len(k.params))], dtype=np.uint64)
            self._items.append((f, k, values, addresses))
            for n, p in enumerate(k.params):
                if p.role == "arg":
                    self._slots.setdefault(p.index, []).append((values, n))

    def set_arg(self, index: int, ptr: int) -> None:
        for values, n in self._slots.get(index, ()):
            values[n] = ptr

    def enqueue(self, stream=None) -> None:
        k = self.kernel
        cu, s = k._cu, k.device.stream if stream is None else stream
        for f, launch, _, addresses in self._items:
            check(cu, cu.cuLaunchKernel(f, *launch.grid, *launch.block, launch.dynamic_shared_bytes, s,
                                        addresses.ctypes.data, 0), f"launch of {launch.name}")


class CudaKernel:
    """A DeviceModule loaded on CUDA device `device`; compiled for the device's arch unless `binary` is given."""

    def __init__(self, module: DeviceModule, binary: CudaBinary | None = None, device: int = 0):
        if module.dialect != "cuda":
            raise MeasureError(f"CudaKernel needs a CUDA module, got {module.dialect!r}")
        self.device = cuda_device(device)
        cu = self._cu = self.device.cu
        self.module = module
        self.binary = binary or compile_cuda(module.source, self.device.arch)
        self._scratch = None
        self.cu_module = None
        self.device.make_current()
        self.cu_module = self._load_module()
        self.functions = [check(cu, cu.cuModuleGetFunction(self.cu_module, k.name.encode()),
                                f"cuModuleGetFunction({k.name})") for k in module.kernels]
        self.resources = [self._check_resources(f, k) for f, k in zip(self.functions, module.kernels)]

    def _load_module(self):
        cu, arch = self._cu, self.device.arch
        ptx = self.binary.ptx.encode() + b"\0"
        if self.binary.arch != arch or not self.binary.cubin:
            return check(cu, cu.cuModuleLoadData(ptx), f"cuModuleLoadData (PTX JIT for {arch})")
        try:
            return check(cu, cu.cuModuleLoadData(self.binary.cubin), f"cuModuleLoadData (cubin for {arch})")
        except CudaError as exc:
            if exc.name not in _BINARY_REFUSED:
                raise
        return check(cu, cu.cuModuleLoadData(ptx), f"cuModuleLoadData (PTX JIT for {arch} after the cubin "
                                                   f"was refused)")

    def _check_resources(self, f, k) -> dict:
        """The kernel's registers, local (spilled) bytes and the most threads a block of it can have on
        this device; MeasureError when its block is larger, which the launch would refuse."""
        cu = self._cu
        A = cu.CUfunction_attribute

        def attr(name):
            return int(check(cu, cu.cuFuncGetAttribute(getattr(A, f"CU_FUNC_ATTRIBUTE_{name}"), f),
                             f"cuFuncGetAttribute({name}) of {k.name}"))

        info = {"name": k.name, "registers": attr("NUM_REGS"), "local_bytes": attr("LOCAL_SIZE_BYTES"),
                "max_threads": attr("MAX_THREADS_PER_BLOCK"), "shared_bytes": attr("SHARED_SIZE_BYTES")}
        threads = math.prod(k.block)
        if threads > info["max_threads"]:
            raise MeasureError(f"kernel {k.name} uses {info['registers']} registers per thread, so a block can have "
                               f"at most {info['max_threads']} threads on {self.device.arch}; its block "
                               f"{tuple(k.block)} has {threads}: bind fewer threads or use a smaller register tile")
        for d, (n, most) in enumerate(zip(k.grid, self.device.max_grid)):
            if n > most:
                raise MeasureError(f"kernel {k.name}: grid dimension {'xyz'[d]} is {n}, the device allows {most}; "
                                   f"bind the larger loop to blockIdx.x")
        return info

    @property
    def source(self) -> str:
        return str(self.module)

    def _alloc(self, nbytes: int):
        return check(self._cu, self._cu.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc")

    def _device_args(self, arrays, stream):
        cu, m = self._cu, self.module
        if len(arrays) != len(m.args):
            raise MeasureError(f"{m.func_name} takes {len(m.args)} arrays ({', '.join(b.name for b in m.args)}), "
                               f"got {len(arrays)}")
        ptrs, host, owned = [], [], []
        try:
            for a, b in zip(arrays, m.args):
                if isinstance(a, np.ndarray):
                    check_array(a, b, m.func_name)
                    dev = to_device_layout(a, b.dtype)
                    p = self._alloc(dev.nbytes)
                    owned.append(p)
                    check(cu, cu.cuMemcpyHtoDAsync(p, dev.ctypes.data, dev.nbytes, stream), "cuMemcpyHtoDAsync")
                    ptrs.append(int(p))
                    host.append((a, dev))
                else:
                    ptrs.append(device_pointer(a, b, m.func_name, self.device, stream))
                    host.append(None)
        except BaseException:
            self._free(owned)
            raise
        return ptrs, host, owned

    def _free(self, owned) -> None:
        for p in owned:
            self._cu.cuMemFree(p)

    def _intermediates(self) -> list[int]:
        if self._scratch is None:
            self._scratch = [self._alloc(b.size * device_dtype(b.dtype).itemsize) for b in self.module.intermediates]
        return [int(p) for p in self._scratch]

    def pack(self, ptrs: list[int]) -> CudaLaunches:
        """The module's launches with device pointers `ptrs` (one per argument, in order) packed once."""
        self.device.make_current()
        return CudaLaunches(self, ptrs)

    def launch(self, ptrs: list[int], stream=None) -> None:
        """Enqueue every kernel on `stream` (default: the device's) with device pointers `ptrs`; no copy, no wait."""
        with self.device.guard():
            self.pack(ptrs).enqueue(stream)

    def __call__(self, *arrays, stream=None) -> None:
        """Run on NumPy arrays (copied in, outputs copied back) or device arrays (in place); waits for the result."""
        with self.device.guard():
            self._call(arrays, stream)

    def _call(self, arrays, stream) -> None:
        dev = self.device
        dev.make_current()
        s = dev.stream if stream is None else stream
        ptrs, host, owned = self._device_args(arrays, s)
        try:
            self.pack(ptrs).enqueue(s)
            outs = []
            for n in self.module.outputs:
                if host[n] is not None:
                    a, d = host[n]
                    out = np.empty_like(d)
                    check(self._cu, self._cu.cuMemcpyDtoHAsync(out.ctypes.data, ptrs[n], out.nbytes, s),
                          "cuMemcpyDtoHAsync")
                    outs.append((out, a, n))
            dev.synchronize(s, f"kernel {self.module.func_name}")
            for out, a, n in outs:
                from_device_layout(out, a, self.module.args[n].dtype)
        finally:
            self._free(owned)

    def time(self, *arrays, number: int = 10, repeat: int = 5) -> TimingResult:
        """Seconds per call (CUDA events) over `repeat` runs of `number` calls. The calls of a run are queued
        behind a spin kernel, so they run back to back however short they are."""
        with self.device.guard():
            return self._time(arrays, number, repeat)

    def _time(self, arrays, number: int, repeat: int) -> TimingResult:
        dev = self.device
        dev.make_current()
        ptrs, _, owned = self._device_args(arrays, dev.stream)
        try:
            launches = self.pack(ptrs)
            return TimingResult.of(dev.time_queued(lambda: launches.enqueue(dev.stream), number, repeat), number)
        finally:
            self._free(owned)

    def export(self, directory) -> Path:
        return export_cuda(directory, self.module, self.binary, self.device.ordinal)

    def __del__(self):
        try:
            self.device.make_current()
            for p in self._scratch or ():
                self._cu.cuMemFree(p)
            if self.cu_module is not None:
                self._cu.cuModuleUnload(self.cu_module)
        except Exception:  # noqa: BLE001 - interpreter shutdown, a poisoned context
            pass


def device_pointer(a, b, func_name: str, device, stream) -> int:
    """The device address of an array exposing __cuda_array_interface__ (no copy), after checking its dtype,
    shape, layout, alignment and device; work on the array's own stream (CAI v3) is waited for on `stream`."""
    try:
        iface = getattr(a, "__cuda_array_interface__", None)
    except RuntimeError as exc:  # torch: a tensor that requires grad refuses
        raise MeasureError(f"{func_name}: argument '{b.name}' cannot be shared with the kernel ({exc}); pass "
                           f"tensor.detach()") from None
    if iface is None:
        raise MeasureError(f"{func_name}: argument '{b.name}' must be a NumPy array or a CUDA array exposing "
                           f"__cuda_array_interface__ (torch CUDA tensor, CuPy), got {type(a).__name__}")
    if b.dtype == "bfloat16":
        raise MeasureError(f"{func_name}: bfloat16 argument '{b.name}' must be passed as a NumPy array")
    want = device_dtype(b.dtype)
    if np.dtype(iface["typestr"]) != want or tuple(iface["shape"]) not in (b.caller_shape, b.shape):
        raise MeasureError(f"{func_name}: argument '{b.name}' must be {want}{list(b.caller_shape)}, got "
                           f"{np.dtype(iface['typestr'])}{list(iface['shape'])}")
    strides = iface.get("strides")
    if strides is not None and tuple(strides) != tuple(np.empty(iface["shape"], want).strides):
        raise MeasureError(f"{func_name}: argument '{b.name}' must be C-contiguous; pass a .contiguous() copy")
    ptr = int(iface["data"][0])
    if ptr % 16:
        raise MeasureError(f"{func_name}: argument '{b.name}' is not 16-byte aligned (vector accesses need it)")
    cu = device.cu
    ordinal = check(cu, cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
                    f"cuPointerGetAttribute of argument '{b.name}'")
    if int(ordinal) != device.ordinal:
        raise MeasureError(f"{func_name}: argument '{b.name}' lives on CUDA device {int(ordinal)}, the kernel on "
                           f"device {device.ordinal}: move it with .to('cuda:{device.ordinal}')")
    _wait_for(iface.get("stream"), device, stream)
    return ptr


def _wait_for(producer, device, stream) -> None:
    """Order `stream` after the work queued so far on the array's stream (CAI v3: None means the producer
    needs no synchronisation; 1 is the legacy default stream, which our blocking streams wait for anyway)."""
    if producer is None or int(producer) in (0, 1) or int(producer) == int(stream or 0):
        return
    device.order(stream, device.cu.CUstream(int(producer)))


def export_cuda(directory, module: DeviceModule, binary: CudaBinary, device: int = 0) -> Path:
    """Write kernel.cu, kernel.ptx, kernel.cubin and launch.json (works without a GPU)."""
    return write_artefact(directory, module, {"kernel.ptx": binary.ptx, "kernel.cubin": binary.cubin},
                          {"arch": binary.arch, "compiler": binary.compiler, "device": device})


def load_exported(directory, device: int | None = None) -> CudaKernel:
    """A CudaKernel from a directory written by export_cuda / CudaKernel.export (no recompilation), on
    `device` (default: the device named in launch.json, else 0). An artefact without an arch (written by an
    older tilewright) loads its PTX."""
    module, desc, d = read_artefact(directory, "cuda")
    cubin = d / "kernel.cubin"
    binary = CudaBinary(module.source, desc.get("arch", "unknown"), (d / "kernel.ptx").read_text(),
                        cubin.read_bytes() if cubin.exists() else b"", desc.get("compiler", "?"), d, True)
    return CudaKernel(module, binary, desc.get("device", 0) if device is None else device)


__all__ = ["CudaKernel", "CudaLaunches", "device_pointer", "export_cuda", "load_exported"]
