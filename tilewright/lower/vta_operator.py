"""Recognising the operators the VTA-like accelerator's lowering takes in a te
program: conv2d_blocked followed by shift_bias_clip (ops/blocked_conv.py; a
dense layer is its 1 x 1 case). Operators record their parameters in their
compute's `attrs`; anything else is refused with what would be accepted."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..targets.vta import VTAConfig
from ..te.tensor import PlaceholderOp, Tensor
from .vta_conv import ConvShape, Epilogue

ACCEPTED = ("the accelerator takes ops.conv2d_blocked followed by ops.shift_bias_clip (int8 data and weights in "
            "the GEMM block's layout, an int32 bias), or an NCHW ops.conv2d(int8, int8, out_dtype='int32') "
            "followed by ops.shift_bias_clip (bias [O] int32, any channel count: its layout comes from an "
            "embedding): pass [data, weight, bias, output] (bias optional)")


@dataclass(frozen=True)
class ConvOperator:
    shape: ConvShape
    epilogue: Epilogue
    roles: tuple[str, ...]  # per kernel argument: "data", "kernel", "bias" or "out"


def _op(t: Tensor) -> str:
    return getattr(t.op, "attrs", {}).get("operator", "") if not isinstance(t.op, PlaceholderOp) else ""


def match_conv(args, cfg: VTAConfig) -> ConvOperator | NchwConvOperator:
    outs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    if len(outs) != 1 or _op(outs[0]) != "shift_bias_clip":
        raise LoweringError(f"target vta: {ACCEPTED}; got outputs {[t.name for t in outs]}")
    out = outs[0]
    conv = out.op.input_tensors[0]
    if _op(conv) == "conv2d" and conv.ndim == 4:
        return _nchw_operator(args, out, conv)
    if _op(conv) != "conv2d_blocked" or conv.op.input_tensors[0] is out:
        raise LoweringError(f"target vta: '{out.name}' does not read a conv2d_blocked; {ACCEPTED}")
    data, weight = conv.op.input_tensors[:2]
    bias = out.op.input_tensors[1] if len(out.op.input_tensors) > 1 else None
    if data.dtype.name != "int8" or weight.dtype.name != "int8":
        raise LoweringError(f"target vta: the GEMM core multiplies int8 by int8; '{data.name}' is {data.dtype}, "
                            f"'{weight.name}' is {weight.dtype}")
    nb, cb, h, w, b, bi = data.shape
    ob, _, kh, kw, bo, _ = weight.shape
    if (b, bi, bo) != (cfg.batch, cfg.block_in, cfg.block_out):
        raise LoweringError(f"target vta: data and weight are blocked {b}x{bi}x{bo}, the core's block is "
                            f"{cfg.block}; re-block them (or use 'vta -block={b}x{bi}x{bo}')")
    (sh, sw), (ph, pw) = conv.op.attrs["stride"], conv.op.attrs["padding"]
    attrs = out.op.attrs
    shape = ConvShape(nb * b, cb * bi, h, w, ob * bo, kh, kw, ph, pw, sh, sw, name=out.name)
    epilogue = Epilogue(attrs["shift"], bias is not None, attrs["lo"], attrs["hi"], attrs.get("round", False))
    return ConvOperator(shape, epilogue, _roles(args, out, data, weight, bias))


@dataclass(frozen=True)
class NchwConvOperator:
    """An NCHW int8 convolution the accelerator runs through an embedding (search/vta_embed.py)."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: tuple[int, int]
    padding: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    epilogue: Epilogue
    roles: tuple[str, ...]


def _nchw_operator(args, out: Tensor, conv: Tensor) -> NchwConvOperator:
    a = conv.op.attrs
    data = conv.op.input_tensors[0]  # under its padding (and a strided 1x1's subsampling) stage
    while not isinstance(data.op, PlaceholderOp) and len(data.op.input_tensors) == 1 and not data.op.reduce_axis:
        data = data.op.input_tensors[0]
    weight = conv.op.input_tensors[1]
    bias = out.op.input_tensors[1] if len(out.op.input_tensors) > 1 else None
    if a.get("layout") != "NCHW" or a.get("groups") != 1 or tuple(a["padding"]) != tuple(a["padding_after"]):
        raise LoweringError(f"target vta: '{conv.name}' must be an NCHW conv2d with groups=1 and symmetric padding "
                            f"(got layout {a.get('layout')}, groups {a.get('groups')}, padding {a['padding']} / "
                            f"{a['padding_after']})")
    if data.dtype.name != "int8" or weight.dtype.name != "int8" or conv.dtype.name != "int32":
        raise LoweringError(f"target vta: the GEMM core multiplies int8 by int8 into int32; '{data.name}' is "
                            f"{data.dtype}, '{weight.name}' {weight.dtype}, '{conv.name}' {conv.dtype}")
    if not isinstance(data.op, PlaceholderOp):
        raise LoweringError(f"target vta: the conv2d's input '{data.name}' must be an argument (a placeholder)")
    n, c, h, w = data.shape
    attrs = out.op.attrs
    epilogue = Epilogue(attrs["shift"], bias is not None, attrs["lo"], attrs["hi"], attrs.get("round", False))
    return NchwConvOperator(n, c, h, w, weight.shape[0], tuple(weight.shape[2:]), tuple(a["padding"]),
                            tuple(a["stride"]), tuple(a["dilation"]), epilogue,
                            _roles(args, out, data, weight, bias))


def _roles(args, out, data, weight, bias) -> tuple[str, ...]:
    known = {id(data): "data", id(weight): "kernel", id(out): "out"}
    if bias is not None:
        known[id(bias)] = "bias"
    roles = []
    for t in args:
        if id(t) not in known:
            raise LoweringError(f"target vta: argument '{t.name}' is not an operand of '{out.name}'")
        roles.append(known[id(t)])
    missing = set(known.values()) - set(roles)
    if missing:
        raise LoweringError(f"target vta: the arguments miss {sorted(missing)}; {ACCEPTED}")
    return tuple(roles)


__all__ = ["ConvOperator", "NchwConvOperator", "match_conv"]
