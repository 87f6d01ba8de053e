"""Building tensors: shapes, axes, stage graph, printing."""

import numpy as np

import tilewright as tw
from tilewright.ir.expr import AxisKind
from tilewright.te import collect_program


def test_placeholder_and_compute_metadata():
    A = tw.placeholder((8, 4), "float32", name="A")
    B = tw.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    assert A.shape == (8, 4) and A.dtype.name == "float32" and A.name == "A"
    assert B.shape == (8, 4) and B.dtype == A.dtype
    assert [a.name for a in B.op.axis] == ["i", "j"]
    assert all(a.kind is AxisKind.SPATIAL for a in B.op.axis)
    assert B.op.input_tensors == (A,)
    assert B.op.reduce_axis == ()


def test_reduce_axis_ranges_and_kind():
    k = tw.reduce_axis(16, name="k")
    r = tw.reduce_axis((2, 5), name="r")
    assert (k.begin, k.extent, k.kind) == (0, 16, AxisKind.REDUCE)
    assert (r.begin, r.end) == (2, 5)


def test_reduce_axis_with_begin_evaluates(rng):
    X = tw.placeholder((3, 9), "float64", name="X")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((3,), lambda i: tw.sum(X[i, r], axis=r), name="S")
    x = rng.standard_normal((3, 9))
    np.testing.assert_allclose(tw.evaluate(S, {"X": x}), x[:, 2:7].sum(1))


