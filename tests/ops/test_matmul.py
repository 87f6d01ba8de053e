"""gemv/mv, gemm/mm, batch_matmul/bmm and matmul against torch (float64 oracle)
and NumPy int64 formulas, including the FlexTensor GEMV and GEMM cases."""


import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.workloads import suite

SUITE = suite()  # the packaged copy of ../shared/benchmarks/flextensor_suite.json


def suite_case(op: str, name: str) -> dict:
    return next(c for c in SUITE[op]["cases"] if c["name"] == name)


def torch64(fn, *arrays):
    """fn on float64 torch tensors made from `arrays`, as a NumPy array."""
    torch = torch_or_skip()
    return fn(*[torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in arrays]).numpy()


def run(out, inputs: dict):
    return tw.evaluate(out, inputs)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 7, 3), (17, 1, 9), (3, 33, 2)])
def test_gemm_matches_torch(rng, dtype, transpose_a, transpose_b, m, k, n):
    a_shape = (k, m) if transpose_a else (m, k)
    b_shape = (n, k) if transpose_b else (k, n)
    a, b = random_array(rng, a_shape, dtype), random_array(rng, b_shape, dtype)
    A, B = tw.placeholder(a_shape, dtype, "A"), tw.placeholder(b_shape, dtype, "B")
    C = tw.ops.gemm(A, B, transpose_a, transpose_b)
    want = torch64(lambda x, y: (x.T if transpose_a else x) @ (y.T if transpose_b else y), a, b)
    assert C.shape == (m, n) and C.dtype.name == dtype
    assert_close(run(C, {A: a, B: b}), want, dtype, scale=np.sqrt(k))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_mm_mv_gemv_match_torch(rng, dtype):
    torch = torch_or_skip()
    a, b, x = random_array(rng, (6, 11), dtype), random_array(rng, (11, 4), dtype), random_array(rng, (11,), dtype)
    A, B = tw.placeholder((6, 11), dtype, "A"), tw.placeholder((11, 4), dtype, "B")
    X = tw.placeholder((11,), dtype, "x")
    assert_close(run(tw.ops.mm(A, B), {A: a, B: b}), torch64(torch.mm, a, b), dtype, scale=3)
    assert_close(run(tw.ops.mv(A, X), {A: a, X: x}), torch64(torch.mv, a, x), dtype, scale=3)
    assert_close(run(tw.ops.gemv(A, X), {A: a, X: x}), torch64(torch.mv, a, x), dtype, scale=3)


def test_int8_gemm_accumulates_in_int32(rng):
    a = rng.integers(-128, 128, size=(9, 300)).astype(np.int8)
    b = rng.integers(-128, 128, size=(300, 5)).astype(np.int8)
    A, B = tw.placeholder(a.shape, "int8", "A"), tw.placeholder(b.shape, "int8", "B")
    C = tw.ops.gemm(A, B, out_dtype="int32")
    assert C.dtype.name == "int32"
    assert "int32(A[i, k]) * int32(B[k, j])" in str(C)
    np.testing.assert_array_equal(run(C, {A: a, B: b}), a.astype(np.int64) @ b.astype(np.int64))


def test_int8_gemm_without_out_dtype_wraps_like_int8(rng):
    a = rng.integers(-128, 128, size=(4, 50)).astype(np.int8)
    b = rng.integers(-128, 128, size=(50, 3)).astype(np.int8)
    A, B = tw.placeholder(a.shape, "int8", "A"), tw.placeholder(b.shape, "int8", "B")
    C = tw.ops.mm(A, B)
    assert C.dtype.name == "int8"
    np.testing.assert_array_equal(run(C, {A: a, B: b}), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int8))


def test_int32_batch_matmul_transposed(rng):
    a, b = random_array(rng, (3, 7, 4), "int32"), random_array(rng, (3, 5, 7), "int32")
    A, B = tw.placeholder(a.shape, "int32", "A"), tw.placeholder(b.shape, "int32", "B")
    C = tw.ops.batch_matmul(A, B, transpose_a=True, transpose_b=True)
    want = np.einsum("bki,bjk->bij", a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(run(C, {A: a, B: b}), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("ba,bb", [(4, 4), (1, 3), (2, 1)])
def test_batch_matmul_matches_torch(rng, dtype, transpose_a, transpose_b, ba, bb):
    m, k, n = 5, 6, 3
    a_shape = (ba, k, m) if transpose_a else (ba, m, k)
    b_shape = (bb, n, k) if transpose_b else (bb, k, n)
    a, b = random_array(rng, a_shape, dtype), random_array(rng, b_shape, dtype)
    A, B = tw.placeholder(a_shape, dtype, "A"), tw.placeholder(b_shape, dtype, "B")
    C = tw.ops.batch_matmul(A, B, transpose_a, transpose_b)
    want = torch64(lambda x, y: (x.mT if transpose_a else x) @ (y.mT if transpose_b else y), a, b)
    assert C.shape == (max(ba, bb), m, n)
    assert_close(run(C, {A: a, B: b}), want, dtype)


def test_bmm_matches_torch(rng):
    torch = torch_or_skip()
    a, b = random_array(rng, (3, 4, 5)), random_array(rng, (3, 5, 2))
    A, B = tw.placeholder(a.shape, "float32", "A"), tw.placeholder(b.shape, "float32", "B")
    C = tw.ops.bmm(A, B)
    assert C.name == "bmm" and [ax.name for ax in C.op.axis] == ["b", "i", "j"]
    assert_close(run(C, {A: a, B: b}), torch64(torch.bmm, a, b))


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((4,), (4,)),
        ((4,), (4, 3)),
        ((3, 4), (4,)),
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((1, 3, 4), (2, 4, 5)),
        ((3, 4), (2, 4, 5)),
        ((2, 3, 4), (4, 6)),
    ],
)
def test_matmul_follows_torch_rules(rng, a_shape, b_shape):
    torch = torch_or_skip()
    a, b = random_array(rng, a_shape, "float64"), random_array(rng, b_shape, "float64")
    A, B = tw.placeholder(a_shape, "float64", "A"), tw.placeholder(b_shape, "float64", "B")
    C = tw.ops.matmul(A, B)
    want = torch64(torch.matmul, a, b)
    assert C.shape == want.shape
    assert_close(run(C, {A: a, B: b}), want, "float64")


