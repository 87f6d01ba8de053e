"""Hand-built graphs and partitions for the lowering/module/export tests (types
filled in by hand, so these tests need neither shape inference nor fusion), and
a PyTorch reference of the same graphs."""

from __future__ import annotations

import numpy as np

from tilewright.graph import OPS, Graph, Group, Node, Partition, TensorType


class Builder:
    def __init__(self, name: str = "g", seed: int = 0):
        self.name, self.nodes, self.types, self.consts, self.inputs = name, [], {}, {}, []
        self.rng = np.random.default_rng(seed)

    def input(self, name: str, shape) -> str:
        self.inputs.append(name)
        self.types[name] = TensorType(shape)
        return name

    def const(self, name: str, shape=None, array=None) -> str:
        arr = (self.rng.standard_normal(shape) * 0.5 if array is None else np.asarray(array)).astype(np.float32)
        self.consts[name] = arr
        self.types[name] = TensorType(arr.shape)
        self.nodes.append(Node("constant", (), (name,)))
        return name

    def op(self, op: str, inputs, out: str, out_shape, **attrs) -> str:
        self.nodes.append(Node(op, tuple(inputs), (out,), attrs))
        self.types[out] = TensorType(out_shape)
        return out

    def graph(self, *outputs) -> Graph:
        g = Graph(self.nodes, self.inputs, outputs, self.types, self.consts, self.name)
        g.check()
        return g


def make_group(graph: Graph, name: str, node_outputs) -> Group:
    nodes = [graph.producer(v) for v in node_outputs]
    written = {v for n in nodes for v in n.outputs}
    inputs = []
    for n in nodes:
        for v in n.inputs:
            if v not in written and v not in inputs:
                inputs.append(v)
    ids = {id(n) for n in nodes}
    outputs = [v for v in sorted(written, key=list(node_outputs).index)
               if v in graph.outputs or any(id(c) not in ids for c in graph.consumers(v))]
    anchor = max(nodes, key=lambda n: OPS[n.op].pattern)
    return Group(name, tuple(nodes), tuple(inputs), tuple(outputs), anchor, OPS[anchor.op].pattern)


def partition(graph: Graph, groups: dict[str, list[str]] | None = None) -> Partition:
    """Groups as given (name -> the output values of its nodes), else one group per non-constant node."""
    if groups is None:
        groups = {f"g{i}_{n.op}": [n.outputs[0]] for i, n in enumerate(graph.nodes) if n.op != "constant"}
    return Partition(graph, tuple(make_group(graph, k, v) for k, v in groups.items()))


# --- models ---

def conv_bias_relu(n=1, c=3, h=8, w=8, o=4) -> Graph:
    b = Builder("conv_relu")
    x = b.input("x", (n, c, h, w))
    wt, bias = b.const("w", (o, c, 3, 3)), b.const("b", (o,))
    y = b.op("conv2d", [x, wt, bias], "conv", (n, o, h, w), padding=(1, 1, 1, 1))
    b.op("relu", [y], "out", (n, o, h, w))
    return b.graph("out")


def residual_block(c=4, h=6, w=6) -> Graph:
    b = Builder("residual")
    x = b.input("x", (1, c, h, w))
    w1, b1, w2, b2 = b.const("w1", (c, c, 3, 3)), b.const("b1", (c,)), b.const("w2", (c, c, 3, 3)), b.const("b2", (c,))
    y = b.op("conv2d", [x, w1, b1], "c1", (1, c, h, w), padding=(1, 1, 1, 1))
    y = b.op("relu", [y], "r1", (1, c, h, w))
    y = b.op("conv2d", [y, w2, b2], "c2", (1, c, h, w), padding=(1, 1, 1, 1))
    y = b.op("add", [y, x], "sum", (1, c, h, w))
    y = b.op("relu", [y], "r2", (1, c, h, w))
    y = b.op("mean", [y], "pool", (1, c, 1, 1), axes=(2, 3), keepdims=True)
    b.op("reshape", [y], "flat", (1, c), shape=(1, c))
    return b.graph("flat")


