"""Type rules of the graph's convolutions and dense layers (for `infer`), and the attribute
helpers `pair` and `quad` that the passes share."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .blocked import block_of, blocked_shape, unblocked_shape
from .ir import Node, TensorType


def _fail(node: Node, ins: list[TensorType], why: str) -> ShapeError:
    types = ", ".join(str(t) for t in ins)
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({types}): {why}")


def pair(v, name: str = "") -> tuple[int, int]:
    """An int or a 1- or 2-tuple as (h, w)."""
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(x) for x in v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def quad(v) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from an int, (ph, pw) or a 4-tuple."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * 4
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * 4
    if len(v) == 2:
        return v[0], v[1], v[0], v[1]
    return v[0], v[1], v[2], v[3]


def layout_block(node, ins) -> int:
    try:
        return block_of(node.attr("layout"))
    except ShapeError as e:
        raise _fail(node, ins, str(e)) from None


def _blocked_conv2d(node, ins, block: int):
    """conv2d on NCHW{cb}c x and OIHW{ib}i{ob}o weight, writing NCHW{ob}c (ob = the layout's block):
    checked as the NCHW convolution it equals."""
    x, w = ins[0], ins[1]
    pairs = len(w.shape) == 7 and w.dtype == "bfloat16"  # [O/ob, C/ib, KH, KW, ib/g, ob, g]
    if len(x.shape) != 5 or len(w.shape) != (7 if pairs else 6):
        raise _fail(node, ins, f"layout {node.attr('layout')!r} needs x 5-D NCHW{{cb}}c and weight 6-D "
                               f"OIHW{{ib}}i{{ob}}o (bfloat16: 7-D [O/ob, C/ib, KH, KW, ib/2, ob, 2])")
    groups = int(node.attr("groups", 1))
    cb, (ib, ob) = x.shape[4], (w.shape[4] * w.shape[6], w.shape[5]) if pairs else w.shape[4:]
    depthwise = groups > 1 and groups == x.shape[1] * cb
    if ob != block or (ib, ob) != ((1, cb) if depthwise else (cb, ob)):
        want = f"ib 1, ob {cb} (depthwise)" if depthwise else f"ib {cb} (x's block), ob {block} (the layout's)"
        raise _fail(node, ins, f"weight blocks ib {ib}, ob {ob} do not fit; valid: {want}")
    if groups not in (1, x.shape[1] * cb):
        raise _fail(node, ins, f"groups={groups}: packed convolutions take groups 1 or C (depthwise)")
    plain_w = TensorType((w.shape[0] * ob, w.shape[1] * ib, w.shape[2], w.shape[3]), w.dtype)
    out = _plain_conv2d(node, [TensorType(unblocked_shape(x.shape), x.dtype), plain_w, *ins[2:]])[0]
    return [TensorType(blocked_shape(out.shape, block), out.dtype)]


def conv2d_type(node, ins):
    block = layout_block(node, ins)
    return _blocked_conv2d(node, ins, block) if block else _plain_conv2d(node, ins)


def conv_transpose2d_type(node, ins):
    x, w = ins[0], ins[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise _fail(node, ins, "x must be 4-D NCHW and weight 4-D [C, O/groups, KH, KW]")
    groups = int(node.attr("groups", 1))
    if w.shape[0] != x.shape[1] or groups < 1 or x.shape[1] % groups:
        raise _fail(node, ins, f"weight.shape[0] must be the {x.shape[1]} input channels, which groups={groups} "
                               f"divides")
    o = w.shape[1] * groups
    if len(ins) > 2 and ins[2].shape != (o,):
        raise _fail(node, ins, f"bias must have shape ({o},)")
    size = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, d, op in zip(
        x.shape[2:], w.shape[2:], pair(node.attr("stride", (1, 1))), pair(node.attr("padding", (0, 0))),
        pair(node.attr("dilation", (1, 1))), pair(node.attr("output_padding", (0, 0))))]
    if min(size) < 1:
        raise _fail(node, ins, f"the output would be {size}")
    return [TensorType((x.shape[0], o, *size), x.dtype)]


def _plain_conv2d(node, ins):
    x, w = ins[0], ins[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise _fail(node, ins, "x must be 4-D NCHW and weight 4-D OIHW")
    groups = int(node.attr("groups", 1))
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    if groups < 1 or c % groups or o % groups:
        raise _fail(node, ins, f"groups={groups} must divide the input channels {c} and output channels {o}")
    if ci * groups != c:
        raise _fail(node, ins, f"weight has {ci} input channels per group, x has {c} channels in {groups} groups; "
                               f"valid: weight.shape[1] == {c // groups}")
    if len(ins) > 2 and ins[2].shape != (o,):
        raise _fail(node, ins, f"bias must have shape ({o},)")
    sh, sw = pair(node.attr("stride", (1, 1)))
    dh, dw = pair(node.attr("dilation", (1, 1)))
    pt, pl, pb, pr = quad(node.attr("padding", (0, 0, 0, 0)))
    if min(sh, sw, dh, dw) < 1 or min(pt, pl, pb, pr) < 0:
        raise _fail(node, ins, "stride and dilation must be >= 1, padding >= 0")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise _fail(node, ins, f"the dilated {kh}x{kw} kernel does not fit the padded {h}x{wd} input")
    return [TensorType((n, o, oh, ow), _product_dtype(node, ins))]


def _product_dtype(node, ins) -> str:
    """What a conv2d or dense writes: its input's dtype; float32 for bfloat16 operands (they accumulate
    in float32, and so does a float32 bias)."""
    x, w = ins[0], ins[1]
    if "bfloat16" not in (x.dtype, w.dtype):
        return x.dtype
    if x.dtype != w.dtype or (len(ins) > 2 and ins[2].dtype != "float32"):
        raise _fail(node, ins, "bfloat16 products need x and weight both bfloat16 (and a float32 bias)")
    return "float32"


def dense_type(node, ins):
    x, w = ins[0], ins[1]
    if len(x.shape) < 1 or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise _fail(node, ins, "valid: x[..., K], weight[N, K] with the same K")
    if len(ins) > 2 and ins[2].shape != (w.shape[0],):
        raise _fail(node, ins, f"bias must have shape ({w.shape[0]},)")
    return [TensorType(x.shape[:-1] + (w.shape[0],), _product_dtype(node, ins))]


__all__ = ["conv2d_type", "conv_transpose2d_type", "dense_type", "layout_block", "pair", "quad"]
