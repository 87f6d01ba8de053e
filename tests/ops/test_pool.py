"""Pooling against torch.nn.functional over every parameter: a sweep of kernel,
stride, padding, dilation, ceil_mode, count_include_pad and divisor_override in
which torch's accept/reject decision must match ours, plus dtypes and errors."""

import itertools

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw

KERNELS = [1, 2, 3, (2, 3)]
STRIDES = [None, 1, 2, 4, (3, 2)]
PADDINGS = [0, 1, (1, 0)]


def check_against_torch(x, build, reference, dtype, label):
    """Either both reject the parameters (ShapeError vs RuntimeError) or both agree."""
    torch = torch_or_skip()
    try:
        want = reference(torch.nn.functional, torch.from_numpy(x)).numpy()
    except RuntimeError:
        X = tw.placeholder(x.shape, dtype, "X")
        with pytest.raises(tw.ShapeError):
            build(X)
        return False
    X = tw.placeholder(x.shape, dtype, "X")
    out = build(X)
    assert out.shape == want.shape, label
    got = tw.evaluate(out, {X: x})
    try:
        assert_close(got, want, dtype)
    except AssertionError as e:
        raise AssertionError(f"{label}: {e}") from None
    return True


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool2d_sweep(rng, kernel, ceil_mode):
    x = random_array(rng, (1, 2, 6, 7), "float32")
    accepted = 0
    for stride, padding, dilation in itertools.product(STRIDES, PADDINGS, [1, 2, (1, 3)]):
        args = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
        accepted += check_against_torch(
            x, lambda X, a=args: tw.ops.max_pool2d(X, **a), lambda F, t, a=args: F.max_pool2d(t, **a), "float32", args
        )
    assert accepted >= 10


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_sweep(rng, kernel, ceil_mode, count_include_pad):
    x = random_array(rng, (1, 2, 6, 7), "float32")
    accepted = 0
    for stride, padding, divisor in itertools.product(STRIDES, PADDINGS, [None, 5]):
        args = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                    count_include_pad=count_include_pad, divisor_override=divisor)
        accepted += check_against_torch(
            x, lambda X, a=args: tw.ops.avg_pool2d(X, **a), lambda F, t, a=args: F.avg_pool2d(t, **a), "float32", args
        )
    assert accepted >= 10


def test_ceil_mode_drops_window_starting_in_right_padding(rng):
    # H=6, k=2, s=4, p=1: ceil would give 3 windows, but the third starts at 7 >= H + p
    x = random_array(rng, (1, 1, 6, 6), "float32")
    args = dict(kernel_size=2, stride=4, padding=1, ceil_mode=True)
    X = tw.placeholder(x.shape, "float32", "X")
    assert tw.ops.max_pool2d(X, **args).shape == (1, 1, 2, 2)
    assert check_against_torch(x, lambda X: tw.ops.avg_pool2d(X, **args), lambda F, t: F.avg_pool2d(t, **args),
                               "float32", args)


@pytest.mark.parametrize("dtype", ["float64", "float16", "float32"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 5)])
def test_pools_dtypes_batches_and_chw(rng, dtype, shape):
    x = random_array(rng, shape, dtype)
    cases = [
        (lambda X: tw.ops.max_pool2d(X, 3, 2, 1, ceil_mode=True),
         lambda F, t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True)),
        (lambda X: tw.ops.max_pool2d(X, (2, 3), (1, 2), (1, 1), (2, 1)),
         lambda F, t: F.max_pool2d(t, (2, 3), (1, 2), (1, 1), (2, 1))),
        (lambda X: tw.ops.avg_pool2d(X, 3, 2, 1, True, False), lambda F, t: F.avg_pool2d(t, 3, 2, 1, True, False)),
        (lambda X: tw.ops.avg_pool2d(X, 2), lambda F, t: F.avg_pool2d(t, 2)),
        (lambda X: tw.ops.adaptive_avg_pool2d(X, (4, 3)), lambda F, t: F.adaptive_avg_pool2d(t, (4, 3))),
        (lambda X: tw.ops.global_avg_pool2d(X), lambda F, t: F.adaptive_avg_pool2d(t, 1)),
    ]
    for n, (build, reference) in enumerate(cases):
        assert check_against_torch(x, build, reference, dtype, f"case {n}")


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_max_pool2d_integers_pad_with_lowest_value(rng, dtype):
    torch = torch_or_skip()
    x = random_array(rng, (2, 2, 7, 6), dtype)
    x[0, 0, 0, 0] = np.iinfo(dtype).min  # padding must not beat the smallest real value
    X = tw.placeholder(x.shape, dtype, "X")
    out = tw.ops.max_pool2d(X, 3, 2, 1, ceil_mode=True)
    assert out.dtype.name == dtype
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x.astype(np.float64)), 3, 2, 1, ceil_mode=True).numpy()
    np.testing.assert_array_equal(tw.evaluate(out, {X: x}), want.astype(dtype))


