"""Compiling CUDA source to PTX and a cubin for one architecture (sm_80,
sm_90, ...) with nvcc (+ ptxas), or NVRTC through cuda-bindings where nvcc
is absent; cached by a content hash of (source, arch, compiler, flags)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from ..targets.gpu import cuda_compiler
from .artefact_cache import cached_dir, content_key, publish, staging_dir

# Accurate math (no --use_fast_math): results are checked against the NumPy reference.
NVCC_FLAGS = ("-O3", "-std=c++17", "--fmad=true")
KNOWN_ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")


@dataclass(frozen=True)
class CudaBinary:
    source: str
    arch: str
    ptx: str
    cubin: bytes
    compiler: str  # "nvcc 13.0.88" or "nvrtc 13.0"
    directory: Path  # the cache entry: kernel.cu, kernel.ptx, kernel.cubin
    cached: bool


def compiler_available() -> str | None:
    """The CUDA compiler this module would use ("nvcc 13.0.88" / "nvrtc 13.0"), or None."""
    return cuda_compiler()


def compile_cuda(source: str, arch: str = "sm_90", timeout: float = 300.0) -> CudaBinary:
    """PTX and cubin of `source` for `arch`. BuildError with the compiler's message on failure, or saying
    that no CUDA compiler is installed."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise BuildError(f"unknown CUDA arch {arch!r}; expected sm_XY such as {', '.join(KNOWN_ARCHS[2:6])}")
    compiler = compiler_available()
    if compiler is None:
        raise BuildError("no CUDA compiler: nvcc is not on PATH and NVRTC (cuda-bindings with libnvrtc) "
                         "cannot be loaded; install the CUDA toolkit or `pip install cuda-bindings "
                         "nvidia-cuda-nvrtc`")
    key = content_key(source, arch, compiler, " ".join(NVCC_FLAGS))
    final = cached_dir(key, "cuda")
    if (final / "kernel.cubin").exists():
        return _read(final, source, arch, compiler, True)
    tmp = staging_dir(key)
    (tmp / "kernel.cu").write_text(source)
    if compiler.startswith("nvcc"):
        _run_nvcc(tmp, arch, timeout)
    else:
        _run_nvrtc(tmp, source, arch)
    publish(tmp, final)
    return _read(final, source, arch, compiler, False)


def _read(d: Path, source: str, arch: str, compiler: str, cached: bool) -> CudaBinary:
    return CudaBinary(source, arch, (d / "kernel.ptx").read_text(), (d / "kernel.cubin").read_bytes(), compiler,
                      d, cached)


def _run(cmd: list[str], timeout: float, what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what} timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
    except OSError as exc:
        raise BuildError(f"cannot run {what}: {exc}") from None
    if proc.returncode != 0:
        raise BuildError(f"CUDA compilation failed ({' '.join(cmd)}):\n{(proc.stderr + proc.stdout).strip()[:4000]}")


def _run_nvcc(d: Path, arch: str, timeout: float) -> None:
    virtual = "compute_" + arch[3:]
    _run(["nvcc", *NVCC_FLAGS, "-ptx", f"-arch={virtual}", str(d / "kernel.cu"), "-o", str(d / "kernel.ptx")],
         timeout, "nvcc")
    _run(["ptxas", "-O3", f"-arch={arch}", str(d / "kernel.ptx"), "-o", str(d / "kernel.cubin")], timeout, "ptxas")


def _run_nvrtc(d: Path, source: str, arch: str) -> None:
    from cuda.bindings import nvrtc

    def ok(result, what):
        err, *rest = result
        if int(err) != 0:
            raise BuildError(f"NVRTC {what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
        return rest[0] if rest else None

    prog = ok(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "create")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"--fmad=true"]
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            size = ok(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
            log = b" " * size
            ok(nvrtc.nvrtcGetProgramLog(prog, log), "log")
            raise BuildError(f"CUDA compilation failed (NVRTC, {arch}):\n{log.decode(errors='replace')[:4000]}")
        ptx = b" " * ok(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
        ok(nvrtc.nvrtcGetPTX(prog, ptx), "PTX")
        cubin = b" " * ok(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        ok(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    (d / "kernel.ptx").write_bytes(ptx.rstrip(b"\0"))
    (d / "kernel.cubin").write_bytes(cubin)


__all__ = ["CudaBinary", "compile_cuda", "compiler_available"]
