"""Frontends: a PyTorch module (through torch.export, core ATen) or an ONNX
model (through the onnx package, opsets 13 to the newest onnx knows) as a `graph.Graph`. Imports
graph.ir/opset and errors; torch and onnx only when a frontend is called, so
importing tilewright imports neither. Public names: from_torch, from_onnx,
UnsupportedOpError."""

from .builder import UnsupportedOpError


def from_torch(module, example_inputs, decompose: bool = True, name: str | None = None):
    """See `graph.frontend.torch.from_torch`."""
    from .torch import from_torch as convert

    return convert(module, example_inputs, decompose=decompose, name=name)


def from_onnx(model_or_path, name: str | None = None, input_shapes: dict | None = None,
              input_values: dict | None = None):
    """See `graph.frontend.onnx.from_onnx`."""
    from .onnx import from_onnx as convert

    return convert(model_or_path, name=name, input_shapes=input_shapes, input_values=input_values)


__all__ = ["from_torch", "from_onnx", "UnsupportedOpError"]
