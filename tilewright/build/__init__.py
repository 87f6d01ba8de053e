"""Compiler drivers and the content-hash cache of built artefacts.
Imports `targets`, `config`, `errors`. Public names: build_library, BuildResult."""

from .cc import BuildResult, build_library, compile_flags
from .nvcc import CudaBinary, compile_cuda
from .opencl import build_program, opencl_available

__all__ = ["BuildResult", "build_library", "compile_flags", "CudaBinary", "compile_cuda", "build_program",
           "opencl_available"]
