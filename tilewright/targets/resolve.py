"""Turning what a user passes as `target=` into a Target.

Strings: "cpu" (also "llvm", "c"), "cpu -isa=avx2", "cpu -intrinsics=off"; "cuda" (the first GPU,
or "cuda -device=N"), "cuda -arch=sm_90" (compile-only facts of that
architecture when no GPU is present); "opencl" (the first OpenCL device,
"opencl -platform=P -device=N"); "vta" (a VTA-like accelerator, run by its
simulator), "vta -block=8x8x8 -wgt_buffer=131072" (targets/vta.py); "aie" (an
AI-Engine-like core: emulated intrinsics and a cycle model, targets/aie.py); "hls -device=vu9p"
(an FPGA: HLS C++ run by C simulation, cycles and resources from the model, targets/hls.py)."""

from __future__ import annotations

from dataclasses import replace

from ..errors import TilewrightError
from .aie import OPTIONS as AIE_OPTIONS
from .aie import parse_aie_options
from .cpu import host_target
from .hls import OPTIONS as HLS_OPTIONS
from .hls import parse_hls_options
from .target import KINDS, Target
from .vta import OPTIONS as VTA_OPTIONS
from .vta import parse_vta_options

_OPTIONS = {"cpu": ("isa", "intrinsics"), "cuda": ("arch", "device"), "opencl": ("platform", "device"),
            "vta": tuple(VTA_OPTIONS), "aie": AIE_OPTIONS,
            "hls": HLS_OPTIONS}
_ALIASES = {"llvm": "cpu", "c": "cpu"}


def _parse(text: str) -> tuple[str, dict[str, str]]:
    words = text.split()
    kind = _ALIASES.get(words[0], words[0]) if words else ""
    if kind not in KINDS:
        raise TilewrightError(f"unknown target {text!r}; available: 'cpu' (optionally 'cpu -isa=avx2'), "
                              f"'cuda' ('cuda -arch=sm_90' to compile without a GPU), 'opencl', "
                              f"'vta' ('vta -block=8x8x8'), 'aie' (an AI-Engine-like core, simulated), "
                              f"'hls' ('hls -device=vu9p': FPGA designs, C-simulated)")
    opts = {}
    for w in words[1:]:
        name, eq, value = w.lstrip("-").partition("=")
        if not w.startswith("-") or not eq or name not in _OPTIONS[kind]:
            valid = ", ".join(f"-{o}=..." for o in _OPTIONS[kind])
            raise TilewrightError(f"unknown target option {w!r} in {text!r}; valid for {kind}: {valid}")
        opts[name] = value
    return kind, opts


def _index(opts: dict, name: str) -> int:
    value = opts.get(name, "0")
    if not value.isdigit():
        raise TilewrightError(f"target option -{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _cuda(opts: dict) -> Target:
    from .gpu import cuda_preset, detect_cuda

    facts = detect_cuda(_index(opts, "device"))
    arch = opts.get("arch")
    if facts is None:
        if arch is None:
            raise TilewrightError("no CUDA device found (the driver or cuda-bindings is missing, or no GPU); "
                                  "to generate and compile CUDA without one, use 'cuda -arch=sm_80' or "
                                  "'cuda -arch=sm_90'")
        facts = replace(cuda_preset(arch), device=_index(opts, "device"))
    elif arch is not None and arch != facts.arch:
        raise TilewrightError(f"-arch={arch} does not match the detected GPU {facts.name} ({facts.arch})")
    return Target(kind="cuda", arch=facts.arch, gpu=facts, compiler="nvcc", compiler_version=facts.compiler_version)


def _opencl(opts: dict) -> Target:
    from .gpu import detect_opencl

    platform = opts.get("platform")
    facts = detect_opencl(_index(opts, "platform"), _index(opts, "device"))
    if facts is None:
        raise TilewrightError("no OpenCL device found: install pyopencl and an OpenCL driver "
                              "(pip install pyopencl pocl-binary-distribution gives PoCL's CPU device)"
                              + (f"; platform {platform!r} was asked for" if platform else ""))
    return Target(kind="opencl", arch=facts.arch, gpu=facts, compiler="opencl",
                  compiler_version=facts.compiler_version)


def as_target(target=None, isa: str | None = None) -> Target:
    """None/"cpu"/"llvm"/"c" -> the host CPU; "cuda"/"opencl" -> the device; a Target passes
    through; `isa` (or "cpu -isa=avx2") forces a lower ISA level on a CPU."""
    if isinstance(target, Target):
        return target.with_isa(isa) if isa else target
    if target is None:
        target = "cpu"
    if not isinstance(target, str):
        raise TilewrightError(f"target must be a string like 'cpu', 'cuda', 'opencl' or a tw.Target, "
                              f"got {target!r}")
    kind, opts = _parse(target)
    if kind == "cuda":
        t = _cuda(opts)
    elif kind == "opencl":
        t = _opencl(opts)
    elif kind == "vta":
        return Target(kind="vta", arch="vta", vta=parse_vta_options(opts), compiler="vta-sim")
    elif kind == "aie":
        return Target(kind="aie", arch="aie", aie=parse_aie_options(opts), compiler="aie-emu")
    elif kind == "hls":
        return Target(kind="hls", arch="fpga", hls=parse_hls_options(opts), compiler="hls-csim")
    else:
        t = host_target()
        isa = opts.get("isa", isa)
        if "intrinsics" in opts:
            if opts["intrinsics"] not in ("on", "off"):
                raise TilewrightError(f"target option -intrinsics must be 'on' or 'off', got {opts['intrinsics']!r}")
            t = t.with_intrinsics(opts["intrinsics"] == "on")
    return t.with_isa(isa) if isa else t


__all__ = ["as_target"]
