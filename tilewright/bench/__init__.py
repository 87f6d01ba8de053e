"""Benchmark drivers behind `tilewright bench`: the FlexTensor suite against
PyTorch (`flextensor`). Imports everything below it; nothing imports it."""

from .flextensor import run_suite

__all__ = ["run_suite"]
