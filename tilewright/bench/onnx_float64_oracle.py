"""A second oracle for ONNX node tests whose expected data is less exact than the tolerance they are
checked at (an inverse DFT's outputs that should be 0 carry float32 FFT rounding of 2e-7, checked at
an absolute 1e-7): the case's model evaluated by onnx's reference implementation in float64, its
float32 inputs, values, casts, constants and initializers widened. A result that misses the expected
data but matches this evaluation at the case's tolerances is a pass, listed as such."""

from __future__ import annotations

import numpy as np

_NARROW = (1,)  # TensorProto.FLOAT


def _widen_model(model):
    import onnx
    from onnx import TensorProto, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in [*g.input, *g.output, *g.value_info]:
        if vi.type.tensor_type.elem_type in _NARROW:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, t in enumerate(g.initializer):
        if t.data_type in _NARROW:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for node in g.node:
        for a in node.attribute:
            if a.name == "to" and a.type == onnx.AttributeProto.INT and a.i in _NARROW:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in _NARROW:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    return m


def float64_outputs(model, inputs: list) -> list | None:
    """The model's outputs evaluated in float64, or None where the reference cannot evaluate it so."""
    from onnx.reference import ReferenceEvaluator

    try:
        wide = _widen_model(model)
        feeds = {vi.name: (x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x)
                 for vi, x in zip(model.graph.input, inputs)}
        return ReferenceEvaluator(wide).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference has no float64 kernel for: no second oracle
        return None


__all__ = ["float64_outputs"]
