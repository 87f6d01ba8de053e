"""Running CUDA kernels through the driver API (cuda-bindings): module load of
the cubin (PTX when the cubin is for another arch), launches in order, event
timing. Arguments are NumPy arrays (copied in, outputs copied back) or device
arrays exposing `__cuda_array_interface__` (torch CUDA tensors, CuPy), used in
place. Without a GPU, compiling works and constructing a kernel raises
MeasureError("no CUDA device: ...")."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..build.nvcc import CudaBinary, compile_cuda
from ..codegen.device import DeviceModule
from ..errors import MeasureError
from .device_args import check_array, device_dtype, from_device_layout, to_device_layout
from .device_export import read_artefact, write_artefact
from .timing import TimingResult


def _driver():
    """The driver module, initialised, or MeasureError saying why there is no CUDA device."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:
        raise MeasureError(f"no CUDA device: cuda-bindings is not installed ({exc})") from None
    try:
        err, = cu.cuInit(0)
        err2, count = cu.cuDeviceGetCount()
    except Exception as exc:  # libcuda.so missing
        raise MeasureError(f"no CUDA device: the CUDA driver cannot be loaded ({exc})") from None
    if int(err) != 0 or int(err2) != 0 or count == 0:
        raise MeasureError(f"no CUDA device: cuInit/cuDeviceGetCount returned {err}/{err2}, {count} devices")
    return cu


