"""block_circulant against a hand-written loop oracle of the FlexTensor BCM definition."""


import numpy as np
import pytest
from oracle import assert_close, random_array

import tilewright as tw
from tilewright.workloads import suite

SUITE = suite()  # the packaged copy of ../shared/benchmarks/flextensor_suite.json


def bcm_oracle(x: np.ndarray, f: int) -> np.ndarray:
    """The suite's definition, loop by loop, in float64."""
    rows, cols = x.shape
    x = x.astype(np.float64)
    compress = np.zeros((rows // f, (cols // f) * f))
    for i in range(rows // f):
        for j in range((cols // f) * f):
            compress[i, j] = sum(x[i * f + t, (j // f) * f + ((j % f) + t) % f] for t in range(f)) / f
    out = np.zeros((rows, cols))
    for i in range((rows // f) * f):
        for j in range((cols // f) * f):
            out[i, j] = compress[i // f, (j // f) * f + ((j % f) - (i % f)) % f]
    return out


def vectorized_oracle(x: np.ndarray, f: int) -> np.ndarray:
    """The same formula with index arrays, for the larger suite cases."""
    rows, cols = x.shape
    x = x.astype(np.float64)
    i = np.arange(rows // f)[:, None, None]
    j = np.arange((cols // f) * f)[None, :, None]
    t = np.arange(f)[None, None, :]
    compress = x[i * f + t, (j // f) * f + (j % f + t) % f].mean(axis=2)
    out = np.zeros((rows, cols))
    ii = np.arange((rows // f) * f)[:, None]
    jj = np.arange((cols // f) * f)[None, :]
    out[: ii.shape[0], : jj.shape[1]] = compress[ii // f, (jj // f) * f + (jj % f - ii % f) % f]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("rows,cols,block", [(8, 8, 4), (10, 7, 3), (6, 13, 2), (5, 5, 1), (4, 9, 4)])
def test_matches_loop_oracle(rng, dtype, rows, cols, block):
    x = random_array(rng, (rows, cols), dtype)
    X = tw.placeholder((rows, cols), dtype, "X")
    y = tw.ops.block_circulant(X, block)
    assert y.shape == (rows, cols) and y.dtype.name == dtype
    assert_close(tw.evaluate(y, {X: x}), bcm_oracle(x, block), dtype)


def test_output_is_block_circulant(rng):
    x = random_array(rng, (12, 8), "float64")
    X = tw.placeholder(x.shape, "float64", "X")
    out = tw.evaluate(tw.ops.block_circulant(X, 4), {X: x})
    block = out[4:8, 0:4]
    for r in range(4):  # each row is the previous one rotated right by one
        np.testing.assert_allclose(block[r], np.roll(block[0], r), rtol=0, atol=0)


@pytest.mark.parametrize("case_name", ["bcm_1024x256_b8", "bcm_1024x40_b16"])
def test_suite_cases(rng, case_name):
    case = next(c for c in SUITE["BCM"]["cases"] if c["name"] == case_name)
    shape = (case["rows"], case["cols"])
    x = random_array(rng, shape)
    X = tw.placeholder(shape, "float32", "X")
    got = tw.evaluate(tw.ops.block_circulant(X, case["block"]), {X: x})
    assert_close(got, vectorized_oracle(x, case["block"]))
    if case["cols"] % case["block"]:
        assert not got[:, (case["cols"] // case["block"]) * case["block"]:].any()


def test_vectorized_oracle_agrees_with_loops(rng):
    x = random_array(rng, (11, 10), "float64")
    np.testing.assert_allclose(vectorized_oracle(x, 3), bcm_oracle(x, 3), rtol=1e-12)


def test_stages():
    X = tw.placeholder((16, 8), "float32", "X")
    y = tw.ops.block_circulant(X, 4, name="bcm")
    (compress,) = y.op.input_tensors
    assert y.name == "bcm" and compress.name == "bcm_compress" and compress.shape == (4, 8)
    assert [a.name for a in compress.op.reduce_axis] == ["t"]


def test_errors():
    X = tw.placeholder((8, 6), "float32", "X")
    with pytest.raises(tw.ShapeError, match=r"block_circulant: input 'v' must have 2 dimensions "
                                            r"\(\[rows, cols\]\), got shape \[8\]"):
        tw.ops.block_circulant(tw.placeholder((8,), "float32", "v"), 2)
    with pytest.raises(tw.ShapeError, match=r"block must be a positive int, got 0"):
        tw.ops.block_circulant(X, 0)
    with pytest.raises(tw.ShapeError, match=r"block must be a positive int, got 2.0"):
        tw.ops.block_circulant(X, 2.0)
    with pytest.raises(tw.ShapeError, match=r"block 7 is larger than input 'X' \[8, 6\]"):
        tw.ops.block_circulant(X, 7)
    with pytest.raises(tw.DTypeError, match=r"block_circulant: input 'I' has dtype int32.*floating-point"):
        tw.ops.block_circulant(tw.placeholder((8, 6), "int32", "I"), 2)
