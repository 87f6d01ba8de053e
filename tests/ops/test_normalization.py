"""softmax, log_softmax, batch_norm (inference) and layer_norm against torch."""

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw


def t64(a):
    torch = torch_or_skip()
    return None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4, 5), 1), ((2, 3, 4, 5), -1)])
def test_softmax_matches_torch(rng, op, dtype, shape, dim):
    torch = torch_or_skip()
    x = (random_array(rng, shape, "float64") * 4).astype(dtype)
    X = tw.placeholder(shape, dtype, "X")
    out = getattr(tw.ops, op)(X, dim)
    want = getattr(torch.nn.functional, op)(t64(x), dim).numpy()
    assert out.shape == shape and out.name == op
    assert_close(tw.evaluate(out, {X: x}), want, dtype)


def test_softmax_is_stable_for_large_inputs():
    torch = torch_or_skip()
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1e4, -999.0]], dtype="float32")
    X = tw.placeholder(x.shape, "float32", "X")
    for op in ["softmax", "log_softmax"]:
        got = tw.evaluate(getattr(tw.ops, op)(X, 1), {X: x})
        assert np.isfinite(got).all()
        assert_close(got, getattr(torch.nn.functional, op)(t64(x), 1).numpy())


def test_softmax_stages():
    X = tw.placeholder((3, 5), "float32", "X")
    out = tw.ops.softmax(X, -1, name="sm")
    names = sorted(t.name for t in out.op.input_tensors)
    assert names == ["sm_exp", "sm_sum"]  # the exps are kept: one exp per element
    e = next(t for t in out.op.input_tensors if t.name == "sm_exp")
    mx = next(t for t in e.op.input_tensors if t.name == "sm_max")
    assert mx.shape == (3,) and mx.op.reduce_axis[0].extent == 5


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_matches_torch(rng, dtype, shape, affine):
    torch = torch_or_skip()
    c = shape[1]
    x = random_array(rng, shape, dtype)
    mean = random_array(rng, (c,), dtype)
    var = (rng.uniform(0.5, 2.0, size=c)).astype(dtype)
    w = random_array(rng, (c,), dtype) if affine else None
    b = random_array(rng, (c,), dtype) if affine else None
    X, M, V = (tw.placeholder(a.shape, dtype, n) for a, n in ((x, "X"), (mean, "mean"), (var, "var")))
    W = tw.placeholder((c,), dtype, "w") if affine else None
    B = tw.placeholder((c,), dtype, "b") if affine else None
    out = tw.ops.batch_norm(X, M, V, W, B, eps=1e-3)
    inputs = {X: x, M: mean, V: var} | ({W: w, B: b} if affine else {})
    want = torch.nn.functional.batch_norm(t64(x), t64(mean), t64(var), t64(w), t64(b), eps=1e-3).numpy()
    assert_close(tw.evaluate(out, inputs), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape,normalized", [((4, 7), 7), ((2, 3, 5), (3, 5)), ((2, 3, 5), [5]), ((6,), (6,))])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_matches_torch(rng, dtype, shape, normalized, affine):
    torch = torch_or_skip()
    x = (random_array(rng, shape, "float64") * 3 + 1).astype(dtype)
    norm = tuple(normalized) if isinstance(normalized, (list, tuple)) else (normalized,)
    X = tw.placeholder(shape, dtype, "X")
    w = random_array(rng, norm, dtype) if affine else None
    b = random_array(rng, norm, dtype) if affine else None
    W = tw.placeholder(norm, dtype, "w") if affine else None
    B = tw.placeholder(norm, dtype, "b") if affine else None
    out = tw.ops.layer_norm(X, normalized, W, B, eps=1e-5)
    inputs = {X: x} | ({W: w, B: b} if affine else {})
    want = torch.nn.functional.layer_norm(t64(x), norm, t64(w), t64(b), eps=1e-5).numpy()
    assert out.shape == shape and out.name == "layer_norm"
    assert_close(tw.evaluate(out, inputs), want, dtype)


def test_layer_norm_stages():
    X = tw.placeholder((2, 3, 5), "float32", "X")
    out = tw.ops.layer_norm(X, (3, 5), name="ln")
    producers = {t.name for t in tw.te.collect_program(out).stages}
    assert producers == {"ln_sum", "ln_mean", "ln_sqdev", "ln_rstd", "ln"}


def test_errors():
    X = tw.placeholder((2, 3, 4), "float32", "X")
    I = tw.placeholder((2, 3), "int32", "I")  # noqa: E741
    with pytest.raises(tw.ShapeError, match=r"softmax: dim 3 is out of range for a 3-d tensor; "
                                            r"valid range is \[-3, 2\]"):
        tw.ops.softmax(X, 3)
    with pytest.raises(tw.ShapeError, match=r"log_softmax: dim must be an int, got None"):
        tw.ops.log_softmax(X, None)
    with pytest.raises(tw.ShapeError, match=r"softmax: input 's' is 0-d"):
        tw.ops.softmax(tw.placeholder((), "float32", "s"), 0)
    with pytest.raises(tw.DTypeError, match=r"softmax: input 'I' has dtype int32"):
        tw.ops.softmax(I, 0)
    c3 = tw.placeholder((3,), "float32", "c3")
    c4 = tw.placeholder((4,), "float32", "c4")
    with pytest.raises(tw.ShapeError, match=r"batch_norm: running_var 'c4' has 4 elements but the channel count "
                                            r"\(axis 1 of 'X'\) is 3"):
        tw.ops.batch_norm(X, c3, c4)
    with pytest.raises(tw.ShapeError, match=r"batch_norm: weight 'm' must have 1 dimensions"):
        tw.ops.batch_norm(X, c3, c3, tw.placeholder((3, 1), "float32", "m"))
    with pytest.raises(tw.ShapeError, match=r"batch_norm: input 'v' must be \[N, C, ...\] with at least 2"):
        tw.ops.batch_norm(tw.placeholder((3,), "float32", "v"), c3, c3)
    with pytest.raises(tw.ExprError, match=r"batch_norm: only inference \(training=False\) is supported"):
        tw.ops.batch_norm(X, c3, c3, training=True)
    with pytest.raises(tw.DTypeError, match=r"batch_norm: input 'I' has dtype int32"):
        tw.ops.batch_norm(I, c3, c3)
    with pytest.raises(tw.ShapeError, match=r"layer_norm: normalized_shape \[3\] must be non-empty and equal the "
                                            r"trailing dimensions of 'X' \[2, 3, 4\]"):
        tw.ops.layer_norm(X, 3)
    with pytest.raises(tw.ShapeError, match=r"layer_norm: normalized_shape \[\] must be non-empty"):
        tw.ops.layer_norm(X, ())
    with pytest.raises(tw.ShapeError, match=r"layer_norm: normalized_shape \[1, 2, 3, 4\]"):
        tw.ops.layer_norm(X, (1, 2, 3, 4))
    with pytest.raises(tw.ShapeError, match=r"layer_norm: bias 'c3' is \[3\], expected normalized_shape \[4\]"):
        tw.ops.layer_norm(X, 4, c4, c3)
    with pytest.raises(tw.DTypeError, match=r"layer_norm: input 'I' has dtype int32"):
        tw.ops.layer_norm(I, 3)