def _check(cu, result, what: str):
    err, *rest = result
    if int(err) != 0:
        name = cu.cuGetErrorName(err)[1]
        raise MeasureError(f"CUDA {what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return rest[0] if len(rest) == 1 else (rest or None)


class CudaKernel:
    """A DeviceModule loaded on CUDA device `device`; compiled for the device's arch unless `binary` is given."""

    def __init__(self, module: DeviceModule, binary: CudaBinary | None = None, device: int = 0):
        if module.dialect != "cuda":
            raise MeasureError(f"CudaKernel needs a CUDA module, got {module.dialect!r}")
        cu = self._cu = _driver()
        dev = _check(cu, cu.cuDeviceGet(device), "cuDeviceGet")
        major = _check(cu, cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attribute")
        minor = _check(cu, cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attribute")
        arch = f"sm_{major}{minor}"
        self.module = module
        self.binary = binary or compile_cuda(module.source, arch)
        self.ctx = _check(cu, cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu, cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        image = self.binary.cubin if self.binary.arch == arch else self.binary.ptx.encode() + b"\0"
        self.cu_module = _check(cu, cu.cuModuleLoadData(image), "cuModuleLoadData")
        self.functions = [_check(cu, cu.cuModuleGetFunction(self.cu_module, k.name.encode()), "cuModuleGetFunction")
                          for k in module.kernels]
        self._scratch = None

    @property
    def source(self) -> str:
        return str(self.module)

    def _alloc(self, nbytes: int):
        return _check(self._cu, self._cu.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc")

    def _device_args(self, arrays):
        cu, m = self._cu, self.module
        if len(arrays) != len(m.args):
            raise MeasureError(f"{m.func_name} takes {len(m.args)} arrays ({', '.join(b.name for b in m.args)}), "
                               f"got {len(arrays)}")
        ptrs, host, owned = [], [], []
        for a, b in zip(arrays, m.args):
            if isinstance(a, np.ndarray):
                check_array(a, b, m.func_name)
                dev = to_device_layout(a, b.dtype)
                p = self._alloc(dev.nbytes)
                owned.append(p)
                _check(cu, cu.cuMemcpyHtoD(p, dev.ctypes.data, dev.nbytes), "cuMemcpyHtoD")
                ptrs.append(int(p))
                host.append((a, dev))
            else:
                ptrs.append(_device_pointer(a, b, m.func_name))
                host.append(None)
        return ptrs, host, owned

    def _intermediates(self) -> list[int]:
        if self._scratch is None:
            self._scratch = [self._alloc(b.size * device_dtype(b.dtype).itemsize) for b in self.module.intermediates]
        return [int(p) for p in self._scratch]

    def _packed(self, ptrs: list[int]) -> list:
        """Each kernel's launch parameters, packed once: (function, launch, parameter addresses, the arrays
        holding the values, kept alive with them). Timing re-launches these, so a short kernel's time is not
        the Python cost of packing its parameters."""
        by_role = {"arg": ptrs, "intermediate": self._intermediates()}
        out = []
        for f, k in zip(self.functions, self.module.kernels):
            values = [np.array([by_role[p.role][p.index]], dtype=np.uint64) for p in k.params]
            out.append((f, k, np.array([v.ctypes.data for v in values], dtype=np.uint64), values))
        return out

    def _launch(self, ptrs: list[int], packed: list | None = None) -> None:
        cu = self._cu
        for f, k, addresses, _ in packed or self._packed(ptrs):
            _check(cu, cu.cuLaunchKernel(f, *k.grid, *k.block, k.dynamic_shared_bytes, cu.CUstream(0),
                                         addresses.ctypes.data, 0), f"launch of {k.name}")

    def __call__(self, *arrays) -> None:
        cu = self._cu
        ptrs, host, owned = self._device_args(arrays)
        try:
            self._launch(ptrs)
            _check(cu, cu.cuCtxSynchronize(), f"kernel {self.module.func_name}")
            for n in self.module.outputs:
                if host[n] is not None:
                    a, dev = host[n]
                    out = np.empty_like(dev)
                    _check(cu, cu.cuMemcpyDtoH(out.ctypes.data, ptrs[n], out.nbytes), "cuMemcpyDtoH")
                    from_device_layout(out, a, self.module.args[n].dtype)
        finally:
            for p in owned:
                cu.cuMemFree(p)

    def time(self, *arrays, number: int = 10, repeat: int = 5) -> TimingResult:
        """Seconds per call (CUDA events) over `repeat` runs of `number` calls."""
        cu = self._cu
        ptrs, _, owned = self._device_args(arrays)
        start = _check(cu, cu.cuEventCreate(0), "cuEventCreate")
        end = _check(cu, cu.cuEventCreate(0), "cuEventCreate")
        try:
            packed = self._packed(ptrs)
            self._launch(ptrs, packed)  # warm-up
            samples = []
            for _ in range(repeat):
                _check(cu, cu.cuEventRecord(start, cu.CUstream(0)), "cuEventRecord")
                for _ in range(number):
                    self._launch(ptrs, packed)
                _check(cu, cu.cuEventRecord(end, cu.CUstream(0)), "cuEventRecord")
                _check(cu, cu.cuEventSynchronize(end), f"kernel {self.module.func_name}")
                ms = _check(cu, cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")
                samples.append(ms * 1e-3 / number)
            return TimingResult.of(samples, number)
        finally:
            cu.cuEventDestroy(start)
            cu.cuEventDestroy(end)
            for p in owned:
                cu.cuMemFree(p)

    def export(self, directory) -> Path:
        return export_cuda(directory, self.module, self.binary)

    def __del__(self):
        try:
            for p in self._scratch or ():
                self._cu.cuMemFree(p)
        except Exception:  # interpreter shutdown
            pass


def _device_pointer(a, b, func_name: str) -> int:
    """The device address of an array exposing __cuda_array_interface__ (no copy), after checking it."""
    iface = getattr(a, "__cuda_array_interface__", None)
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
    return ptr


def export_cuda(directory, module: DeviceModule, binary: CudaBinary) -> Path:
    """Write kernel.cu, kernel.ptx, kernel.cubin and launch.json (works without a GPU)."""
    return write_artefact(directory, module, {"kernel.ptx": binary.ptx, "kernel.cubin": binary.cubin},
                          {"arch": binary.arch, "compiler": binary.compiler})


def load_exported(directory, device: int = 0) -> CudaKernel:
    """A CudaKernel from a directory written by export_cuda / CudaKernel.export (no recompilation)."""
    module, desc, d = read_artefact(directory, "cuda")
    binary = CudaBinary(module.source, desc["arch"], (d / "kernel.ptx").read_text(),
                        (d / "kernel.cubin").read_bytes(), desc.get("compiler", "?"), d, True)
    return CudaKernel(module, binary, device)


__all__ = ["CudaKernel", "export_cuda", "load_exported"]
