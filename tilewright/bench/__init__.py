"""Benchmark drivers behind `tilewright bench`: the FlexTensor suite against
PyTorch (`flextensor`) and ResNet-50's convolution layers (`resnet50`, the suite
operator "R50"), reported by `report`; whole models against every labelled
baseline variant (`models`: baselines in `model_baselines`, `inductor_variants`,
`ort_variants`; footprints in `footprint`; tables in `model_report`). Imports
everything below it; nothing imports it."""

from .flextensor import run_suite

__all__ = ["run_suite"]
