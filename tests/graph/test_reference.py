"""The NumPy graph oracle against torch.nn.functional, op by op."""

import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tilewright.errors import EvaluationError
from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.infer import infer_types
from tilewright.graph.reference import erf, evaluate_node, run_reference


def run_op(op, arrays, attrs=None, const_from=1):
    """One node over inputs x0 (a graph input) and constants for the rest; returns the output and its inferred type."""
    names = [f"x{i}" for i in range(len(arrays))]
    nodes = [Node("constant", (), (v,)) for v in names[const_from:]]
    nodes.append(Node(op, names, ("y",), attrs or {}))
    consts = {v: a for v, a in zip(names[const_from:], arrays[const_from:])}
    types = {v: TensorType(a.shape, a.dtype.name) for v, a in zip(names[:const_from], arrays[:const_from])}
    g = infer_types(Graph(nodes, names[:const_from], ["y"], types, consts))
    (y,) = run_reference(g, list(arrays[:const_from]))
    assert y.shape == g.types["y"].shape, (y.shape, g.types["y"])
    assert y.dtype == np.dtype(g.types["y"].dtype)
    return y


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def close(y, ref, tol=1e-5):
    np.testing.assert_allclose(y, ref.numpy() if isinstance(ref, torch.Tensor) else ref, rtol=tol, atol=tol)


@pytest.fixture
def r():
    return np.random.default_rng(1)


