"""An ONNX model's graph inputs: static shapes fixed by the caller, example values by name."""

from __future__ import annotations

import numpy as np

from .builder import UnsupportedOpError


def fixed_input_shapes(model, input_shapes):
    """A copy of `model` whose named inputs have the given static shapes (a dynamic batch made 1, say)."""
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    inputs = {i.name: i for i in model.graph.input}
    for name, shape in input_shapes.items():
        if name not in inputs:
            raise UnsupportedOpError(f"from_onnx: input_shapes names '{name}', which is not a graph input; "
                                     f"inputs: {', '.join(inputs)}")
        dims = inputs[name].type.tensor_type.shape.dim
        del dims[:]
        for d in shape:
            dims.add().dim_value = int(d)
    return model


def example_values(model, example_inputs) -> dict:
    """{graph input name: example array} for the model's non-initializer inputs, in order."""
    if example_inputs is None:
        return {}
    examples = example_inputs if isinstance(example_inputs, (list, tuple)) else [example_inputs]
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    out = {}
    for name, x in zip(names, examples):
        x = x.numpy() if hasattr(x, "numpy") else x
        if isinstance(x, (np.ndarray, np.generic, int)):  # a sequence or map input has no value to fix
            out[name] = np.asarray(x)
    return out
