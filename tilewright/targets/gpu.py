"""GPU facts: what a CUDA or OpenCL device offers (limits, sizes, versions),
detected from the device at run time or taken from a preset for compile-only
use. Data only: imports `errors` and the standard library; detection imports
the vendor bindings lazily and returns None when there is no device (a CUDA
driver that is there but fails is an error, never "no device")."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ..errors import TilewrightError


@dataclass(frozen=True)
class GpuFacts:
    api: str  # "cuda" | "opencl"
    name: str
    vendor: str
    arch: str  # "sm_90"; for OpenCL the device version string
    compute_capability: tuple[int, int] | None
    sm_count: int  # OpenCL: compute units
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    warp_size: int  # OpenCL: preferred work-group size multiple
    shared_mem_per_block: int  # bytes a block gets without opting in (static __shared__ limit)
    shared_mem_per_block_optin: int  # bytes a block may use after cuFuncSetAttribute
    regs_per_thread: int
    regs_per_sm: int
    l2_bytes: int
    clock_khz: int
    mem_clock_khz: int
    driver_version: str
    compiler_version: str
    max_threads_per_sm: int = 0  # resident threads per SM (2048 on sm_80/sm_90); 0: unknown (OpenCL)
    memory_bus_bits: int = 0  # DRAM bus width; with mem_clock_khz the DRAM bandwidth; 0: unknown
    regs_per_block: int = 0  # 32-bit registers one block may use (65536 on sm_80/sm_90); 0: unknown (OpenCL)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # blocks per grid dimension
    device: int = 0  # the ordinal kernels run on ("cuda -device=N", "opencl -device=N")
    platform: int = 0  # OpenCL: the platform's index ("opencl -platform=P")

    @property
    def dram_bytes_per_s(self) -> float:
        """Peak DRAM bandwidth (double data rate x bus width), 0 where unknown."""
        return 2.0 * self.mem_clock_khz * 1e3 * self.memory_bus_bits / 8

    @property
    def fingerprint(self) -> str:
        """What a tuned kernel depends on: the same fingerprint means records apply."""
        return f"{self.api}:{self.name}:{self.arch}:driver={self.driver_version}:compiler={self.compiler_version}"


_KIB = 1024
_MIB = 1024 * 1024

# NVIDIA CUDA C Programming Guide, "Technical Specifications per Compute Capability", and the A100 / H100
# SXM5 whitepapers: 48 KiB of shared memory per block without opt-in on both; 163 KiB (8.0) and 227 KiB
# (9.0) with it; 64K 32-bit registers per SM, 255 per thread; 40 MiB and 50 MiB of L2.
_PRESETS = {
    "sm_80": dict(name="NVIDIA A100 (preset)", compute_capability=(8, 0), sm_count=108,
                  shared_mem_per_block_optin=163 * _KIB, l2_bytes=40 * _MIB, clock_khz=1410000,
                  mem_clock_khz=1215000, max_threads_per_sm=2048, memory_bus_bits=5120),
    "sm_90": dict(name="NVIDIA H100 SXM (preset)", compute_capability=(9, 0), sm_count=132,
                  shared_mem_per_block_optin=227 * _KIB, l2_bytes=50 * _MIB, clock_khz=1980000,
                  mem_clock_khz=2619000, max_threads_per_sm=2048, memory_bus_bits=5120),
}


# Blocks per grid dimension on every CUDA architecture since 3.0 (CUDA C Programming Guide, Table 21).
_CUDA_GRID = (2**31 - 1, 65535, 65535)


def cuda_preset(arch: str) -> GpuFacts:
    """Facts of a reference GPU of `arch` ("sm_80": A100, "sm_90": H100 SXM), for compiling without one."""
    if arch not in _PRESETS:
        raise TilewrightError(f"no CUDA preset for arch {arch!r}; valid presets are {sorted(_PRESETS)}")
    p = _PRESETS[arch]
    return GpuFacts(api="cuda", vendor="NVIDIA", arch=arch, max_threads_per_block=1024,
                    max_block_dims=(1024, 1024, 64), warp_size=32, shared_mem_per_block=48 * _KIB,
                    regs_per_thread=255, regs_per_sm=65536, regs_per_block=65536,
                    max_grid_dims=_CUDA_GRID, driver_version="none", compiler_version=cuda_compiler() or "none", **p)


def detect_cuda(device: int = 0) -> GpuFacts | None:
    """The facts of CUDA device `device` through the driver API (cuda-bindings), or None when this machine
    has no CUDA GPU (the bindings not installed, no driver library, the driver reports no device).
    A driver that is there but fails (older than the bindings, a device that cannot be queried) is a
    TilewrightError naming the cause: it must not read as "no GPU"."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    status = cuda_driver_status(cu)
    if status is not None:
        no_gpu, why = status
        if no_gpu:
            return None
        raise TilewrightError(why)
    try:
        return _query_cuda(cu, device)
    except RuntimeError as exc:
        raise TilewrightError(f"CUDA device {device} is present but could not be queried: {exc}") from None


# What cuInit answers on a machine with no usable GPU (a stub libcuda of a toolkit without a driver too).
NO_GPU_ERRORS = ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_NOT_INITIALIZED", "CUDA_ERROR_STUB_LIBRARY")


