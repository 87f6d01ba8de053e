"""A float CNN on the VTA-like accelerator, the way TVM's VTA flow runs it:
quantized with power-of-two scales, its convolutions offloaded, the rest on
the host CPU.

`compile_for_vta(graph, target, calibration)` takes an optimized graph (batch
norm folded into the convolutions) of conv2d / relu / add / max_pool2d / mean
/ reshape / dense nodes. Calibration inputs fix one power-of-two exponent per
activation (the largest f with max|x| * 2^f <= 127) and per weight tensor;
each convolution becomes the int8 blocked operator clip((acc >> shift) + bias,
lo, 127) with shift = f_in + f_w - f_out (rounding half up: a flooring shift
drifts every layer down by half a step) and the following ReLU as lo = 0;
residual adds align their operands by rounding right shifts; max pooling is exact on
int8; the head sums the last feature map in int32 and multiplies by int8
classifier weights, then scales to float on the host. Convolutions whose
channels are multiples of the GEMM block go to the accelerator (its default
or recorded tiling); one whose input channels are not (the first, with 3)
goes through the embedding `tw.intrin.embed` ranks best by simulated cycles
(host gathers around a native accelerator conv); every other node runs as a
tilewright kernel on the CPU. `module.summary()` gives the
split and each offloaded layer's simulated cycles; `module.check(x)` runs the
whole quantized graph in the reference evaluator and compares bit for bit."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import LoweringError
from .ir import Graph
from .reference import run_reference


@dataclass
class _Step:
    name: str
    device: str
    inputs: tuple[str, ...]
    make: object  # (*input tensors) -> (output tensor, [parameter placeholders])
    params: list = field(default_factory=list)  # arrays, in the order make() declares placeholders
    kernel: object = None
    stats: dict = field(default_factory=dict)
    # a convolution the GEMM block does not divide, run through an embedding: (ConvProblem, int8 OIHW weights,
    # int32 bias, Epilogue)
    embedded: tuple | None = None


def _exponent(max_abs: float, limit: int = 127) -> int:
    return 30 if max_abs <= 0 else int(math.floor(math.log2(limit / max_abs)))


def _blocked_act(x: np.ndarray, b: int) -> np.ndarray:
    """NCHW int8 -> (N, C/b, H, W, 1, b), channels padded to the block."""
    n, c, h, w = x.shape
    cp = -(-c // b) * b
    if cp != c:
        x = np.concatenate([x, np.zeros((n, cp - c, h, w), x.dtype)], axis=1)
    return np.ascontiguousarray(x.reshape(n, cp // b, b, h, w).transpose(0, 1, 3, 4, 2)[:, :, :, :, None, :])


def _blocked_weight(w: np.ndarray, b: int) -> np.ndarray:
    o, c, kh, kw = w.shape
    cp = -(-c // b) * b
    if cp != c:
        w = np.concatenate([w, np.zeros((o, cp - c, kh, kw), w.dtype)], axis=1)
    return np.ascontiguousarray(w.reshape(o // b, b, cp // b, b, kh, kw).transpose(0, 2, 4, 5, 1, 3))


class _Quantizer:
    def __init__(self, graph: Graph, ranges: dict, block: int):
        self.g, self.ranges, self.b = graph, ranges, block  # value -> max |x| over the calibration inputs
        self.exp: dict[str, int] = {}
        self.steps: list[_Step] = []
        self.fused: set[str] = set()  # relu nodes folded into their producer

    def relu_after(self, value: str):
        users = self.g.consumers(value)
        if len(users) == 1 and users[0].op == "relu":
            self.fused.add(users[0].outputs[0])
            return users[0].outputs[0]
        return None

    def f_of(self, value: str) -> int:
        return _exponent(self.ranges[value])

    def conv(self, node) -> None:
        from ..ops.blocked_conv import conv2d_blocked, shift_bias_clip
        from ..te import placeholder

        x, wname, *rest = node.inputs
        a = node.attrs
        if a.get("groups", 1) != 1 or tuple(a.get("dilation", (1, 1))) != (1, 1):
            raise LoweringError(f"vta offload: conv '{node.outputs[0]}' is grouped or dilated; not supported")
        pt, pl, pb, pr = a["padding"]
        if (pt, pl) != (pb, pr):
            raise LoweringError(f"vta offload: conv '{node.outputs[0]}' pads asymmetrically {a['padding']}")
        w = self.g.constants[wname]
        bias = self.g.constants[rest[0]] if rest else np.zeros(w.shape[0], np.float32)
        out = self.relu_after(node.outputs[0]) or node.outputs[0]
        f_in, f_w = self.exp[x], _exponent(float(np.max(np.abs(w))))
        f_out = min(self.f_of(out), f_in + f_w)
        self.exp[out] = f_out
        b = self.b
        wq = _blocked_weight(np.clip(np.round(w * 2.0 ** f_w), -127, 127).astype(np.int8), b)
        bq = np.round(bias * 2.0 ** f_out).astype(np.int32).reshape(1, -1, 1, 1, 1, b)
        shift, lo = f_in + f_w - f_out, (0 if out != node.outputs[0] else -128)
        device = "vta" if w.shape[1] % b == 0 and w.shape[0] % b == 0 and pt <= 15 else "cpu"
        embedded = None
        if device == "cpu" and w.shape[0] % b == 0:  # input channels off the block: ask the embedder
            from ..lower.vta_conv import Epilogue
            from ..search.vta_embed import ConvProblem

            n, c, h, wd = self.g.type_of(x).shape
            sh, sw = a["stride"]
            problem = ConvProblem(n, c, h, wd, w.shape[0], w.shape[2], w.shape[3], pt, pl, sh, sw, name=out)
            w_int8 = np.clip(np.round(w * 2.0 ** f_w), -127, 127).astype(np.int8)
            embedded = (problem, w_int8, bq.reshape(-1), Epilogue(shift, True, lo, 127, round=True))
            device = "vta"

        def make(t, name=out, wshape=wq.shape, bshape=bq.shape, stride=tuple(a["stride"]), pad=(pt, pl)):
            wt = placeholder(wshape, "int8", f"{name}_w")
            bt = placeholder(bshape, "int32", f"{name}_b")
            return shift_bias_clip(conv2d_blocked(t, wt, stride, pad), bt, shift, lo, 127, name=name,
                                   round_half_up=True), [wt, bt]
        self.steps.append(_Step(out, device, (x,), make, [wq, bq], embedded=embedded))

    def add(self, node) -> None:
        from ..te import compute, const
        from ..te import max as te_max
        from ..te import min as te_min

        x, y = node.inputs
        out = self.relu_after(node.outputs[0]) or node.outputs[0]
        f_o = min(self.exp[x], self.exp[y], self.f_of(out))
        self.exp[out] = f_o
        sx, sy, lo = self.exp[x] - f_o, self.exp[y] - f_o, (0 if out != node.outputs[0] else -128)

        def make(a, c, name=out):
            def rounded(t, i, s):  # round half up: add 2^(s-1) before the shift
                v = t[i].astype("int32")
                return (v + const(1 << (s - 1), "int32")) >> const(s, "int32") if s else v

            def body(*i):
                v = rounded(a, i, sx) + rounded(c, i, sy)
                return te_min(te_max(v, const(lo, "int32")), const(127, "int32")).astype("int8")
            return compute(a.shape, body, name=name), []
        self.steps.append(_Step(out, "cpu", (x, y), make))

    def max_pool(self, node) -> None:
        from ..te import compute, const, if_then_else, reduce_axis
        from ..te import max as te_max

        a = node.attrs
        (kh, kw), (sh, sw), (pt, pl, _, _) = a["kernel"], a["stride"], a["padding"]
        x, out = node.inputs[0], node.outputs[0]
        oh, ow = self.g.type_of(out).shape[2:]
        self.exp[out] = self.exp[x]

        def make(t, name=out):
            ry, rx = reduce_axis(kh, "py"), reduce_axis(kw, "px")
            h, w = t.shape[2], t.shape[3]

            def body(n, c, y, z, bb, k):
                iy, ix = y * sh + ry - pt, z * sw + rx - pl
                inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
                return te_max(if_then_else(inside, t[n, c, iy, ix, bb, k], const(-128, "int8")), axis=[ry, rx])
            return compute((t.shape[0], t.shape[1], oh, ow, t.shape[4], t.shape[5]), body, name=name), []
        self.steps.append(_Step(out, "cpu", (x,), make))

    def head(self, mean, dense) -> None:
        """mean over H, W then dense: an int32 sum and an int8 classifier; the host scales to float."""
        from ..te import compute, placeholder, reduce_axis
        from ..te import sum as te_sum

        x = mean.inputs[0]
        axes = tuple(a % 4 for a in (mean.attrs.get("axes") or ()))
        if sorted(axes) != [2, 3] or len(dense.inputs) < 3 or dense.inputs[1] not in self.g.constants:
            raise LoweringError(f"vta offload: the head must be a mean over H and W, a reshape and a dense layer "
                                f"with constant weights and bias; got mean axes {mean.attrs.get('axes')}")
        w, bias = self.g.constants[dense.inputs[1]], self.g.constants[dense.inputs[2]]
        f_w = _exponent(float(np.max(np.abs(w))))
        o, c = w.shape
        b = self.b
        op_ = -(-o // b) * b
        wq = np.zeros((op_, c), np.int8)
        wq[:o] = np.clip(np.round(w * 2.0 ** f_w), -127, 127).astype(np.int8)
        wq = np.ascontiguousarray(wq.reshape(op_ // b, b, c // b, b).transpose(0, 2, 1, 3))
        hw = int(np.prod(self.g.type_of(x).shape[2:]))
        self.head_scale = (2.0 ** -(self.exp[x] + f_w) / hw, np.asarray(bias, np.float64), o)

        def make(t, name=dense.outputs[0], wshape=wq.shape):
            wt = placeholder(wshape, "int8", f"{name}_w")
            ry, rx = reduce_axis(t.shape[2], "gy"), reduce_axis(t.shape[3], "gx")
            pooled = compute((t.shape[0], t.shape[1], t.shape[5]), lambda n, cc, k: te_sum(
                t[n, cc, ry, rx, 0, k].astype("int32"), axis=[ry, rx]), name=f"{name}_sum")
            rc, rk = reduce_axis(t.shape[1], "fc"), reduce_axis(t.shape[5], "fk")
            return compute((t.shape[0], wshape[0], wshape[2]), lambda n, oo, k: te_sum(
                pooled[n, rc, rk] * wt[oo, rc, k, rk].astype("int32"), axis=[rc, rk]), name=name), [wt]
        self.steps.append(_Step(dense.outputs[0], "cpu", (x,), make, [wq]))


def quantize(graph: Graph, calibration: list[np.ndarray], block: int = 16) -> _Quantizer:
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise LoweringError("vta offload: one input image and one output (logits) are supported")
    names = [graph.inputs[0]] + [v for n in graph.nodes if n.op != "constant" for v in n.outputs]
    ranges = dict.fromkeys(names, 0.0)
    for x in calibration:
        for v, y in zip(names, run_reference(graph.replace(outputs=names), [x])):
            ranges[v] = max(ranges[v], float(np.max(np.abs(y))))
    q = _Quantizer(graph, ranges, block)
    q.exp[graph.inputs[0]] = q.f_of(graph.inputs[0])
    nodes = [n for n in graph.nodes if n.op != "constant"]
    k = 0
    while k < len(nodes):
        n = nodes[k]
        if n.op == "conv2d":
            q.conv(n)
        elif n.op == "relu" and n.outputs[0] in q.fused:
            pass
        elif n.op == "add":
            q.add(n)
        elif n.op == "max_pool2d":
            q.max_pool(n)
        elif n.op == "mean" and k + 2 < len(nodes) and nodes[k + 1].op in ("reshape", "flatten") \
                and nodes[k + 2].op == "dense":
            q.head(n, nodes[k + 2])
            k += 2
        else:
            raise LoweringError(f"vta offload: node '{n.outputs[0]}' ({n.op}) is not supported; the flow takes "
                                f"conv2d, relu, add, max_pool2d and a mean -> reshape -> dense head")
        k += 1
    return q


class _EmbeddedStep:
    """A convolution whose input channels the GEMM block does not divide (the first layer's 3), on the
    accelerator through the embedding with the fewest simulated cycles (search/vta_embed.py): the graph's blocked
    activation is unblocked, gathered into the embedding's layout, convolved, gathered back and blocked."""

    def __init__(self, problem, weight, bias, epilogue, cfg, block: int):
        from ..search.vta_embed import EmbeddedConv, choose_embedding

        realization, tiling, self.tried = choose_embedding(problem, cfg, epilogue=epilogue)
        self.conv = EmbeddedConv(realization, weight, bias, epilogue, tiling)
        self.block, self.channels = block, problem.in_channels

    def __call__(self, x, _weight, _bias, out):
        n, cb, h, w, _, b = x.shape
        nchw = x[:, :, :, :, 0, :].transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :self.channels]
        out[...] = _blocked_act(self.conv(nchw), self.block)
        return out

    def stats(self):
        return self.conv.stats()

    @property
    def source(self) -> str:
        return self.conv.source


