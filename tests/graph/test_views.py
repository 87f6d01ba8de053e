"""Slices and concats that need no copy (graph/views.py): fusion gives them no kernel, the
memory plan aliases them at a byte offset, and the module and its export read them there."""

import numpy as np
from graph_cases import Builder, random_inputs, slices_and_concat

from tilewright.graph.fusion import fuse
from tilewright.graph.memory_plan import plan_memory
from tilewright.graph.module import build_module
from tilewright.graph.reference import run_reference
from tilewright.graph.views import concat_offsets, slice_offset


def _slice(b, x, shape, begin, end):
    return b.op("slice", [x], "s", tuple(e - s for s, e in zip(begin, end)), begin=begin, end=end,
                step=(1,) * len(shape))


def test_a_slice_is_a_view_only_where_it_keeps_one_contiguous_range():
    cases = [((1, 4, 3, 3, 8), (0, 1, 0, 0, 0), (1, 3, 3, 3, 8), 1 * 3 * 3 * 8 * 4),  # channel blocks at batch 1
             ((2, 4, 3), (1, 0, 0), (2, 4, 3), 12 * 4),  # one whole batch item
             ((1, 4, 3, 3, 8), (0, 0, 1, 0, 0), (1, 4, 3, 3, 8), None),  # rows of every channel block
             ((2, 4, 3), (0, 1, 0), (2, 3, 3), None),  # channels of two batch items
             ((1, 4, 3, 3, 8), (0, 0, 0, 0, 0), (1, 4, 3, 3, 4), None)]  # half of every vector
    for shape, begin, end, want in cases:
        b = Builder()
        s = _slice(b, b.input("x", shape), shape, begin, end)
        b.op("relu", [s], "out", tuple(e - s for s, e in zip(begin, end)))
        g = b.graph("out")
        assert slice_offset(g, g.producer("s")) == want, (shape, begin, end)
    b = Builder()
    s = _slice(b, b.input("x", (1, 8)), (1, 8), (0, 2), (1, 6))
    g = b.graph("s")
    assert slice_offset(g, g.producer("s")) is None  # a graph output gets its own array


def test_a_concat_is_in_place_only_for_single_use_kernel_outputs():
    g = slices_and_concat()
    assert concat_offsets(g, g.producer("cat")) == (0, 16 * 16 * 4)
    b = Builder()
    x = b.input("x", (1, 8, 2))
    y = b.op("relu", [x], "y", (1, 8, 2))
    b.op("concat", [x, y], "cat", (1, 16, 2), axis=1)  # x is a graph input
    b.op("concat", [y, b.op("neg", [x], "z", (1, 8, 2))], "cat2", (1, 8, 4), axis=2)  # y is read twice
    b.op("concat", [b.op("relu", [x], "r", (1, 8, 2)), b.op("sigmoid", [x], "t", (1, 8, 2))],
         "cat3", (1, 8, 4), axis=2)  # parts interleave along the last axis
    b.op("concat", [b.op("exp", [x], "u", (1, 8, 2)), b.op("sqrt", [x], "w", (1, 8, 2))], "cat4", (1, 16, 2), axis=1)
    g = b.graph("cat", "cat2", "cat3", "cat4")  # cat4 is a graph output
    for v in ("cat", "cat2", "cat3", "cat4"):
        assert concat_offsets(g, g.producer(v)) is None, v


def test_views_run_no_kernel_and_alias_at_their_offsets(tmp_path):
    g = slices_and_concat()
    part = fuse(g)
    assert [grp.is_view for grp in part.groups].count(True) == 3
    plan = plan_memory(part)
    assert plan.root("xs") == "x" and plan.view_offset("xs") == 8 * 16 * 4
    assert plan.root("a") == plan.root("c") == plan.root("s") == "cat"
    assert plan.offset("c") == plan.offset("cat") + 16 * 16 * 4 and plan.offset("s") == plan.offset("cat") + 8 * 16 * 4
    assert set(plan.buffers) == {"cat"}
    module = build_module(part, "cpu")
    assert len(module.steps) == 3
    inputs = random_inputs(g)
    np.testing.assert_allclose(module(*inputs), run_reference(g, inputs)[0], rtol=1e-6)


def test_epilogues_move_above_an_in_place_concat_only_where_they_broadcast():
    from tilewright.graph.concat_epilogue import push_epilogues

    b = Builder()
    x = b.input("x", (1, 8, 4, 4))
    params = [b.input(p, (16,)) for p in ("gamma", "beta", "mean", "var")]  # batch_norm's index axis 1
    cat = b.op("concat", [b.op("relu", [x], "a", (1, 8, 4, 4)), b.op("neg", [x], "n", (1, 8, 4, 4))], "cat",
               (1, 16, 4, 4), axis=1)
    bn = b.op("batch_norm", [cat, *params], "bn", (1, 16, 4, 4))
    g = b.graph(b.op("add", [bn, b.const("k", (16, 1, 1))], "out", (1, 16, 4, 4)))
    assert push_epilogues(g) is g  # batch_norm stays below: its parameters do not broadcast as NumPy's
    b2 = Builder()
    x = b2.input("x", (1, 8, 4, 4))
    cat = b2.op("concat", [b2.op("relu", [x], "a", (1, 8, 4, 4)), b2.op("neg", [x], "n", (1, 8, 4, 4))], "cat",
                (1, 16, 4, 4), axis=1)
    g2 = b2.graph(b2.op("add", [cat, b2.const("k", (16, 1, 1))], "out", (1, 16, 4, 4)))
    pushed = push_epilogues(g2)
    assert [n.op for n in pushed.nodes if n.op != "constant"] == ["relu", "add", "neg", "add", "concat"]
    inputs = random_inputs(g2)
    np.testing.assert_allclose(run_reference(pushed, inputs)[0], run_reference(g2, inputs)[0], rtol=1e-6)
