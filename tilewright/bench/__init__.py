"""Benchmark drivers behind `tilewright bench`: the FlexTensor suite against
PyTorch (`flextensor`) and ResNet-50's convolution layers (`resnet50`, the suite
operator "R50"), reported by `report`. Imports everything below it; nothing imports it."""

from .flextensor import run_suite

__all__ = ["run_suite"]