class VTAModule:
    """The quantized model: `module(x)` (float NCHW) -> float logits; `summary()`; `check(x)`."""

    def __init__(self, q: _Quantizer, graph: Graph, target):
        import tilewright as tw

        from ..te import placeholder

        self.q, self.graph, self.target, self.steps = q, graph, target, q.steps
        shapes = {graph.inputs[0]: _blocked_act(np.zeros(graph.type_of(graph.inputs[0]).shape, np.int8),
                                                q.b).shape}
        for st in self.steps:
            ins = [placeholder(shapes[v], "int8", f"{st.name}_in{k}") for k, v in enumerate(st.inputs)]
            out, params = st.make(*ins)
            shapes[st.name] = out.shape
            st.out_type = (out.shape, out.dtype.name)
            if st.embedded:
                st.kernel = _EmbeddedStep(*st.embedded, target.vta, q.b)
            else:
                st.kernel = tw.build([*ins, *params, out], target=target if st.device == "vta" else "cpu")

    def quantize_input(self, x: np.ndarray) -> np.ndarray:
        f = self.q.exp[self.graph.inputs[0]]
        return _blocked_act(np.clip(np.round(np.asarray(x, np.float64) * 2.0 ** f), -128, 127).astype(np.int8),
                            self.q.b)

    def run_int(self, x: np.ndarray) -> dict:
        vals = {self.graph.inputs[0]: self.quantize_input(x)}
        for st in self.steps:
            out = np.zeros(*st.out_type)
            t0 = time.perf_counter()
            st.kernel(*[vals[v] for v in st.inputs], *st.params, out)
            st.stats = {"seconds": time.perf_counter() - t0}
            if st.device == "vta":
                s = st.kernel.stats()
                st.stats.update(cycles=s.cycles, gemm_utilization=s.gemm_utilization)
            vals[st.name] = out
        return vals

    def __call__(self, x: np.ndarray) -> np.ndarray:
        acc = self.run_int(x)[self.steps[-1].name]
        scale, bias, o = self.q.head_scale
        return acc.reshape(acc.shape[0], -1)[:, :o] * scale + bias

    def check(self, x: np.ndarray) -> bool:
        """The int8 / int32 results bit for bit against the reference evaluator of the whole quantized graph."""
        from ..reference import evaluate
        from ..te import placeholder

        xin = self.quantize_input(x)
        whole = {self.graph.inputs[0]: placeholder(xin.shape, "int8", "image")}
        feed = {whole[self.graph.inputs[0]]: xin}
        for st in self.steps:
            out, params = st.make(*[whole[v] for v in st.inputs])
            feed.update(zip(params, st.params))
            whole[st.name] = out
        want = evaluate([whole[self.steps[-1].name]], feed)[0]
        return bool(np.array_equal(self.run_int(x)[self.steps[-1].name], want))

    def summary(self) -> str:
        lines = ["| layer | output (C x H x W) | device | cycles (simulated) | GEMM util | host s |",
                 "|---|---|---|---|---|---|"]
        for st in self.steps:
            s, sh = st.stats, st.out_type[0]
            dims = f"{sh[1] * sh[-1]} x {sh[2]} x {sh[3]}" if len(sh) == 6 else f"{sh[1] * sh[-1]}"
            device = st.device + (f" ({st.kernel.conv.realization.mapping.label})" if st.embedded else "")
            lines.append(f"| {st.name} | {dims} | {device} | {s.get('cycles', '')} | "
                         f"{'%.0f%%' % (100 * s['gemm_utilization']) if 'cycles' in s else ''} | "
                         f"{s.get('seconds', 0):.4f} |")
        total = sum(st.stats.get("cycles", 0) for st in self.steps)
        n = sum(st.device == "vta" for st in self.steps)
        lines.append(f"\n{n} of {len(self.steps)} layers on the accelerator: {total:,} cycles simulated "
                     f"({total / (self.target.vta.clock_mhz * 1e3):.2f} ms at {self.target.vta.clock_mhz:g} MHz)")
        return "\n".join(lines)


def compile_for_vta(graph: Graph, target, calibration) -> VTAModule:
    cal = [np.asarray(c, np.float32) for c in (calibration if isinstance(calibration, (list, tuple))
                                               else [calibration])]
    if target.vta.batch != 1 or target.vta.block_in != target.vta.block_out:
        raise LoweringError(f"vta offload: needs a batch-1 core with equal in/out blocks, got {target.vta.block}")
    return VTAModule(quantize(graph, cal, target.vta.block_in), graph, target)


__all__ = ["VTAModule", "compile_for_vta", "quantize"]