def test_print_shows_every_stage_formula():
    A = tw.placeholder((1024, 1024), "float32", name="A")
    B = tw.placeholder((1024, 1024), "float32", name="B")
    k = tw.reduce_axis(1024, name="k")
    C = tw.compute((1024, 1024), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = tw.compute((1024, 1024), lambda i, j: tw.max(C[i, j], 0.0), name="D")
    assert str(D).splitlines() == [
        "A = placeholder(float32[1024, 1024])",
        "B = placeholder(float32[1024, 1024])",
        "C[i:1024, j:1024] = sum(A[i, k] * B[k, j], axis=[k:1024])    # float32[1024, 1024]",
        "D[i:1024, j:1024] = max(C[i, j], 0.0)    # float32[1024, 1024]",
    ]


def test_printing_keeps_needed_parentheses_only():
    X = tw.placeholder((10,), "int32", name="X")
    Y = tw.compute((5,), lambda i: (X[i] + 1) * (X[i * 2] - X[i] // 3) % 7, name="Y")
    assert str(Y.op.body) == "(X[i] + 1) * (X[i * 2] - X[i] // 3) % 7"
    Z = tw.compute((5,), lambda i: X[i] - (X[i] - 1), name="Z")
    assert str(Z.op.body) == "X[i] - (X[i] - 1)"
    W = tw.compute((5,), lambda i: tw.if_then_else(tw.all(i >= 1, i < 4), X[i], -1), name="W")
    assert str(W.op.body) == "if_then_else(i >= 1 and i < 4, X[i], -1)"


def test_program_orders_producers_first_and_shares_stages():
    A = tw.placeholder((4,), "float32", name="A")
    B = tw.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = tw.compute((4,), lambda i: B[i] * B[i], name="C")
    D = tw.compute((4,), lambda i: B[i] + C[i], name="D")
    prog = collect_program(D)
    assert [t.name for t in prog.tensors] == ["A", "B", "C", "D"]
    assert [t.name for t in prog.inputs] == ["A"]


def test_default_names_are_unique_per_kind():
    a = tw.placeholder((2,))
    b = tw.placeholder((2,))
    assert a.name != b.name


def test_multistage_padding_bias_activation(rng):
    torch = __import__("pytest").importorskip("torch")
    X = tw.placeholder((1, 3, 6, 6), "float32", name="X")
    W = tw.placeholder((4, 3, 3, 3), "float32", name="W")
    b = tw.placeholder((4,), "float32", name="b")
    P = tw.compute(
        (1, 3, 8, 8),
        lambda n, c, h, w: tw.if_then_else(tw.all(h >= 1, h < 7, w >= 1, w < 7), X[n, c, h - 1, w - 1], 0.0),
        name="P",
    )
    rc, rh, rw = tw.reduce_axis(3, "rc"), tw.reduce_axis(3, "rh"), tw.reduce_axis(3, "rw")
    C = tw.compute((1, 4, 6, 6), lambda n, f, h, w: tw.sum(P[n, rc, h + rh, w + rw] * W[f, rc, rh, rw],
                                                          axis=[rc, rh, rw]), name="C")
    Bi = tw.compute((1, 4, 6, 6), lambda n, f, h, w: C[n, f, h, w] + b[f], name="Bi")
    R = tw.compute((1, 4, 6, 6), lambda n, f, h, w: tw.max(Bi[n, f, h, w], 0.0), name="R")
    x, w, bias = (rng.standard_normal(s).astype("float32") for s in [(1, 3, 6, 6), (4, 3, 3, 3), (4,)])
    want = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(bias), padding=1))
    np.testing.assert_allclose(tw.evaluate(R, {X: x, W: w, b: bias}), want.numpy(), rtol=1e-5, atol=1e-5)


def test_three_way_contraction_in_a_few_lines(rng):
    """An operator nobody anticipated: T[a,b] = sum_{i,j,k} X[a,i,j] * Y[j,k] * Z[k,i,b]."""
    X = tw.placeholder((5, 6, 7), "float64", name="X")
    Y = tw.placeholder((7, 8), "float64", name="Y")
    Z = tw.placeholder((8, 6, 3), "float64", name="Z")
    i, j, k = tw.reduce_axis(6, "i"), tw.reduce_axis(7, "j"), tw.reduce_axis(8, "k")
    T = tw.compute((5, 3), lambda a, b: tw.sum(X[a, i, j] * Y[j, k] * Z[k, i, b], axis=[i, j, k]), name="T")
    x, y, z = rng.standard_normal((5, 6, 7)), rng.standard_normal((7, 8)), rng.standard_normal((8, 6, 3))
    np.testing.assert_allclose(tw.evaluate(T, {"X": x, "Y": y, "Z": z}), np.einsum("aij,jk,kib->ab", x, y, z))


def test_custom_reducer_with_identity(rng):
    prod = tw.comm_reducer(lambda x, y: x * y, lambda t: 1, name="prod")
    X = tw.placeholder((3, 7), "float64", name="X")
    r = tw.reduce_axis(7, "r")
    P = tw.compute((3,), lambda i: prod(X[i, r], axis=r), name="P")
    assert str(P.op.body) == "prod(X[i, r], axis=[r:7])"
    x = rng.uniform(0.5, 1.5, (3, 7))
    np.testing.assert_allclose(tw.evaluate(P, {X: x}), x.prod(1))


def test_custom_reducer_not_a_ufunc_uses_tree_reduction(rng):
    # logsumexp-style combiner: log(exp(x) + exp(y)) is commutative and associative.
    lse = tw.comm_reducer(lambda x, y: tw.log(tw.exp(x) + tw.exp(y)), lambda t: float("-inf"), name="lse")
    X = tw.placeholder((4, 13), "float64", name="X")
    r = tw.reduce_axis(13, "r")
    L = tw.compute((4,), lambda i: lse(X[i, r], axis=r), name="L")
    x = rng.standard_normal((4, 13))
    np.testing.assert_allclose(tw.evaluate(L, {X: x}), np.log(np.exp(x).sum(1)))


def test_reduction_with_where_condition(rng):
    X = tw.placeholder((3, 10), "float32", name="X")
    r = tw.reduce_axis(10, "r")
    M = tw.compute((3,), lambda i: tw.max(X[i, r], axis=r, where=r % 2 == 0), name="M")
    r2 = tw.reduce_axis(10, "r2")
    S = tw.compute((3,), lambda i: tw.sum(X[i, r2], axis=r2, where=r2 < 4), name="S")
    x = rng.standard_normal((3, 10)).astype("float32")
    mx, s = tw.evaluate([M, S], {X: x})
    np.testing.assert_allclose(mx, x[:, ::2].max(1))
    np.testing.assert_allclose(s, x[:, :4].sum(1), rtol=1e-6)


def test_binary_min_max_are_elementwise():
    A = tw.placeholder((3,), "int32", name="A")
    M = tw.compute((3,), lambda i: tw.min(tw.max(A[i], 0), 5), name="M")
    assert str(M.op.body) == "min(max(A[i], 0), 5)"
    np.testing.assert_array_equal(tw.evaluate(M, {A: np.array([-4, 3, 9], "int32")}), [0, 3, 5])


def test_data_dependent_index(rng):
    X = tw.placeholder((6,), "float32", name="X")
    idx = tw.placeholder((4,), "int32", name="idx")
    G = tw.compute((4,), lambda i: X[idx[i]], name="G")
    x = rng.standard_normal(6).astype("float32")
    ix = np.array([5, 0, 2, 2], "int32")
    np.testing.assert_array_equal(tw.evaluate(G, {X: x, idx: ix}), x[ix])
