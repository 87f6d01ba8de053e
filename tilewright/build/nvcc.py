"""Compiling CUDA source to PTX and a cubin for one architecture (sm_80,
sm_90, ...) with nvcc (its own ptxas, never another toolkit's on PATH), or
NVRTC through cuda-bindings where nvcc is absent; cached by a content hash of
(source, arch, compiler, flags). ptxas's report (registers, spills, stack per
kernel) is kept with the binary."""

from __future__ import annotations

import json
import os
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
    directory: Path  # the cache entry: kernel.cu, kernel.ptx, kernel.cubin, resources.json
    cached: bool
    resources: tuple = ()  # per kernel, ptxas's report: {"name", "registers", "spill_stores", "spill_loads", "stack"}

    @property
    def spills(self) -> int:
        """Bytes spilled (stores + loads) over every kernel: 0 for a kernel that keeps its tiles in registers."""
        return sum(r["spill_stores"] + r["spill_loads"] for r in self.resources)


# ptxas -v: "Compiling entry function 'k' for 'sm_90'", then "N bytes stack frame, S bytes spill stores,
# L bytes spill loads" and "Used R registers".
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def parse_ptxas_report(text: str) -> list[dict]:
    """Per kernel: registers, spill store/load bytes and stack frame bytes from ptxas's -v output."""
    out: list[dict] = []
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            out.append({"name": m.group(1), "registers": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0})
        elif out and (m := _FRAME.search(line)):
            out[-1].update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif out and (m := _REGS.search(line)):
            out[-1]["registers"] = int(m.group(1))
    return out


def compiler_available() -> str | None:
    """The CUDA compiler this module would use ("nvcc 13.0.88" / "nvrtc 13.0"), or None."""
    return cuda_compiler()


def compile_cuda(source: str, arch: str = "sm_90", timeout: float = 300.0, compiler: str | None = None) -> CudaBinary:
    """PTX and cubin of `source` for `arch`. BuildError with the compiler's message on failure, or saying
    that no CUDA compiler is installed. `compiler`: "nvrtc" to use NVRTC even where nvcc is present."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise BuildError(f"unknown CUDA arch {arch!r}; expected sm_XY such as {', '.join(KNOWN_ARCHS[2:6])}")
    if compiler == "nvrtc":
        compiler = _nvrtc_version()
        if compiler is None:
            raise BuildError("NVRTC cannot be loaded: `pip install cuda-bindings nvidia-cuda-nvrtc`")
    elif compiler is not None:
        raise BuildError(f"unknown CUDA compiler {compiler!r}; valid: None (nvcc, else NVRTC) or 'nvrtc'")
    else:
        compiler = compiler_available()
    if compiler is None:
        raise BuildError("no CUDA compiler: nvcc is not on PATH and NVRTC (cuda-bindings with libnvrtc) "
                         "cannot be loaded; install the CUDA toolkit or `pip install cuda-bindings "
                         "nvidia-cuda-nvrtc`")
    key = content_key(source, arch, compiler, " ".join(NVCC_FLAGS), "ptxas -v")
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


def _nvrtc_version() -> str | None:
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc {major}.{minor}"
    except Exception:  # noqa: BLE001 - bindings missing or libnvrtc not found
        return None


def _read(d: Path, source: str, arch: str, compiler: str, cached: bool) -> CudaBinary:
    report = d / "resources.json"
    resources = tuple(json.loads(report.read_text())) if report.exists() else ()
    return CudaBinary(source, arch, (d / "kernel.ptx").read_text(), (d / "kernel.cubin").read_bytes(), compiler,
                      d, cached, resources)


def _run(cmd: list[str], timeout: float, what: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what} timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
    except OSError as exc:
        raise BuildError(f"cannot run {what}: {exc}") from None
    if proc.returncode != 0:
        raise BuildError(f"CUDA compilation failed ({' '.join(cmd)}):\n{(proc.stderr + proc.stdout).strip()[:4000]}")
    return proc.stderr + proc.stdout


def _run_nvcc(d: Path, arch: str, timeout: float) -> None:
    virtual = "compute_" + arch[3:]
    _run(["nvcc", *NVCC_FLAGS, "-ptx", f"-arch={virtual}", str(d / "kernel.cu"), "-o", str(d / "kernel.ptx")],
         timeout, "nvcc")
    # nvcc assembles the PTX with its own ptxas (a bare `ptxas` on PATH may be another toolkit's)
    report = _run(["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-O3,-v", str(d / "kernel.ptx"), "-o",
                   str(d / "kernel.cubin")], timeout, "nvcc -cubin")
    (d / "resources.json").write_text(json.dumps(parse_ptxas_report(report)))


def nvrtc_include_dirs() -> list[str]:
    """Where cuda_fp16.h may be for NVRTC: the toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda) and the
    include folders of NVIDIA's pip wheels (nvidia/cuda_runtime, nvidia/cu13)."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    dirs = [os.path.join(r, "include") for r in roots if r]
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in getattr(nvidia, "__path__", ()):
            dirs += [os.path.join(base, sub, "include") for sub in ("cuda_runtime", "cu13", "cuda_nvrtc")]
    except ImportError:
        pass
    return [x for x in dirs if os.path.exists(os.path.join(x, "cuda_fp16.h"))]


def _run_nvrtc(d: Path, source: str, arch: str) -> None:
    from cuda.bindings import nvrtc

    def ok(result, what):
        err, *rest = result
        if int(err) != 0:
            raise BuildError(f"NVRTC {what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
        return rest[0] if rest else None

    prog = ok(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "create")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"--fmad=true", b"--ptxas-options=-v"]
        opts += [f"--include-path={x}".encode() for x in nvrtc_include_dirs()]
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = ok(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * size
        ok(nvrtc.nvrtcGetProgramLog(prog, log), "log")
        log_text = log.rstrip(b"\0").decode(errors="replace")
        if int(err) != 0:
            raise BuildError(f"CUDA compilation failed (NVRTC, {arch}):\n{log_text[:4000]}")
        ptx = b" " * ok(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
        ok(nvrtc.nvrtcGetPTX(prog, ptx), "PTX")
        cubin = b" " * ok(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        ok(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    (d / "kernel.ptx").write_bytes(ptx.rstrip(b"\0"))
    (d / "kernel.cubin").write_bytes(cubin)
    (d / "resources.json").write_text(json.dumps(parse_ptxas_report(log_text)))


__all__ = ["CudaBinary", "compile_cuda", "compiler_available", "nvrtc_include_dirs", "parse_ptxas_report"]
