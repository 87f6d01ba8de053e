"""Fusion: TVM's rules on a ResNet residual block, a transformer layer and small edge cases."""

import numpy as np
import pytest
from graph_cases import random_array, typed_graph

from tilewright.graph import Pattern
from tilewright.graph.fusion import fuse
from tilewright.graph.optimize import optimize
from tilewright.graph.reference import evaluate_node, run_reference

R = np.random.default_rng(5)


def arr(*shape, positive=False):
    return random_array(R, *shape, positive=positive)


graph = typed_graph


def run_groups(p):
    """Runs the partition group by group, each reading only its declared inputs: checks the groups are in
    topological order, that inputs and outputs are complete, and returns the graph outputs."""
    g = p.graph
    xs = {v: arr(*g.types[v].shape) for v in g.inputs}
    env = {**xs, **g.constants}
    members = [id(n) for grp in p.groups for n in grp.nodes]
    assert sorted(members) == sorted(id(n) for n in g.nodes if n.op != "constant")
    for grp in p.groups:
        local = {v: env[v] for v in grp.inputs}
        for n in grp.nodes:
            assert n.op != "constant"
            (local[n.outputs[0]],) = evaluate_node(n, [local[v] for v in n.inputs])
        env.update({v: local[v] for v in grp.outputs})
    for a, b in zip([env[v] for v in g.outputs], run_reference(g, xs)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def summary(p):
    return [(grp.name, grp.pattern, grp.anchor.op) for grp in p.groups]


def bn(c):
    return [arr(c), arr(c), arr(c), arr(c, positive=True)]


def residual_block(c=8):
    consts = {"w1": arr(c, c, 3, 3), "w2": arr(c, c, 3, 3)}
    for i in (1, 2):
        consts.update(zip([f"g{i}", f"b{i}", f"m{i}", f"v{i}"], bn(c)))
    pad = {"padding": (1, 1, 1, 1)}
    return graph([("conv2d", ("x", "w1"), "c1", pad), ("batch_norm", ("c1", "g1", "b1", "m1", "v1"), "n1", None),
                  ("relu", ("n1",), "r1", None),
                  ("conv2d", ("r1", "w2"), "c2", pad), ("batch_norm", ("c2", "g2", "b2", "m2", "v2"), "n2", None),
                  ("add", ("n2", "x"), "s", None), ("relu", ("s",), "y", None)],
                 {"x": (1, c, 6, 6)}, ["y"], consts)


def test_residual_block_after_optimize():
    p = fuse(optimize(residual_block()))
    assert summary(p) == [("g0_conv2d_relu", Pattern.COMPLEX, "conv2d"),
                          ("g1_conv2d_add_relu", Pattern.COMPLEX, "conv2d")]
    g0, g1 = p.groups
    assert g0.outputs == ("r1",) and g1.outputs == ("y",)
    assert g1.inputs[0] == "r1" and "x" in g1.inputs and all(p.graph.is_constant(v) for v in g0.inputs[1:])
    run_groups(p)


def test_residual_block_unfolded_batch_norm():
    p = fuse(residual_block())
    assert [[n.op for n in grp.nodes] for grp in p.groups] == [
        ["conv2d", "batch_norm", "relu"], ["conv2d", "batch_norm", "add", "relu"]]
    run_groups(p)


def test_chain_stops_at_shared_or_output_values():
    # relu's output is read twice and c2's is a graph output: neither is fused through
    g = graph([("conv2d", ("x", "w"), "c", None), ("relu", ("c",), "r", None), ("sigmoid", ("r",), "a", None),
               ("tanh", ("r",), "b", None), ("add", ("a", "b"), "s", None),
               ("conv2d", ("s", "w2"), "c2", None), ("relu", ("c2",), "y", None)],
              {"x": (1, 3, 5, 5)}, ["c2", "y"], {"w": arr(3, 3, 1, 1), "w2": arr(3, 3, 1, 1)})
    p = fuse(g)
    assert [[n.op for n in grp.nodes] for grp in p.groups] == [
        ["conv2d", "relu"], ["sigmoid"], ["tanh", "add"], ["conv2d"], ["relu"]]
    assert p.groups[1].pattern == Pattern.INJECTIVE and p.groups[3].outputs == ("c2",)
    run_groups(p)


def test_views_pools_and_pads():
    g = graph([("pad", ("x",), "p", {"pads": (0, 0, 1, 1, 0, 0, 1, 1)}), ("conv2d", ("p", "w"), "c", None),
               ("relu", ("c",), "r", None), ("max_pool2d", ("r",), "mp", {"kernel": 2}),
               ("mean", ("mp",), "m", {"axes": (2, 3)}), ("reshape", ("m",), "f", {"shape": (1, -1)}),
               ("dense", ("f", "wd", "bd"), "y", None)],
              {"x": (1, 3, 8, 8)}, ["y"], {"w": arr(4, 3, 3, 3), "wd": arr(5, 4), "bd": arr(5)})
    p = fuse(g)
    assert [grp.name for grp in p.groups] == ["g0_conv2d_relu", "g1_max_pool2d", "g2_mean", "g3_reshape",
                                              "g4_dense"]
    assert p.groups[0].nodes[0].attr("padding") == (1, 1, 1, 1) and "p" not in p.graph.types
    assert p.groups[3].is_view and not p.groups[0].is_view
    run_groups(p)


def test_injective_chain_into_reduction():
    g = graph([("add", ("x", "k"), "a", None), ("permute", ("a",), "t", {"dims": (0, 2, 1)}),
               ("softmax", ("t",), "s", None), ("mul", ("s", "k2"), "y", None)],
              {"x": (2, 3, 4)}, ["y"], {"k": arr(4), "k2": arr(3)})
    p = fuse(g)
    assert summary(p) == [("g0_add_permute_softmax_mul", Pattern.REDUCTION, "softmax")]
    run_groups(p)


def transformer_layer(t=8, d=16, heads=2):
    hd = d // heads
    consts = {f"w{n}": arr(d, d) * 0.3 for n in "qkvo"}
    consts.update({f"b{n}": arr(d) for n in "qkvo"})
    consts.update({"scale": np.float32(np.sqrt(hd)).reshape(()), "lw": arr(d), "lb": arr(d), "w1": arr(4 * d, d),
                   "b1": arr(4 * d)})
    nodes = []
    for n, dims in (("q", (0, 2, 1, 3)), ("k", (0, 2, 3, 1)), ("v", (0, 2, 1, 3))):
        nodes += [("dense", ("x", f"w{n}", f"b{n}"), f"{n}_d", None),
                  ("reshape", (f"{n}_d",), f"{n}_r", {"shape": (1, t, heads, hd)}),
                  ("permute", (f"{n}_r",), f"{n}_h", {"dims": dims})]
    nodes += [("matmul", ("q_h", "k_h"), "att", None), ("div", ("att", "scale"), "att_s", None),
              ("softmax", ("att_s",), "p", {"axis": -1}), ("matmul", ("p", "v_h"), "ctx", None),
              ("permute", ("ctx",), "ctx_t", {"dims": (0, 2, 1, 3)}),
              ("reshape", ("ctx_t",), "ctx_r", {"shape": (1, t, d)}),
              ("dense", ("ctx_r", "wo", "bo"), "o", None), ("add", ("o", "x"), "res", None),
              ("layer_norm", ("res", "lw", "lb"), "ln", None),
              ("dense", ("ln", "w1", "b1"), "h", None), ("gelu", ("h",), "y", None)]
    return graph(nodes, {"x": (1, t, d)}, ["y"], consts)


def test_transformer_layer():
    p = fuse(optimize(transformer_layer()))
    assert [grp.name for grp in p.groups] == [
        "g0_dense", "g1_reshape_permute", "g2_dense", "g3_reshape_permute", "g4_dense", "g5_reshape_permute",
        "g6_matmul_div", "g7_softmax", "g8_matmul", "g9_permute_reshape", "g10_dense_add", "g11_layer_norm",
        "g12_dense_gelu"]
    pats = {grp.name: grp.pattern for grp in p.groups}
    assert pats["g6_matmul_div"] == Pattern.COMPLEX and pats["g7_softmax"] == Pattern.REDUCTION
    assert pats["g1_reshape_permute"] == Pattern.INJECTIVE and not p.groups[1].is_view
    assert p.groups[10].inputs == ("ctx_r", "wo", "bo", "x")
    run_groups(p)


def test_exported_bert_layer_groups():
    """Through the torch frontend the flattening views around linear layers are gone after optimize, so the
    residual adds and GELU are dense epilogues."""
    torch = pytest.importorskip("torch")
    from tilewright.graph.frontend import from_torch
    from tilewright.models import MODELS

    spec = MODELS["bert_layer"]
    model, x = spec.build(reduced=True).eval(), spec.example_input(reduced=True)
    p = fuse(optimize(from_torch(model, (x,))))
    kinds = [grp.name.split("_", 1)[1] for grp in p.groups]
    assert kinds.count("dense") == 3 and kinds.count("dense_add") == 2 and kinds.count("dense_gelu") == 1
    assert kinds.count("matmul_div") == 1 and kinds.count("softmax") == 1 and kinds.count("layer_norm") == 2
    assert len(p.groups) == 15
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(run_reference(p.graph, [x.numpy()])[0], ref, rtol=1e-4, atol=1e-4)