def test_suite_gemm_1024(rng):
    case = suite_case("GEMM", "gemm_1024")
    m, n, k = case["M"], case["N"], case["K"]
    a, b = random_array(rng, (m, k)), random_array(rng, (k, n))
    A, B = tw.placeholder((m, k), "float32", "A"), tw.placeholder((k, n), "float32", "B")
    C = tw.ops.gemm(A, B)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(run(C, {A: a, B: b}), want, scale=np.sqrt(k))


def test_suite_gemv_2048(rng):
    torch = torch_or_skip()
    case = suite_case("GEMV", "gemv_2048")
    m, k = case["M"], case["K"]
    a, x = random_array(rng, (m, k)), random_array(rng, (k,))
    A, X = tw.placeholder((m, k), "float32", "A"), tw.placeholder((k,), "float32", "x")
    assert_close(run(tw.ops.gemv(A, X), {A: a, X: x}), torch64(torch.mv, a, x), scale=np.sqrt(k))


def test_stage_names_and_axes():
    A, B = tw.placeholder((4, 3), "float32", "A"), tw.placeholder((3, 2), "float32", "B")
    C = tw.ops.gemm(A, B, name="C")
    assert C.name == "C" and [a.name for a in C.op.axis] == ["i", "j"]
    assert [a.name for a in C.op.reduce_axis] == ["k"]
    assert tw.ops.mm(A, B).name == "mm" and tw.ops.matmul(A, B).name == "matmul"
    x = tw.placeholder((3,), "float32", "x")
    assert tw.ops.gemv(A, x).name == "gemv" and tw.ops.mv(A, x).name == "mv"
    # a reduce axis is fresh per call, so one op can be built twice
    assert tw.ops.gemm(A, B).op.reduce_axis[0] is not C.op.reduce_axis[0]


def test_inner_dimension_mismatch_message():
    A, B = tw.placeholder((64, 32), "float32", "A"), tw.placeholder((16, 8), "float32", "B")
    with pytest.raises(tw.ShapeError, match=r"gemm: A 'A' is \[64, 32\] but B 'B' is \[16, 8\]; "
                                            r"inner dimensions 32 and 16 must match"):
        tw.ops.gemm(A, B)
    with pytest.raises(tw.ShapeError, match=r"transpose_a=True; inner dimensions 64 and 16 must match"):
        tw.ops.gemm(A, B, transpose_a=True)
    with pytest.raises(tw.ShapeError, match=r"mv: .*inner dimensions 32 and 5"):
        tw.ops.mv(A, tw.placeholder((5,), "float32", "x"))
    with pytest.raises(tw.ShapeError, match=r"matmul: .*inner dimensions 32 and 16"):
        tw.ops.matmul(A, B)


@pytest.mark.parametrize(
    "fn,a_shape,b_shape,match",
    [
        (tw.ops.gemm, (2, 3, 4), (4, 2), r"gemm: A 'A' must have 2 dimensions \(\[M, K\]\), got shape \[2, 3, 4\]"),
        (tw.ops.mm, (3, 4), (4,), r"mm: B 'B' must have 2 dimensions"),
        (tw.ops.gemv, (3, 4), (4, 1), r"gemv: x 'B' must have 1 dimensions \(\[K\]\)"),
        (tw.ops.mv, (4,), (4,), r"mv: A 'A' must have 2 dimensions"),
        (tw.ops.batch_matmul, (3, 4), (1, 4, 2), r"batch_matmul: A 'A' must have 3 dimensions"),
        (tw.ops.bmm, (2, 3, 4), (4, 2), r"bmm: B 'B' must have 3 dimensions"),
        (tw.ops.bmm, (2, 3, 4), (1, 4, 2), r"bmm: A 'A' has batch 2 but B 'B' has batch 1; they must be equal"),
        (tw.ops.batch_matmul, (2, 3, 4), (3, 4, 2), r"batch_matmul batch dimensions: shapes \[2\] \('A'\) and "
                                                    r"\[3\] \('B'\) do not broadcast"),
        (tw.ops.matmul, (2, 3, 4), (3, 4, 2), r"matmul batch dimensions: .* dimension -1 has sizes 2 and 3"),
        (tw.ops.matmul, (), (3,), r"matmul: A 'A' is 0-d; both operands need at least 1 dimension"),
    ],
)
def test_shape_errors(fn, a_shape, b_shape, match):
    A, B = tw.placeholder(a_shape, "float32", "A"), tw.placeholder(b_shape, "float32", "B")
    with pytest.raises(tw.ShapeError, match=match):
        fn(A, B)


def test_dtype_mismatch_needs_cast_or_out_dtype():
    A, B = tw.placeholder((2, 3), "int8", "A"), tw.placeholder((3, 2), "float32", "B")
    with pytest.raises(tw.DTypeError, match=r"gemm: A 'A' is int8 but B 'B' is float32; "
                                            r"cast one side or pass out_dtype="):
        tw.ops.gemm(A, B)
    assert tw.ops.gemm(A, B, out_dtype="float32").dtype.name == "float32"
    with pytest.raises(tw.DTypeError, match=r"unknown gemm out_dtype 'int33'"):
        tw.ops.gemm(A, B, out_dtype="int33")