RESIDUAL_GROUPS = {"conv1": ["c1", "r1"], "conv2": ["c2", "sum", "r2"], "pool": ["pool"], "flat": ["flat"]}


def dense_gelu(m=3, k=8, n=5) -> Graph:
    b = Builder("mlp")
    x = b.input("x", (m, k))
    wt, bias = b.const("w", (n, k)), b.const("b", (n,))
    y = b.op("dense", [x, wt, bias], "fc", (m, n))
    b.op("gelu", [y], "out", (m, n))
    return b.graph("out")


def attention(s=4, d=8, heads=2) -> Graph:
    dh = d // heads
    b = Builder("attention")
    x = b.input("x", (1, s, d))
    wq, wk, wv = b.const("wq", (d, d)), b.const("wk", (d, d)), b.const("wv", (d, d))
    lw, lb = b.const("ln_w", (d,)), b.const("ln_b", (d,))
    scale = b.const("scale", array=np.float32(1 / np.sqrt(dh)))
    vals = {}
    for nm, wt in (("q", wq), ("k", wk), ("v", wv)):
        y = b.op("dense", [x, wt], nm, (1, s, d))
        y = b.op("reshape", [y], nm + "_h", (1, s, heads, dh), shape=(1, s, heads, dh))
        dims = (0, 2, 3, 1) if nm == "k" else (0, 2, 1, 3)
        vals[nm] = b.op("permute", [y], nm + "_t", tuple((1, s, heads, dh)[i] for i in dims), dims=dims)
    sc = b.op("matmul", [vals["q"], vals["k"]], "scores", (1, heads, s, s))
    sc = b.op("mul", [sc, scale], "scaled", (1, heads, s, s))
    p = b.op("softmax", [sc], "probs", (1, heads, s, s), axis=-1)
    ctx = b.op("matmul", [p, vals["v"]], "ctx", (1, heads, s, dh))
    ctx = b.op("permute", [ctx], "ctx_t", (1, s, heads, dh), dims=(0, 2, 1, 3))
    ctx = b.op("reshape", [ctx], "ctx_m", (1, s, d), shape=(1, s, d))
    y = b.op("add", [ctx, x], "res", (1, s, d))
    b.op("layer_norm", [y, lw, lb], "out", (1, s, d), axes=1, eps=1e-5)
    return b.graph("out")


def passthrough() -> Graph:
    """Outputs that are a view, a graph input and a value also read by that view."""
    b = Builder("passthrough")
    x = b.input("x", (2, 3))
    c = b.const("c", (3,))
    y = b.op("add", [x, c], "y", (2, 3))
    b.op("reshape", [y], "flat", (6,), shape=(6,))
    return b.graph("flat", "x", "y")


PASSTHROUGH_GROUPS = {"add": ["y"], "view": ["flat"]}


# --- a PyTorch reference of the ops above ---

def torch_reference(graph: Graph, inputs) -> list[np.ndarray]:
    env = torch_values(graph, inputs)
    return [env[v] for v in graph.outputs]


def torch_values(graph: Graph, inputs) -> dict[str, np.ndarray]:
    """Every value of `graph` computed by PyTorch."""
    import torch

    env = {k: torch.from_numpy(np.asarray(v)) for k, v in graph.constants.items()}
    env.update({k: torch.from_numpy(np.asarray(a)) for k, a in zip(graph.inputs, inputs)})
    for n in graph.nodes:
        if n.op != "constant":
            env[n.outputs[0]] = _torch_op(n, [env[v] for v in n.inputs])
    return {k: v.numpy() for k, v in env.items()}


def random_inputs(graph: Graph, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(graph.type_of(v).shape).astype(np.float32) for v in graph.inputs]


