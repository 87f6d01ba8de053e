import numpy as np
import pytest
from graph_cases import (
    PASSTHROUGH_GROUPS,
    RESIDUAL_GROUPS,
    Builder,
    attention,
    conv_bias_relu,
    dense_gelu,
    partition,
    passthrough,
    random_inputs,
    torch_reference,
)

import tilewright as tw
from tilewright.graph.module import build_module

TOL = dict(rtol=1e-4, atol=1e-4)


def check(graph, groups=None):
    module = build_module(partition(graph, groups), "cpu")
    inputs = random_inputs(graph)
    got = module(*inputs)
    got = got if isinstance(got, list) else [got]
    for g, want in zip(got, torch_reference(graph, inputs)):
        np.testing.assert_allclose(g, want, **TOL)
    return module, inputs


def test_conv_bias_relu_fused():
    module, inputs = check(conv_bias_relu(), {"conv": ["conv", "out"]})
    assert len(module.steps) == 1 and module.plan.peak_bytes == 0
    first = module(*inputs).copy()
    np.testing.assert_array_equal(module(*inputs), first)  # reruns reuse the arena


def test_residual_block_with_view_output():
    from graph_cases import residual_block

    module, inputs = check(residual_block(), RESIDUAL_GROUPS)
    assert len(module.steps) == 3 and len(module.tasks) == 3
    module, _ = check(residual_block())  # one group per node: more arena reuse
    assert module.plan.peak_bytes < module.plan.naive_bytes


def test_dense_gelu_and_attention():
    check(dense_gelu())
    check(attention())
    check(attention(), {"q": ["q", "q_h", "q_t"], "k": ["k", "k_h", "k_t"], "v": ["v", "v_h", "v_t"],
                        "sm": ["scores", "scaled", "probs"], "ctx": ["ctx", "ctx_t"], "view": ["ctx_m"],
                        "ln": ["res", "out"]})


def test_shared_task_with_permuted_arguments():
    b = Builder("perm")
    x, y = b.input("x", (4, 8)), b.input("y", (4, 8))
    s1 = b.op("sub", [x, y], "s1", (4, 8))
    s2 = b.op("sub", [y, s1], "s2", (4, 8))  # same workload as s1; arguments differ
    b.op("sub", [s2, s1], "s3", (4, 8))
    g = b.graph("s3", "s1")
    module, _ = check(g)
    assert len(module.tasks) == 1 and module.tasks[0].weight == 3


def test_input_validation_and_summary():
    g = dense_gelu()
    module = build_module(partition(g), "cpu")
    x = random_inputs(g)[0]
    with pytest.raises(tw.ShapeError, match="input 'x' has shape \\[2, 8\\], expected \\[3, 8\\]"):
        module(x[:2])
    with pytest.raises(tw.ShapeError, match="input 'x' has dtype float64"):
        module(x.astype(np.float64))
    with pytest.raises(tw.ShapeError, match="takes 1 inputs"):
        module(x, x)
    assert module.time(x, number=2, repeat=2) > 0
    text = module.summary(x)
    assert "dispatch per kernel" in text and "peak" in text
    alone, in_place = module.kernel_times(x), module.kernel_times(x, in_place=True)
    assert len(alone) == len(in_place) == len(module.steps) and min(alone + in_place) > 0
    o = module.dispatch_overhead()
    assert 0 < o["native_s"] < o["python_s"]


def test_a_view_output_read_by_a_later_kernel_is_read_from_its_root():
    """The later kernel must read the view's source, not the caller's output array (filled only at the end)."""
    from graph_cases import VIEW_READ_LATER_GROUPS, view_output_read_later

    g = view_output_read_later()
    module = build_module(partition(g, VIEW_READ_LATER_GROUPS), "cpu")
    xs = random_inputs(g)[0]
    want = (xs + g.constants["c"]).reshape(6)
    for _ in range(2):  # also a second call, whose fresh output arrays hold garbage
        flat, head = module(xs)
        np.testing.assert_allclose(flat, want, rtol=1e-6)
        np.testing.assert_allclose(head, np.maximum(want, 0), rtol=1e-6)


def test_outputs_that_are_inputs_views_or_constants():
    g = passthrough()
    module = build_module(partition(g, PASSTHROUGH_GROUPS), "cpu")
    xs = random_inputs(g)[0]
    flat, xo, y = module(xs)
    np.testing.assert_allclose(flat, (xs + g.constants["c"]).reshape(6), rtol=1e-6)
    np.testing.assert_array_equal(xo, xs)
    assert xo is not xs and np.shares_memory(y, flat) is False
    assert "2 kernels" not in repr(module) and "1 kernels" in repr(module)
