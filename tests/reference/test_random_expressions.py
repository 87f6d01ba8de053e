"""Random elementwise expression trees: the evaluator agrees with the same formula
written directly in NumPy."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewright as tw

A_SHAPE = (3, 4)


def leaves():
    return st.sampled_from([
        (lambda A, B, i, j: A[i, j], lambda a, b, i, j: a),
        (lambda A, B, i, j: B[j], lambda a, b, i, j: b[None, :]),
        (lambda A, B, i, j: tw.cast(i * 2 - j, "float64"), lambda a, b, i, j: (2 * i - j).astype(float)),
        (lambda A, B, i, j: tw.const(0.75, "float64"), lambda a, b, i, j: 0.75),
    ])


def combine(children):
    binary = st.sampled_from([
        (lambda x, y: x + y, np.add),
        (lambda x, y: x - y, np.subtract),
        (lambda x, y: x * y, np.multiply),
        (lambda x, y: tw.max(x, y), np.maximum),
        (lambda x, y: tw.min(x, y), np.minimum),
        (lambda x, y: tw.if_then_else(x > y, x, y * 0.5), lambda x, y: np.where(x > y, x, y * 0.5)),
    ])
    unary = st.sampled_from([
        (tw.tanh, np.tanh),
        (tw.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (lambda x: tw.sqrt(tw.abs(x)), lambda x: np.sqrt(np.abs(x))),
        (lambda x: -x, np.negative),
        (tw.floor, np.floor),
    ])

    def make_binary(op, lhs, rhs):
        return (lambda A, B, i, j: op[0](lhs[0](A, B, i, j), rhs[0](A, B, i, j)),
                lambda a, b, i, j: op[1](lhs[1](a, b, i, j), rhs[1](a, b, i, j)))

    def make_unary(op, c):
        return (lambda A, B, i, j: op[0](c[0](A, B, i, j)), lambda a, b, i, j: op[1](c[1](a, b, i, j)))

    return st.one_of(
        st.builds(make_binary, binary, children, children),
        st.builds(make_unary, unary, children),
    )


@settings(max_examples=60, deadline=None)
@given(st.recursive(leaves(), combine, max_leaves=8))
def test_random_expression_matches_numpy(pair):
    build, reference = pair
    A = tw.placeholder(A_SHAPE, "float64", name="A")
    B = tw.placeholder(A_SHAPE[1:], "float64", name="B")
    C = tw.compute(A_SHAPE, lambda i, j: build(A, B, i, j), name="C")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(A_SHAPE), rng.standard_normal(A_SHAPE[1:])
    i, j = np.meshgrid(np.arange(A_SHAPE[0]), np.arange(A_SHAPE[1]), indexing="ij")
    want = np.broadcast_to(reference(a, b, i, j), A_SHAPE)
    np.testing.assert_allclose(tw.evaluate(C, {A: a, B: b}), want, rtol=1e-12, atol=1e-12)