def test_max_pool2d_all_negative_window_with_padding():
    x = -np.ones((1, 1, 3, 3), dtype="float32") * 5
    X = tw.placeholder(x.shape, "float32", "X")
    np.testing.assert_array_equal(tw.evaluate(tw.ops.max_pool2d(X, 3, 1, 1), {X: x}), x)


@pytest.mark.parametrize("output_size", [(3, 4), 1, 5, (7, 10), (None, 3), (4, None), (10, 3), [2, 2]])
def test_adaptive_avg_pool2d(rng, output_size):
    x = random_array(rng, (2, 3, 7, 10), "float64")
    assert check_against_torch(
        x, lambda X: tw.ops.adaptive_avg_pool2d(X, output_size),
        lambda F, t: F.adaptive_avg_pool2d(t, output_size), "float64", output_size,
    )


def test_global_avg_pool2d_matches_mean(rng):
    x = random_array(rng, (3, 4, 5, 6), "float64")
    X = tw.placeholder(x.shape, "float64", "X")
    out = tw.ops.global_avg_pool2d(X)
    assert out.shape == (3, 4, 1, 1)
    assert_close(tw.evaluate(out, {X: x}), x.mean(axis=(2, 3), keepdims=True), "float64")


def test_stage_names():
    X = tw.placeholder((1, 1, 6, 6), "float32", "X")
    m = tw.ops.max_pool2d(X, 2)
    assert m.name == "max_pool2d" and m.op.input_tensors == (X,)  # no padding: no pad stage
    assert [a.name for a in m.op.axis] == ["n", "c", "oh", "ow"] and [a.name for a in m.op.reduce_axis] == ["rh", "rw"]
    mp = tw.ops.max_pool2d(X, 3, 1, 1, name="mp")
    assert [t.name for t in mp.op.input_tensors] == ["mp_pad"]
    a = tw.ops.avg_pool2d(X, 3, 2, 1, name="ap")
    (s,) = a.op.input_tensors
    assert a.name == "ap" and s.name == "ap_sum" and [t.name for t in s.op.input_tensors] == ["ap_pad"]
    g = tw.ops.global_avg_pool2d(X)
    assert [t.name for t in g.op.input_tensors] == ["global_avg_pool2d_sum"]
    ad = tw.ops.adaptive_avg_pool2d(X, 4)
    assert [t.name for t in ad.op.input_tensors] == ["adaptive_avg_pool2d_sum"]


def test_errors():
    X = tw.placeholder((1, 2, 5, 5), "float32", "X")
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: input 'v' must be 3-D \(C, H, W\) or 4-D"):
        tw.ops.max_pool2d(tw.placeholder((5, 5), "float32", "v"), 2)
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: padding 2 along h must be at most half the kernel size 3"):
        tw.ops.max_pool2d(X, 3, padding=2)
    with pytest.raises(tw.ShapeError, match=r"avg_pool2d: padding 1 along w must be at most half the kernel size 1"):
        tw.ops.avg_pool2d(X, (3, 1), padding=1)
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: along h the input \(5, padding 0\) is smaller than the "
                                            r"dilated kernel \(9\); output size would be -1"):
        tw.ops.max_pool2d(X, 3, dilation=4)
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: kernel_size must be >= 1, got 0"):
        tw.ops.max_pool2d(X, 0)
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: kernel_size must be an int or 2 ints, got \(2, 2, 2\)"):
        tw.ops.max_pool2d(X, (2, 2, 2))
    with pytest.raises(tw.ShapeError, match=r"avg_pool2d: stride must be >= 1, got 0"):
        tw.ops.avg_pool2d(X, 2, stride=0)
    with pytest.raises(tw.ShapeError, match=r"max_pool2d: dilation must be >= 1, got 0"):
        tw.ops.max_pool2d(X, 2, dilation=0)
    with pytest.raises(tw.ShapeError, match=r"avg_pool2d: divisor_override must be a nonzero int, got 0"):
        tw.ops.avg_pool2d(X, 2, divisor_override=0)
    I = tw.placeholder((1, 1, 4, 4), "int32", "I")  # noqa: E741
    for op in ["avg_pool2d", "adaptive_avg_pool2d", "global_avg_pool2d"]:
        args = (2,) if op != "global_avg_pool2d" else ()
        with pytest.raises(tw.DTypeError, match=rf"{op}: input 'I' has dtype int32"):
            getattr(tw.ops, op)(I, *args)
    with pytest.raises(tw.ShapeError, match=r"adaptive_avg_pool2d: output_size must be >= 1, got \(0, 0\)"):
        tw.ops.adaptive_avg_pool2d(X, 0)
    with pytest.raises(tw.ShapeError, match=r"adaptive_avg_pool2d: output_size must be an int or 2 ints"):
        tw.ops.adaptive_avg_pool2d(X, (1, 2, 3))
    with pytest.raises(tw.ShapeError, match=r"global_avg_pool2d: input 'v' must be 3-D"):
        tw.ops.global_avg_pool2d(tw.placeholder((5,), "float32", "v"))
