"""Whole models: the graph IR (`ir`), its operator set (`opset`), frontends
from PyTorch and ONNX, passes (constant folding, batch-norm folding, DCE, CSE,
fusion), lowering of fused groups to te programs, tasks and their scheduler,
the memory plan, and the compiled `Module` with its export; on GPU targets the
`GpuModule` (device_module: a device arena, weights uploaded once, launches back
to back, float16 storage in half_precision). Sits on top: may import any layer
below (api, backends, search, ops, te, ...); nothing below imports it."""

from .ir import Graph, Node, TensorType
from .opset import OPS, Pattern
from .partition import Group, Partition

__all__ = ["Graph", "Node", "TensorType", "OPS", "Pattern", "Group", "Partition"]