def randn(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, (0, 0, 0, 0), 1, 1), (2, (1, 1, 1, 1), 1, 1), (1, (1, 2, 0, 1), 2, 1), (2, (1, 1, 1, 1), 1, 4),
    (1, (1, 1, 1, 1), 1, 8),
])
def test_conv2d(r, stride, padding, dilation, groups):
    x, w, b = randn(r, 2, 8, 9, 10), randn(r, 16, 8 // groups, 3, 3), randn(r, 16)
    y = run_op("conv2d", [x, w, b], {"stride": (stride, stride), "padding": padding, "dilation": (dilation,) * 2,
                                    "groups": groups})
    pt, pl, pb, pr = padding
    ref = F.conv2d(F.pad(t(x), (pl, pr, pt, pb)), t(w), t(b), stride, 0, dilation, groups)
    close(y, ref, 1e-4)


def test_dense_matmul_broadcast(r):
    x, w, b = randn(r, 2, 5, 7), randn(r, 3, 7), randn(r, 3)
    close(run_op("dense", [x, w, b]), F.linear(t(x), t(w), t(b)))
    a, bb = randn(r, 2, 1, 4, 6), randn(r, 3, 6, 5)
    close(run_op("matmul", [a, bb], const_from=2), torch.matmul(t(a), t(bb)))
    v = randn(r, 6)
    close(run_op("matmul", [a, v], const_from=2), torch.matmul(t(a), t(v)))


@pytest.mark.parametrize("ceil", [False, True])
def test_pools(r, ceil):
    x = randn(r, 1, 3, 10, 11)
    attrs = {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": ceil}
    close(run_op("max_pool2d", [x], attrs), F.max_pool2d(t(x), 3, 2, 1, ceil_mode=ceil))
    close(run_op("max_pool2d", [x], {**attrs, "dilation": (2, 2)}),
          F.max_pool2d(t(x), 3, 2, 1, dilation=2, ceil_mode=ceil))
    for inc in (True, False):
        close(run_op("avg_pool2d", [x], {**attrs, "count_include_pad": inc}),
              F.avg_pool2d(t(x), 3, 2, 1, ceil_mode=ceil, count_include_pad=inc))
    close(run_op("avg_pool2d", [x], {"kernel": 2}), F.avg_pool2d(t(x), 2))


def test_norms_and_reductions(r):
    x = randn(r, 2, 4, 5, 6)
    p = [randn(r, 4), randn(r, 4), randn(r, 4), np.abs(randn(r, 4)) + 0.5]
    close(run_op("batch_norm", [x, *p], {"eps": 1e-3}),
          F.batch_norm(t(x), t(p[2]), t(p[3]), t(p[0]), t(p[1]), False, 0.0, 1e-3))
    s = randn(r, 2, 3, 8)
    lw, lb = randn(r, 3, 8), randn(r, 3, 8)
    close(run_op("layer_norm", [s, lw, lb], {"axes": 2}), F.layer_norm(t(s), (3, 8), t(lw), t(lb)))
    close(run_op("layer_norm", [s]), F.layer_norm(t(s), (8,)))
    close(run_op("softmax", [s], {"axis": 1}), F.softmax(t(s), dim=1))
    close(run_op("mean", [x], {"axes": (2, 3)}), t(x).mean((2, 3), keepdim=True))
    close(run_op("mean", [x], {"axes": -1, "keepdims": False}), t(x).mean(-1))


def test_elementwise(r):
    x = randn(r, 3, 50) * 4
    close(run_op("relu", [x]), F.relu(t(x)))
    close(run_op("sigmoid", [x]), torch.sigmoid(t(x)))
    close(run_op("silu", [x]), F.silu(t(x)))
    close(run_op("hardswish", [x]), F.hardswish(t(x)))
    close(run_op("tanh", [x]), torch.tanh(t(x)))
    close(run_op("leaky_relu", [x], {"alpha": 0.1}), F.leaky_relu(t(x), 0.1))
    close(run_op("gelu", [x]), F.gelu(t(x)))
    close(run_op("gelu", [x], {"approximate": "tanh"}), F.gelu(t(x), approximate="tanh"))
    close(run_op("clip", [x], {"min": 0.0, "max": 6.0}), F.relu6(t(x)))
    close(run_op("clip", [x], {"max": 1.0}), t(x).clamp(max=1.0))
    close(run_op("erf", [x]), torch.erf(t(x)))
    y = randn(r, 50)
    for op, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
                   ("maximum", torch.maximum), ("minimum", torch.minimum)]:
        close(run_op(op, [x, y], const_from=2), fn(t(x), t(y)))
    close(run_op("pow", [np.abs(x), np.float32(2.0).reshape(())], const_from=2), t(np.abs(x)) ** 2)


def test_erf_accuracy():
    xs = np.linspace(-7, 7, 20001)
    ref = np.array([math.erf(v) for v in xs])
    assert np.max(np.abs(erf(xs) - ref)) < 1e-13


def test_layout_ops(r):
    x = randn(r, 2, 3, 4, 5)
    close(run_op("reshape", [x], {"shape": (2, -1, 5)}), t(x).reshape(2, -1, 5))
    close(run_op("permute", [x], {"dims": (0, 2, 3, 1)}), t(x).permute(0, 2, 3, 1))
    close(run_op("pad", [x], {"pads": (0, 0, 1, 2, 0, 0, 3, 1), "value": 0.5}),
          F.pad(t(x), (2, 1, 1, 3), value=0.5))
    close(run_op("pad", [x], {"pads": (0, 0, -1, 0, 0, 0, 0, 1)}), F.pad(t(x), (0, 1, -1, 0)))
    y = randn(r, 2, 2, 4, 5)
    close(run_op("concat", [x, y], {"axis": 1}, const_from=2), torch.cat([t(x), t(y)], 1))


def test_evaluate_node_and_errors(r):
    n = Node("add", ("a", "b"), ("c",))
    (y,) = evaluate_node(n, {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)})
    assert y.tolist() == [2, 2, 2]
    with pytest.raises(EvaluationError, match="inputs \\['b'\\]"):
        evaluate_node(n, {"a": np.ones(3)})
    g = Graph([n], ["a", "b"], ["c"], {"a": TensorType((3,)), "b": TensorType((3,))})
    with pytest.raises(EvaluationError, match="input 'a' has shape"):
        run_reference(g, [np.ones(4), np.ones(3)])
    with pytest.raises(EvaluationError, match="takes 2 inputs"):
        run_reference(g, [np.ones(3)])


def test_resnet_block_speed(r):
    """A ResNet-18-sized stack of convs at 64x64 stays fast (the oracle of every model test)."""
    x = randn(r, 1, 3, 64, 64)
    start = time.perf_counter()
    y = run_op("conv2d", [x, randn(r, 64, 3, 7, 7)], {"stride": (2, 2), "padding": (3, 3, 3, 3)})
    for c_in, c_out, s in [(64, 64, 1)] * 4 + [(64, 128, 2)] + [(128, 128, 1)] * 3 + [(128, 256, 2)] + \
            [(256, 256, 1)] * 3 + [(256, 512, 2)] + [(512, 512, 1)] * 3:
        y = run_op("conv2d", [y, randn(r, c_out, c_in, 3, 3) * 0.05], {"stride": (s, s), "padding": (1, 1, 1, 1)})
    assert y.shape == (1, 512, 4, 4)
    assert time.perf_counter() - start < 3.0