def _torch_op(n, a):
    import torch
    import torch.nn.functional as F

    if n.op in ("conv2d", "max_pool2d"):
        top, left, bottom, right = n.attr("padding", (0, 0, 0, 0))
        x = F.pad(a[0], (left, right, top, bottom), value=0.0 if n.op == "conv2d" else -np.inf)
        if n.op == "max_pool2d":
            return F.max_pool2d(x, n.attr("kernel"), n.attr("stride"))
        return F.conv2d(x, a[1], a[2] if len(a) > 2 else None, n.attr("stride", (1, 1)), 0,
                        n.attr("dilation", (1, 1)), n.attr("groups", 1))
    if n.op == "dense":
        return F.linear(a[0], a[1], a[2] if len(a) > 2 else None)
    if n.op == "layer_norm":
        k = n.attr("axes", 1)
        return F.layer_norm(a[0], a[0].shape[-k:], *(a[1:] + [None, None])[:2], eps=n.attr("eps", 1e-5))
    if n.op == "mean":
        return a[0].mean(dim=n.attr("axes"), keepdim=n.attr("keepdims", True))
    if n.op == "softmax":
        return torch.softmax(a[0], n.attr("axis", -1))
    if n.op in ("reshape", "permute"):
        return a[0].reshape(n.attr("shape")) if n.op == "reshape" else a[0].permute(n.attr("dims"))
    if n.op == "clip":
        return torch.clamp(a[0], n.attr("min"), n.attr("max"))
    if n.op == "concat":
        return torch.cat(a, n.attr("axis", 0))
    if n.op == "batch_norm":
        return F.batch_norm(a[0], a[3], a[4], a[1], a[2], eps=n.attr("eps", 1e-5))
    unary = {"relu": torch.relu, "gelu": F.gelu, "sigmoid": torch.sigmoid}
    if n.op in unary:
        return unary[n.op](a[0])
    return {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "matmul": torch.matmul}[n.op](a[0], a[1])


def view_output_read_later() -> Graph:
    """A view that is a graph output and is also read by a later kernel (flatten then a head)."""
    b = Builder("view_read_later")
    x = b.input("x", (2, 3))
    c = b.const("c", (3,))
    y = b.op("add", [x, c], "y", (2, 3))
    flat = b.op("reshape", [y], "flat", (6,), shape=(6,))
    b.op("relu", [flat], "head", (6,))
    return b.graph("flat", "head")


VIEW_READ_LATER_GROUPS = {"add": ["y"], "view": ["flat"], "head": ["head"]}


def random_array(rng, *shape, positive=False) -> np.ndarray:
    a = rng.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if positive else a


def typed_graph(nodes, inputs, outputs, consts) -> Graph:
    """Constant nodes first for every array in `consts`, then `nodes` given as (op, inputs, output, attrs),
    types inferred."""
    from tilewright.graph.infer import infer_types

    ns = [Node("constant", (), (v,)) for v in consts]
    ns += [Node(op, ins, (out,), attrs or {}) for op, ins, out, attrs in nodes]
    return infer_types(Graph(ns, list(inputs), outputs, {v: TensorType(s) for v, s in inputs.items()}, consts))


def slices_and_concat(name: str = "views", shape=(1, 24, 4, 4), first=(8, 24), second=(8, 24)) -> Graph:
    """Contiguous slices (channels `first` of the input, `second` of a concat) and a concat of two kernels'
    outputs: every one a view (graph/views.py), so only relu, the add and the final mul run kernels."""
    n, _, h, w = shape
    kept, out = first[1] - first[0], second[1] - second[0]
    b = Builder(name)
    x = b.input("x", shape)
    xs = b.op("slice", [x], "xs", (n, kept, h, w), begin=(0, first[0], 0, 0), end=(n, first[1], h, w),
              step=(1, 1, 1, 1))
    a = b.op("relu", [xs], "a", (n, kept, h, w))
    c = b.op("add", [xs, b.const("k", (1, kept, 1, 1))], "c", (n, kept, h, w))
    cat = b.op("concat", [a, c], "cat", (n, 2 * kept, h, w), axis=1)
    s = b.op("slice", [cat], "s", (n, out, h, w), begin=(0, second[0], 0, 0), end=(n, second[1], h, w),
             step=(1, 1, 1, 1))
    b.op("mul", [s, s], "out", (n, out, h, w))
    return b.graph("out")
