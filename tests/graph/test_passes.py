"""Graph passes on small hand-built graphs: each keeps the outputs (checked with the NumPy oracle) and does its job."""

import numpy as np
import pytest
from graph_cases import random_array, typed_graph

from tilewright.graph import TensorType
from tilewright.graph.canonicalize import fold_bias_add, recognize_gelu
from tilewright.graph.cleanup import eliminate_common_subexpressions, eliminate_dead_code
from tilewright.graph.fold_batch_norm import fold_batch_norm
from tilewright.graph.fold_constants import fold_constants
from tilewright.graph.fold_pad import fold_pad_into_conv
from tilewright.graph.optimize import optimize
from tilewright.graph.reference import run_reference
from tilewright.graph.simplify_reshape import simplify_reshapes

R = np.random.default_rng(3)


def arr(*shape, positive=False):
    return random_array(R, *shape, positive=positive)


graph = typed_graph


def same_outputs(before, after, tol=1e-4):
    xs = [arr(*before.types[v].shape) for v in before.inputs]
    for a, b in zip(run_reference(before, xs), run_reference(after, xs)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def ops(g):
    return [n.op for n in g.nodes if n.op != "constant"]


def bn_params(c):
    return {"g": arr(c), "b": arr(c), "m": arr(c), "v": arr(c, positive=True)}


def test_fold_constants_folds_exporter_weight_transforms():
    g = graph([("permute", ("wt",), "w", {"dims": (3, 0, 1, 2)}),
               ("reshape", ("b0",), "b", {"shape": (-1,)}),
               ("conv2d", ("x", "w", "b"), "y", {"padding": (1, 1, 1, 1)})],
              {"x": (1, 3, 6, 6)}, ["y"], {"wt": arr(3, 3, 3, 4), "b0": arr(1, 4)})
    f = fold_constants(g)
    f.check()
    assert ops(f) == ["conv2d"] and f.is_constant("w") and f.types["w"] == TensorType((4, 3, 3, 3))
    same_outputs(g, f)


def test_fold_constants_constant_output():
    g = graph([("add", ("a", "a"), "y", None)], {}, ["y"], {"a": arr(3)})
    f = fold_constants(g)
    assert [n.op for n in f.nodes] == ["constant", "constant"]
    np.testing.assert_array_equal(f.constants["y"], 2 * g.constants["a"])


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_conv(bias):
    consts = {"w": arr(4, 3, 3, 3), **bn_params(4)}
    ins = ("x", "w")
    if bias:
        consts["cb"] = arr(4)
        ins = ("x", "w", "cb")
    g = graph([("conv2d", ins, "c", {"stride": (2, 2)}),
               ("batch_norm", ("c", "g", "b", "m", "v"), "bn", {"eps": 1e-3}),
               ("relu", ("bn",), "y", None)], {"x": (2, 3, 9, 9)}, ["y"], consts)
    f = fold_batch_norm(g)
    f.check()
    assert ops(f) == ["conv2d", "relu"]
    conv = next(n for n in f.nodes if n.op == "conv2d")
    assert len(conv.inputs) == 3 and conv.outputs == ("bn",) and f.is_constant(conv.inputs[2])
    assert f.types["bn"] == g.types["bn"] and "c" not in f.types
    same_outputs(g, f)


def test_batch_norm_folds_into_dense():
    g = graph([("dense", ("x", "w"), "d", None), ("batch_norm", ("d", "g", "b", "m", "v"), "y", None)],
              {"x": (3, 5)}, ["y"], {"w": arr(4, 5), **bn_params(4)})
    f = fold_batch_norm(g)
    assert ops(f) == ["dense"]
    same_outputs(g, f)


def test_batch_norm_elsewhere_becomes_mul_add():
    # after a relu, and after a conv whose output is read twice: neither can fold into a layer
    g = graph([("relu", ("x",), "r", None),
               ("batch_norm", ("r", "g", "b", "m", "v"), "y1", None),
               ("conv2d", ("x", "w"), "c", None),
               ("batch_norm", ("c", "g", "b", "m", "v"), "bn2", None),
               ("add", ("bn2", "c"), "y2", None)],
              {"x": (1, 4, 5, 5)}, ["y1", "y2"], {"w": arr(4, 4, 1, 1), **bn_params(4)})
    f = fold_batch_norm(g)
    f.check()
    assert ops(f) == ["relu", "mul", "add", "conv2d", "mul", "add", "add"]
    scale = next(n for n in f.nodes if n.op == "mul").inputs[1]
    assert f.types[scale] == TensorType((4, 1, 1))
    same_outputs(g, f)


def test_fold_pad_into_conv():
    g = graph([("pad", ("x",), "p", {"pads": (0, 0, 0, 1, 0, 0, 1, 2)}),
               ("conv2d", ("p", "w"), "y", {"padding": (1, 1, 1, 1), "stride": (2, 2)}),
               ("pad", ("x",), "q", {"pads": (0, 0, 1, 1, 0, 0, 1, 1), "value": 1.0}),
               ("conv2d", ("q", "w"), "z", None)],
              {"x": (1, 3, 7, 7)}, ["y", "z"], {"w": arr(2, 3, 3, 3)})
    f = eliminate_dead_code(fold_pad_into_conv(g))
    f.check()
    assert ops(f) == ["conv2d", "pad", "conv2d"]  # a pad of ones stays
    assert f.nodes[1].attr("padding") == (1, 2, 2, 3)
    same_outputs(g, f)


def test_dead_code():
    g = graph([("relu", ("x",), "a", None), ("exp", ("x",), "dead", None), ("neg", ("dead",), "dead2", None),
               ("add", ("a", "k"), "y", None)], {"x": (3,), "unused": (2,)}, ["y"], {"k": arr(3), "kd": arr(3)})
    f = eliminate_dead_code(g)
    f.check()
    assert ops(f) == ["relu", "add"] and "kd" not in f.constants and f.inputs == ("x", "unused")
    assert "dead" not in f.types


def test_common_subexpressions():
    k = arr(3)
    g = graph([("relu", ("x",), "a", None), ("relu", ("x",), "b", None),
               ("add", ("a", "k1"), "c", None), ("add", ("b", "k2"), "d", None),
               ("clip", ("c",), "e", {"min": 0.0}), ("clip", ("d",), "f", {"min": 1.0}),
               ("mul", ("e", "f"), "y", None), ("relu", ("x",), "y2", None)],
              {"x": (3,)}, ["y", "y2"], {"k1": k, "k2": k.copy(), "k3": k + 1})
    f = eliminate_common_subexpressions(g)
    f.check()
    # one relu, one add (k1 == k2), two clips (different attrs), the relu writing output y2 kept
    assert ops(f) == ["relu", "add", "clip", "clip", "mul", "relu"]
    assert sorted(f.constants) == ["k1", "k3"]
    same_outputs(g, f)


def test_optimize_pipeline():
    consts = {"wt": arr(3, 3, 3, 4), **bn_params(4), "w2": arr(4, 4, 1, 1), "w3": arr(4, 4, 1, 1)}
    g = graph([("permute", ("wt",), "w", {"dims": (3, 0, 1, 2)}),
               ("pad", ("x",), "p", {"pads": (0, 0, 1, 1, 0, 0, 1, 1)}),
               ("conv2d", ("p", "w"), "c", None),
               ("batch_norm", ("c", "g", "b", "m", "v"), "bn", None),
               ("relu", ("bn",), "r", None),
               ("conv2d", ("r", "w2"), "c2", None),
               ("conv2d", ("r", "w3"), "unused", None),
               ("relu", ("bn",), "r_again", None),
               ("add", ("c2", "r_again"), "y", None)],
              {"x": (1, 3, 8, 8)}, ["y"], consts)
    f = optimize(g)
    assert ops(f) == ["conv2d", "relu", "conv2d", "add"]
    assert f.nodes[-1].inputs[1] == "r"
    assert all(v in f.types for n in f.nodes for v in n.outputs)
    same_outputs(g, f)


def test_simplify_reshapes_around_dense_and_matmul():
    # exporter style: view -> addmm -> view -> add, and bmm between views of 4-D heads
    g = graph([("reshape", ("x",), "x2", {"shape": (6, 8)}), ("dense", ("x2", "w", "b"), "d2", None),
               ("reshape", ("d2",), "d3", {"shape": (2, 3, 8)}), ("add", ("d3", "x"), "r", None),
               ("reshape", ("r",), "h", {"shape": (2, 3, 2, 4)}), ("permute", ("h",), "q", {"dims": (0, 2, 1, 3)}),
               ("permute", ("h",), "k0", {"dims": (0, 2, 1, 3)}), ("permute", ("k0",), "k", {"dims": (0, 1, 3, 2)}),
               ("reshape", ("q",), "q3", {"shape": (4, 3, 4)}), ("reshape", ("k",), "k3", {"shape": (4, 4, 3)}),
               ("matmul", ("q3", "k3"), "s3", None), ("reshape", ("s3",), "s", {"shape": (2, 2, 3, 3)}),
               ("softmax", ("s",), "y", None),
               ("reshape", ("x",), "x4", {"shape": (2, 3, 8)}), ("relu", ("x4",), "y2", None)],
              {"x": (2, 3, 8)}, ["y", "y2"], {"w": arr(8, 8), "b": arr(8)})
    f = simplify_reshapes(g)
    f.check()
    assert ops(f) == ["dense", "add", "reshape", "permute", "permute", "matmul", "softmax", "relu"]
    dense, matmul = (n for n in f.nodes if n.op in ("dense", "matmul"))
    assert dense.inputs[0] == "x" and f.types[dense.outputs[0]].shape == (2, 3, 8)
    assert f.types[matmul.outputs[0]].shape == (2, 2, 3, 3)
    assert next(n for n in f.nodes if n.op == "permute" and n.outputs[0] == "k").attr("dims") == (0, 2, 3, 1)
    same_outputs(g, f)


def test_simplify_reshapes_keeps_outputs_and_broadcasts():
    # a reshape writing a graph output stays; matmul with broadcast batch dims is left alone
    g = graph([("reshape", ("x",), "y", {"shape": (2, 3, 4)}),
               ("reshape", ("x",), "a", {"shape": (2, 3, 4)}), ("reshape", ("z",), "b", {"shape": (1, 4, 5)}),
               ("matmul", ("a", "b"), "m", None)], {"x": (2, 3, 4), "z": (4, 5)}, ["y", "m"], {})
    f = simplify_reshapes(g)
    assert ops(f) == ["reshape", "reshape", "matmul"]
    same_outputs(g, f)


def scalar(v):
    return np.float32(v).reshape(())


@pytest.mark.parametrize("form", ["x*p*h", "x*h*p", "p*h*x"])
def test_recognize_gelu(form):
    consts = {"r2": scalar(np.sqrt(2)), "one": scalar(1.0), "h": scalar(0.5), "ir2": scalar(1 / np.sqrt(2))}
    head = [("div", ("x", "r2"), "u", None)] if form != "p*h*x" else [("mul", ("ir2", "x"), "u", None)]
    head += [("erf", ("u",), "e", None), ("add", ("one", "e"), "p", None)]
    tail = {"x*p*h": [("mul", ("x", "p"), "m", None), ("mul", ("m", "h"), "y", None)],
            "x*h*p": [("mul", ("x", "h"), "m", None), ("mul", ("m", "p"), "y", None)],
            "p*h*x": [("mul", ("p", "h"), "m", None), ("mul", ("m", "x"), "y", None)]}[form]
    g = graph(head + tail + [("relu", ("y",), "z", None)], {"x": (4, 5)}, ["z"], consts)
    f = recognize_gelu(g)
    f.check()
    assert ops(f) == ["gelu", "relu"] and f.nodes[-2].outputs == ("y",) and f.nodes[-2].inputs == ("x",)
    same_outputs(g, f, 1e-6)


def test_gelu_lookalikes_stay():
    consts = {"r2": scalar(2.0), "one": scalar(1.0), "h": scalar(0.5)}
    g = graph([("div", ("x", "r2"), "u", None), ("erf", ("u",), "e", None), ("add", ("one", "e"), "p", None),
               ("mul", ("x", "p"), "m", None), ("mul", ("m", "h"), "y", None)], {"x": (4,)}, ["y"], consts)
    assert ops(recognize_gelu(g)) == ops(g)


def test_fold_bias_add():
    g = graph([("dense", ("x", "w"), "d", None), ("add", ("d", "b"), "y", None),
               ("conv2d", ("c", "wc", "bc"), "k", None), ("add", ("bk", "k"), "z", None),
               ("conv2d", ("c", "wc"), "k2", None), ("add", ("k2", "full"), "z2", None)],
              {"x": (2, 3, 5), "c": (1, 2, 4, 4)}, ["y", "z", "z2"],
              {"w": arr(6, 5), "b": arr(6), "wc": arr(3, 2, 1, 1), "bc": arr(3), "bk": arr(1, 3, 1, 1),
               "full": arr(3, 4, 4)})
    f = fold_bias_add(g)
    f.check()
    assert ops(f) == ["dense", "conv2d", "conv2d", "add"]  # a bias varying over H and W is no conv bias
    assert [n.outputs for n in f.nodes if n.op in ("dense", "conv2d")] == [("y",), ("z",), ("k2",)]
    same_outputs(g, f)


@pytest.mark.parametrize("name", ["mobilenet_v2", "bert_layer"])
def test_optimize_in_tree_models(name):
    """Reduced in-tree models through the torch frontend: optimize keeps PyTorch's outputs and folds every BN."""
    torch = pytest.importorskip("torch")
    from tilewright.graph.frontend import from_torch
    from tilewright.models import MODELS

    spec = MODELS[name]
    model, x = spec.build(reduced=True).eval(), spec.example_input(reduced=True)
    with torch.no_grad():
        ref = model(x).numpy()
    g = optimize(from_torch(model, (x,)))
    assert "batch_norm" not in ops(g) and "mul" not in ops(g)
    if name == "bert_layer":  # no flattening views left around linear layers: the only reshapes split/merge heads
        views = [n for n in g.nodes if n.op == "reshape"]
        assert len(views) == 4 and all(g.types[n.inputs[0]].shape[-1] != g.types[n.outputs[0]].shape[-1]
                                       for n in views)
    (y,) = run_reference(g, [x.numpy()])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
