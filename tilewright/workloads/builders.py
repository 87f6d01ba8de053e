"""Programs for the FlexTensor suite's cases: `suite_program("C2D", "yolo_conv2")`
returns the argument tensors (inputs then output) built with `tw.ops`."""

from __future__ import annotations

from . import suite_case


def _conv_nd(ops, te, c, nsp: int, transposed: bool, dtype: str):
    b, cin, cout, k = c["batch"], c["in_channels"], c["out_channels"], c["kernel"]
    sizes = {1: [c.get("length")], 2: [c.get("height"), c.get("width")],
             3: [c.get("depth"), c.get("height"), c.get("width")]}[nsp]
    g = c.get("groups", 1)
    x = te.placeholder((b, cin, *sizes), dtype, name="x")
    if transposed:
        w = te.placeholder((cin, cout // g, *([k] * nsp)), dtype, name="w")
        fn = getattr(ops, f"conv_transpose{nsp}d")
        y = fn(x, w, stride=c["stride"], padding=c["padding"], output_padding=c.get("output_padding", 0),
               groups=g, dilation=c.get("dilation", 1))
    else:
        w = te.placeholder((cout, cin // g, *([k] * nsp)), dtype, name="w")
        fn = getattr(ops, f"conv{nsp}d")
        y = fn(x, w, stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=g)
    return [x, w, y]


def suite_program(op: str, case_name: str, dtype: str = "float32") -> list:
    """[inputs..., output] of one suite case."""
    from .. import ops, te

    c = suite_case(op, case_name)
    if op in ("C2D", "GRP", "DIL", "R50"):
        return _conv_nd(ops, te, c, 2, False, dtype)
    if op == "C1D":
        return _conv_nd(ops, te, c, 1, False, dtype)
    if op == "C3D":
        return _conv_nd(ops, te, c, 3, False, dtype)
    if op in ("T1D", "T2D", "T3D"):
        return _conv_nd(ops, te, c, int(op[1]), True, dtype)
    if op == "DEP":
        m = c["channel_multiplier"]
        x = te.placeholder((c["batch"], c["in_channels"], c["height"], c["width"]), dtype, name="x")
        w = te.placeholder((c["in_channels"] * m, 1, c["kernel"], c["kernel"]), dtype, name="w")
        y = ops.depthwise_conv2d(x, w, stride=c["stride"], padding=c["padding"], dilation=c["dilation"])
        return [x, w, y]
    if op == "GEMM":
        a = te.placeholder((c["M"], c["K"]), dtype, name="A")
        b = te.placeholder((c["K"], c["N"]), dtype, name="B")
        return [a, b, ops.matmul(a, b)]
    if op == "GEMV":
        a = te.placeholder((c["M"], c["K"]), dtype, name="A")
        x = te.placeholder((c["K"],), dtype, name="x")
        return [a, x, ops.mv(a, x)]
    if op == "BIL":
        x1 = te.placeholder((c["batch"], c["in1_features"]), dtype, name="x1")
        x2 = te.placeholder((c["batch"], c["in2_features"]), dtype, name="x2")
        w = te.placeholder((c["out_features"], c["in1_features"], c["in2_features"]), dtype, name="w")
        return [x1, x2, w, ops.bilinear(x1, x2, w)]
    if op == "BCM":
        x = te.placeholder((c["rows"], c["cols"]), dtype, name="x")
        return [x, ops.block_circulant(x, c["block"])]
    if op == "SHO":
        x = te.placeholder((c["batch"], c["height"], c["width"], c["channels"]), dtype, name="x")
        shift = te.placeholder((c["channels"],), "int32", name="shift")
        return [x, shift, ops.shift_conv2d(x, shift, c["kernel"], stride=c["stride"], dilation=c["dilation"])]
    raise KeyError(f"no builder for suite operator {op!r}")
