import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.lower.zero_taps import zero_box
from tilewright.space import apply_cpu, cpu_space, default_point


def test_the_box_of_a_padding_copy():
    x = tw.placeholder((1, 3, 5, 6), "float32", name="x")
    pad = tw.compute((1, 3, 7, 10), lambda n, c, h, w: tw.if_then_else(
        tw.logical_and(h >= 1, h - 1 < 5, w - 2 >= 0, w < 8), x[n, c, h - 1, w - 2], 0.0), name="pad")
    assert zero_box(pad.op, pad.shape) == {2: (1, 6), 3: (2, 8)}
    relu = tw.compute((1, 3, 5, 6), lambda n, c, h, w: tw.if_then_else(x[n, c, h, w] > 0, x[n, c, h, w], 0.0))
    assert zero_box(relu.op, relu.shape) is None  # a condition on values, not on positions


def _conv(kind):
    if kind == "2d":
        x = tw.placeholder((1, 8, 7, 9), "float32", name="x")
        w = tw.placeholder((16, 8, 3, 3), "float32", name="w")
        return [x, w], tw.ops.conv2d(x, w, padding=1)
    if kind == "dilated_strided":
        x = tw.placeholder((1, 8, 11, 11), "float32", name="x")
        w = tw.placeholder((16, 8, 3, 3), "float32", name="w")
        return [x, w], tw.ops.conv2d(x, w, padding=2, dilation=2, stride=2)
    if kind == "3d":
        x = tw.placeholder((1, 8, 4, 5, 6), "float32", name="x")
        w = tw.placeholder((16, 8, 3, 3, 3), "float32", name="w")
        return [x, w], tw.ops.conv3d(x, w, padding=1)
    x = tw.placeholder((1, 8, 5, 5), "float32", name="x")  # transposed, stride 2: zeros inside too
    w = tw.placeholder((8, 16, 3, 3), "float32", name="w")
    return [x, w], tw.ops.conv_transpose2d(x, w, stride=2, padding=1)


@pytest.mark.parametrize("kind", ["2d", "dilated_strided", "3d", "transposed"])
def test_border_taps_are_skipped_and_results_stay_exact(kind, rng):
    inputs, out = _conv(kind)
    space, plan = cpu_space(out, tw.as_target("cpu"))
    p = default_point(space, plan)
    outer = [lp for lp in plan.main.spatial if lp.name in ("d", "h")][0]
    p = p.replace(f"split.{outer.name}", (outer.extent, 1, 1))  # one output row per tile: its taps narrow
    kernel = check_kernel(apply_cpu(out, plan, p), [*inputs, out], rng)
    assert "tw_max_int32(0," in kernel.source  # a reduce loop starts past the taps that read padding


def test_a_reduction_that_adds_the_padding_keeps_every_tap(rng):
    # sum(pad + 1) counts the border taps: nothing may be skipped
    x = tw.placeholder((1, 8, 6, 6), "float32", name="x")
    pad = tw.compute((1, 8, 8, 8), lambda n, c, h, w: tw.if_then_else(
        tw.logical_and(h >= 1, h < 7, w >= 1, w < 7), x[n, c, h - 1, w - 1], 0.0), name="pad")
    rc, rh, rw = tw.reduce_axis(8, "rc"), tw.reduce_axis(3, "rh"), tw.reduce_axis(3, "rw")
    out = tw.compute((1, 16, 6, 6), lambda n, o, h, w: tw.sum(pad[n, rc, h + rh, w + rw] + 1.0, axis=[rc, rh, rw]),
                     name="box_sum")
    space, plan = cpu_space(out, tw.as_target("cpu"))
    kernel = check_kernel(apply_cpu(out, plan, default_point(space, plan)), [x, out], rng)
    assert "tw_max_int32(0," not in kernel.source
