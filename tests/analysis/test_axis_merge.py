import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.analysis.axis_merge import merge_contiguous_axes
from tilewright.errors import MeasureError
from tilewright.space import apply_cpu, cpu_space, default_point


def conv1x1_bias_relu(padding=0):
    x = tw.placeholder((1, 16, 5, 7), "float32", name="x")
    w = tw.placeholder((24, 16, 1, 1), "float32", name="w")
    b = tw.placeholder((24,), "float32", name="b")
    return [x, w, b], tw.ops.relu(tw.ops.conv2d(x, w, b, padding=padding))


def test_a_1x1_conv_with_its_epilogue_becomes_a_matrix_product_over_rows_times_columns(rng):
    inputs, out = conv1x1_bias_relu()
    merged = merge_contiguous_axes(out)
    assert merged is not None
    (new_out,) = merged.outputs
    assert new_out.shape == (1, 24, 35) and new_out.name == out.name
    x, w, b = inputs
    assert merged.views[id(x)].shape == (1, 16, 35) and merged.views[id(out)].shape == (1, 24, 35)
    assert id(w) not in merged.views and id(b) not in merged.views  # read without the merged axes
    space, plan = cpu_space(out, tw.as_target("cpu"))
    assert [lp.extent for lp in plan.main.spatial] == [1, 24, 35] and not plan.main.reduce[1:]
    kernel = check_kernel(apply_cpu(out, plan, default_point(space, plan)), [*inputs, out], rng)  # 4-D arrays
    with pytest.raises(MeasureError, match=r"shape \[1, 16, 35\], expected \[1, 16, 5, 7\]"):
        kernel(np.zeros((1, 16, 35), np.float32), np.zeros((24, 16, 1, 1), np.float32),
               np.zeros(24, np.float32), np.zeros((1, 24, 5, 7), np.float32))


@pytest.mark.parametrize("case", ["padded", "3x3", "gemm", "transposed_read", "fixed_read"])
def test_axes_stay_apart_where_some_access_is_not_contiguous(case):
    if case == "padded":  # the padding's condition uses h and w on their own
        _, out = conv1x1_bias_relu(padding=1)
    elif case == "3x3":  # x[.., h + rh, w + rw]
        x = tw.placeholder((1, 4, 6, 6), "float32", name="x")
        out = tw.ops.conv2d(x, tw.placeholder((8, 4, 3, 3), "float32", name="w"), padding=1)
    elif case == "gemm":  # A[i, k] * B[k, j]: i and j index different tensors
        out = tw.ops.matmul(tw.placeholder((8, 4), "float32", name="A"), tw.placeholder((4, 8), "float32", name="B"))
    elif case == "transposed_read":
        a = tw.placeholder((6, 6), "float32", name="a")
        out = tw.compute((6, 6), lambda i, j: a[i, j] + a[j, i], name="sym")
    else:  # a[i, j] merges, but a[2, 3] reads the same tensor at a fixed element
        a = tw.placeholder((6, 6), "float32", name="a")
        out = tw.compute((6, 6), lambda i, j: a[i, j] * a[2, 3], name="scaled")
    assert merge_contiguous_axes(out) is None


def test_caller_tensors_still_name_stages_and_arguments_after_the_merge(rng):
    # sc keeps its shape but is rebuilt; passing it as an argument must still bind
    x = tw.placeholder((2, 4, 3, 5), "float32", name="x")
    B = tw.placeholder((4, 6), "float32", name="B")
    k = tw.reduce_axis(6, "k")
    sc = tw.compute((4,), lambda c: tw.sum(B[c, k], axis=k), name="sc")
    out = tw.compute((2, 4, 3, 5), lambda n, c, h, w: x[n, c, h, w] * sc[c], name="out")
    space, plan = cpu_space(out, tw.as_target("cpu"))
    assert [lp.extent for lp in plan.main.spatial] == [2, 4, 15]  # out, merged, does the most arithmetic
    s = apply_cpu(out, plan, default_point(space, plan))
    assert s[out].tensor.shape == (2, 4, 15) and s.stage_of(sc) is not None
    kernel = tw.build(s, [x, B, sc, out])
    xs, bs = rng.standard_normal(x.shape, dtype=np.float32), rng.standard_normal(B.shape, dtype=np.float32)
    got_sc, got = np.zeros(4, np.float32), np.zeros(out.shape, np.float32)
    kernel(xs, bs, got_sc, got)
    want_sc, want = tw.evaluate([sc, out], {x: xs, B: bs})
    np.testing.assert_allclose(got_sc, want_sc, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "(caller's shape [2, 4, 3, 5])" in str(tw.lower(s, [x, B, sc, out]))