def cuda_driver_status(cu) -> tuple[bool, str] | None:
    """None when the driver is initialised and new enough for the installed cuda-bindings; else
    (no_gpu, why): no_gpu when this machine simply has no CUDA GPU, False for a driver that is there but
    unusable (its message says what to do)."""
    try:
        err, = cu.cuInit(0)
    except RuntimeError as exc:  # the bindings could not dlopen libcuda.so.1
        return True, f"no CUDA device: the CUDA driver cannot be loaded ({exc})"
    name = cuda_error_name(cu, err)
    if name in NO_GPU_ERRORS:
        return True, f"no CUDA device: cuInit returned {name}"
    if name:
        return False, f"the CUDA driver is present but cuInit failed: {name}"
    err, version = cu.cuDriverGetVersion()
    try:
        from cuda import bindings

        needed = int(str(bindings.__version__).split(".")[0])
    except (ImportError, AttributeError, ValueError):
        needed = 0
    if int(err) == 0 and version // 1000 < needed:
        return False, (f"the NVIDIA driver supports CUDA {version // 1000}.{version % 1000 // 10}, older than the "
                       f"CUDA {needed} of cuda-bindings {bindings.__version__}: update the driver, or install a "
                       f"cuda-bindings matching the driver (pip install 'cuda-bindings=={version // 1000}.*')")
    return None


def cuda_error_name(cu, err) -> str:
    """The driver's name of a CUresult ("" for success)."""
    if int(err) == 0:
        return ""
    try:
        value = cu.cuGetErrorName(err)[1]
        return value.decode() if isinstance(value, bytes) else str(value)
    except Exception:  # noqa: BLE001 - an unknown code still gets a name
        return f"CUDA error {int(err)}"


def nvidia_gpus_listed() -> list[str]:
    """The GPUs `nvidia-smi -L` lists (empty where it is missing or fails): a machine listing one must
    detect it, so a test that would skip for lack of a GPU fails instead."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.splitlines() if line.startswith("GPU ")]


def _query_cuda(cu, device: int) -> GpuFacts | None:
    def ok(result):
        err, *values = result
        if int(err) != 0:
            raise RuntimeError(f"{cuda_error_name(cu, err)}")
        return values[0] if len(values) == 1 else values

    count = ok(cu.cuDeviceGetCount())
    if count == 0:
        return None
    if device >= count:
        raise TilewrightError(f"CUDA device {device} does not exist: the driver lists {count} "
                              f"(valid: -device=0{f' to {count - 1}' if count > 1 else ''})")
    dev = ok(cu.cuDeviceGet(device))
    A = cu.CUdevice_attribute

    def attr(name: str) -> int:
        return int(ok(cu.cuDeviceGetAttribute(getattr(A, name), dev)))

    major = attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    name = ok(cu.cuDeviceGetName(128, dev))
    name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    driver = int(ok(cu.cuDriverGetVersion()))
    return GpuFacts(
        api="cuda", name=name, vendor="NVIDIA", arch=f"sm_{major}{minor}", compute_capability=(major, minor),
        sm_count=attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        max_threads_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        max_block_dims=(attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"), attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y"),
                        attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z")),
        warp_size=attr("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
        shared_mem_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
        shared_mem_per_block_optin=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        regs_per_thread=255, regs_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
        l2_bytes=attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"), clock_khz=attr("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
        mem_clock_khz=attr("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
        driver_version=f"{driver // 1000}.{driver % 1000 // 10}", compiler_version=cuda_compiler() or "none",
        max_threads_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
        memory_bus_bits=attr("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
        regs_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
        max_grid_dims=(attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"), attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y"),
                       attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z")),
        device=device,
    )


@functools.cache
def cuda_compiler() -> str | None:
    """The CUDA compiler builds use: `nvcc --version`'s release ("nvcc 13.0.88"), else NVRTC's
    ("nvrtc 13.0") when cuda-bindings can load it, else None. Part of a CUDA target's fingerprint."""
    import re
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
            m = re.search(r"V(\d+\.\d+\.\d+)", out)
            return f"nvcc {m.group(1) if m else 'unknown'}"
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc {major}.{minor}"
    except Exception:  # bindings missing or libnvrtc not found
        return None


def detect_opencl(platform: int | None = None, device: int | None = None) -> GpuFacts | None:
    """The facts of an OpenCL device through pyopencl (the first device of the first platform unless told),
    or None when pyopencl or a device is missing."""
    try:
        import pyopencl as cl
    except ImportError:
        return None
    try:
        platforms = cl.get_platforms()
        plat = platforms[platform or 0]
        dev = plat.get_devices()[device or 0]
    except Exception:  # noqa: BLE001 - no ICD, no platform, index out of range
        return None
    return replace(opencl_facts(dev), platform=platform or 0, device=device or 0)


def opencl_facts(dev) -> GpuFacts:
    """GpuFacts of a pyopencl Device."""
    import pyopencl as cl

    try:
        multiple = int(dev.get_info(cl.device_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE))
    except Exception:  # only kernels report it on some drivers
        multiple = 1
    dims = tuple(int(d) for d in dev.max_work_item_sizes) + (1, 1, 1)
    return GpuFacts(
        api="opencl", name=dev.name.strip(), vendor=dev.vendor.strip(), arch=dev.version.strip(),
        compute_capability=None, sm_count=int(dev.max_compute_units),
        max_threads_per_block=int(dev.max_work_group_size), max_block_dims=dims[:3], warp_size=multiple,
        shared_mem_per_block=int(dev.local_mem_size), shared_mem_per_block_optin=int(dev.local_mem_size),
        regs_per_thread=0, regs_per_sm=0, l2_bytes=int(dev.global_mem_cache_size),
        clock_khz=int(dev.max_clock_frequency) * 1000, mem_clock_khz=0,
        driver_version=dev.driver_version.strip(), compiler_version=dev.opencl_c_version.strip(),
    )


__all__ = ["NO_GPU_ERRORS", "GpuFacts", "cuda_driver_status", "cuda_error_name", "cuda_preset", "detect_cuda",
           "detect_opencl", "nvidia_gpus_listed", "opencl_facts"]
