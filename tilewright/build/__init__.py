"""Compiler drivers and the content-hash cache of built artefacts.
Imports `targets`, `config`, `errors`. Public names: build_library, BuildResult."""

from .cc import BuildResult, build_library, compile_flags

__all__ = ["BuildResult", "build_library", "compile_flags"]
