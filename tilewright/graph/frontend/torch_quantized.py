"""The torch frontend's quantized ops: PT2E (`prepare_pt2e` / `convert_pt2e` with the x86 quantizer, from
torchao) writes `quantized_decomposed` quantize and dequantize ops around each convolution and linear
layer. They become the graph's `quantize` / `dequantize`, so `graph/fold_qdq.py` finds the same pattern
it folds from ONNX QDQ models and the layer runs as an int8 kernel. A weight's dequantize is kept (not
folded to a float constant) so the pattern stays visible.

PyTorch quantizes as round(x * (1 / scale)), ONNX (and the graph's `quantize`) as round(x / scale):
the two can round an element apart where x / scale lies within an ulp of a half, one step."""

from __future__ import annotations

import numpy as np

from .builder import UnsupportedOpError

_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


def _dtype(c, a) -> str:
    name = str(a["dtype"]).replace("torch.", "")
    if name not in _RANGES:
        raise UnsupportedOpError(f"from_torch: {c.node.target} at node '{c.node.name}' quantizes to {name}; "
                                 f"valid: uint8, int8")
    if (int(a["quant_min"]), int(a["quant_max"])) != _RANGES[name]:
        raise UnsupportedOpError(
            f"from_torch: {c.node.target} at node '{c.node.name}' clamps to [{a['quant_min']}, {a['quant_max']}]; "
            f"valid: the whole {name} range {list(_RANGES[name])} (a reduced range is not supported)")
    return name


def _params(c, a, per_channel: bool):
    """(scale value, zero point value) as graph constants: float32 scales, zero points in the quantized dtype."""
    dtype = _dtype(c, a)
    if per_channel:
        scale = np.asarray(c.b.constants[c.v(a["scales"])], np.float32)
        zero = np.asarray(c.b.constants[c.v(a["zero_points"])]).astype(dtype)
    else:  # Python numbers, or 0-d tensors (the `.tensor` overloads)
        scale, zero = (np.asarray(c.b.constants[c.v(v)]) if hasattr(v, "name") else np.asarray(v)
                       for v in (a["scale"], a["zero_point"]))
        scale, zero = np.float32(scale.reshape(())), np.asarray(int(zero.reshape(())), dtype)
    name = c.node.name
    return c.b.constant(np.asarray(scale, np.float32), f"{name}_scale"), c.b.constant(zero, f"{name}_zero_point")


def _quantize(per_channel: bool):
    def handler(c, a):
        scale, zero = _params(c, a, per_channel)
        return c.out("quantize", [c.v(a["input"]), scale, zero], {"axis": int(a["axis"]) if per_channel else 1})
    return handler


def _dequantize(per_channel: bool):
    def handler(c, a):
        if a.get("out_dtype") not in (None, "torch.float32") and str(a.get("out_dtype")) != "torch.float32":
            raise UnsupportedOpError(f"from_torch: {c.node.target} at node '{c.node.name}' dequantizes to "
                                     f"{a['out_dtype']}; valid: float32")
        scale, zero = _params(c, a, per_channel)
        return c.out("dequantize", [c.v(a["input"]), scale, zero], {"axis": int(a["axis"]) if per_channel else 1})
    return handler


def in_eval_mode(module):
    """`module.eval()`, or `module` where it refuses: PT2E's converted model is an exported GraphModule,
    whose train/eval switch raises NotImplementedError, and is already what inference runs."""
    try:
        return module.eval()
    except NotImplementedError:
        return module


QUANTIZED_HANDLERS = {
    "quantize_per_tensor": _quantize(False), "dequantize_per_tensor": _dequantize(False),
    "quantize_per_channel": _quantize(True), "dequantize_per_channel": _dequantize(True),
}

__all__ = ["QUANTIZED_HANDLERS", "in_eval_mode"]
