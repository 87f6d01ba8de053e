"""The CPU space: built from the analysis, every point schedules correctly."""

import random

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.ir.stmt import Store
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.space import apply_cpu, cpu_space, default_point, heuristic_points
from tilewright.space.cpu import pack_repeats
from tilewright.space.cpu_knobs import PACK, PLACE
from tilewright.space.cpu_plan import outer_orders, vector_position


def gemm(n=24, m=40, k=18):
    A = tw.placeholder((n, k), "float32", name="A")
    B = tw.placeholder((k, m), "float32", name="B")
    return [A, B], tw.ops.matmul(A, B)


def conv_bias_relu():
    x = tw.placeholder((1, 6, 9, 9), "float32", name="x")
    w = tw.placeholder((8, 6, 3, 3), "float32", name="w")
    b = tw.placeholder((8,), "float32", name="b")
    return [x, w, b], tw.ops.relu(tw.ops.conv2d(x, w, b, padding=1))


def depthwise():
    x = tw.placeholder((1, 8, 10, 10), "float32", name="x")
    w = tw.placeholder((8, 1, 3, 3), "float32", name="w")
    return [x, w], tw.ops.depthwise_conv2d(x, w, stride=2, padding=1)


def test_structure_comes_from_the_analysis():
    target = AVX2
    _, y = conv_bias_relu()
    space, plan = cpu_space(y, target)
    assert plan.main.name == "conv2d_sum" and plan.anchor.name == "relu"
    assert [n.name for n in plan.inlined] == ["conv2d"] and [n.name for n in plan.producers] == ["conv2d_pad"]
    assert {"split.o", "split.h", "split.w", "split.rc", "split.rh", "split.rw", "reduce_order", "pack.w",
            "place.conv2d_pad"} <= set(space.knobs)


def gemv(m=36, k=64):
    A = tw.placeholder((m, k), "float32", name="A")
    x = tw.placeholder((k,), "float32", name="x")
    return [A, x], tw.ops.mv(A, x)


def conv1x1_bias_relu():  # scheduled with (h, w) merged into one axis (analysis/axis_merge.py)
    x = tw.placeholder((1, 16, 5, 7), "float32", name="x")
    w = tw.placeholder((24, 16, 1, 1), "float32", name="w")
    b = tw.placeholder((24,), "float32", name="b")
    return [x, w, b], tw.ops.relu(tw.ops.conv2d(x, w, b))


@pytest.mark.parametrize("program", [gemm, conv_bias_relu, depthwise, gemv, conv1x1_bias_relu])
def test_random_points_build_correct_kernels(program):
    target = tw.as_target("cpu")
    inputs, out = program()
    space, plan = cpu_space(out, target)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape, dtype=np.float32) for t in inputs]
    want = tw.evaluate(out, dict(zip(inputs, arrays)))
    pyrng = random.Random(1)
    points = [default_point(space, plan)] + [space.sample(pyrng) for _ in range(4)]
    for p in points:
        kernel = tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target)
        got = np.zeros(out.shape, np.float32)
        kernel(*arrays, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(p))


def short_rows_conv():
    x = tw.placeholder((1, 8, 5, 5), "float32", name="x")
    w = tw.placeholder((32, 8, 3, 3), "float32", name="w")
    return [x, w], tw.ops.conv2d(x, w, padding=1)


def _check(out, inputs, kernel):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape, dtype=np.float32) for t in inputs]
    got = np.zeros(out.shape, np.float32)
    kernel(*arrays, got)
    want = tw.evaluate(out, dict(zip(inputs, arrays)))
    # fp32 sums of many terms: the error scales with the largest output, not each one
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def _host_with_lanes(lanes: int):
    """The synthetic AVX2 target (8 lanes, full-width FMA units): defaults must not follow the host;
    skipped where the host cannot run AVX2 kernels."""
    assert AVX2.vector_lanes(4) >= lanes
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    return AVX2


def test_default_vectorizes_output_channels_when_rows_are_short():
    """Rows of 5 hold no vector: the default vectorizes along output channels, packs the weights with
    channels innermost once per channel block, and keeps the accumulators in vector registers."""
    target = _host_with_lanes(4)
    inputs, out = short_rows_conv()
    space, plan = cpu_space(out, target)
    p = default_point(space, plan)
    assert plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name == "o"
    assert PACK[p["pack.w"]] in ("outer", "root")  # root: the parallel loop fuses h, which does not index w
    kernel = tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target)
    _check(out, inputs, kernel)
    assert "conv2d_sum_local[" not in kernel.source  # promoted to registers
    assert "w_global[" in kernel.source


@pytest.mark.parametrize("vec_axis", [0, 1])
@pytest.mark.parametrize("pack", range(len(PACK)))
def test_every_vector_axis_and_packing_is_correct(vec_axis, pack):
    target = tw.as_target("cpu")
    inputs, out = conv_bias_relu()
    space, plan = cpu_space(out, target)
    if "vec_axis" not in space.knobs:
        pytest.skip("the host has no vectors")
    values = dict(space.sample(random.Random(vec_axis * 3 + pack)).values)
    values.update({"vec_axis": vec_axis, "pack.w": pack, "split.o": (1, 2, 4), "split.h": (9, 1, 1),
                   "split.w": (1, 3, 3)})
    p = space.check(type(default_point(space, plan))(tuple((k, values[k]) for k in space.knobs)))
    _check(out, inputs, tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target))


def test_heuristic_points_are_distinct_valid_and_start_with_the_default():
    for _inputs, out in (gemm(), conv_bias_relu(), depthwise()):
        space, plan = cpu_space(out, AVX2)
        points = heuristic_points(space, plan, k=4)
        assert points[0] == default_point(space, plan)
        assert len(set(points)) == len(points) and all(space.valid(p) for p in points)


def test_reduce_loops_stay_rolled_around_a_register_tile_that_fills_the_registers():
    """A tile whose accumulators leave fewer than ROLL_FREE_REGISTERS registers keeps the reduce
    loops rolled (the compiler would spill sharing operands across unrolled copies); the other
    choice is among the first points measured."""
    from tilewright.space.cpu import vector_width
    from tilewright.space.cpu_tiles import ROLL_FREE_REGISTERS

    target = _host_with_lanes(8)
    for _inputs, out in (gemm(96, 64, 32), conv_bias_relu()):
        space, plan = cpu_space(out, target)
        p = default_point(space, plan)
        vec = plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name if "vec_axis" in \
            space.knobs else plan.main.spatial[-1].name
        tile = {lp.name: p[f"split.{lp.name}"][2] for lp in plan.main.spatial if f"split.{lp.name}" in space.knobs}
        # one register per vector of the widest width dividing the vector tile (half vectors on
        # a 16-lane host for 8 output channels), one per element of scalar code
        accumulators = np.prod(list(tile.values())) // vector_width(tile.get(vec, 1), plan.lanes)
        assert p["rolled"] == int(accumulators > plan.registers - ROLL_FREE_REGISTERS)
        assert {q["rolled"] for q in heuristic_points(space, plan)} == {0, 1}
        kernel = tw.build(apply_cpu(out, plan, p), [*_inputs, out], target=target)
        _check(out, _inputs, kernel)
        assert ("#pragma GCC unroll 1" in kernel.source) == bool(p["rolled"])


def test_default_register_tile_reuses_operands():
    """The modelled register tile shares loads across rows: a 1x1 conv's rows never run along
    an image axis while its vector also runs along the image (every row would load its own
    input vector); a group conv's input channel o // 16 is one broadcast across an 8-lane vector
    along o (the dense conv's register tile) and the kernel's FMAs are vector statements."""
    target = _host_with_lanes(8)
    x = tw.placeholder((1, 32, 16, 16), "float32", name="x")
    w = tw.placeholder((64, 32, 1, 1), "float32", name="w")
    out = tw.ops.conv2d(x, w)
    space, plan = cpu_space(out, target)
    p = default_point(space, plan)
    vec = plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name
    rows = {lp.name for lp in plan.main.spatial if lp.extent > 1 and p[f"split.{lp.name}"][2] > 1} - {vec}
    assert vec == "o" or rows == {"o"}
    for out_channels, groups, want in ((64, 4, "o"),):
        g = tw.placeholder((out_channels, 32 // groups, 3, 3), "float32", name="g")
        grouped = tw.ops.conv2d(x, g, padding=1, groups=groups)
        space, plan = cpu_space(grouped, target)
        p = default_point(space, plan)
        assert plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name == want
        sched = apply_cpu(grouped, plan, p)
        _check(grouped, [x, g], tw.build(sched, [x, g, grouped], target=target))
        updates = [st for st in walk_stmt(tw.lower(sched, [x, g, grouped]).body)
                   if isinstance(st, Store) and "local" in st.buffer.name]
        assert updates and all(st.value.dtype.lanes > 1 for st in updates)  # vector FMAs, no lane loops


def test_reduction_blocking_when_the_operand_panel_outgrows_l2():
    """With a (pretend) 16 KB L2, a conv's weight panel of 64 channels x 3 x 3 x one vector of
    outputs does not fit in half of it: the default blocks the channel reduction, keeps the
    middle tiles' accumulators in a local block, packs the weights per block, and is correct;
    the unblocked variant is among the points measured first."""
    from dataclasses import replace

    target = _host_with_lanes(4)
    small_l2 = replace(target, caches=((1, "Data", 8192), (2, "Unified", 16384)))
    x = tw.placeholder((1, 64, 10, 10), "float32", name="x")
    w = tw.placeholder((16, 64, 3, 3), "float32", name="w")
    out = tw.ops.conv2d(x, w, padding=1)
    space, plan = cpu_space(out, small_l2)
    p = default_point(space, plan)
    assert p["reduce_block"] == 1 and p["split.rc"][0] > 1
    assert any(q["reduce_block"] == 0 for q in heuristic_points(space, plan))
    kernel = tw.build(apply_cpu(out, plan, p), [x, w, out], target=target)
    _check(out, [x, w], kernel)


def test_the_blocked_twin_the_panel_does_not_ask_for_is_sized_by_every_operand():
    """R50 l4_down on AVX2 (1x1, stride 2, 1024 -> 2048 channels, 7x7 out): one register tile's
    weight panel (8 outputs x 1024 channels, 32 KB) does not call for blocking, so the default is
    unblocked; the blocked twin the tuner measures first keeps a block of the weights *and* of
    the input rows the middle tiles share within half of L1 (64 channels x (8 + 49) floats),
    not 256 channels sized by the weights alone (1.29 ms against 1.76 on Zen 4)."""
    x = tw.placeholder((1, 1024, 14, 14), "float32", name="x")
    w = tw.placeholder((2048, 1024, 1, 1), "float32", name="w")
    out = tw.ops.conv2d(x, w, stride=2)
    space, plan = cpu_space(out, AVX2)
    assert default_point(space, plan)["reduce_block"] == 0
    twins = [q for q in heuristic_points(space, plan) if q["reduce_block"] == 1]
    assert twins and twins[0]["split.rc"] == (16, 64) and twins[0]["split.h"][1] == 7


def test_reduction_blocking_for_l1_when_one_channel_slab_fits():
    """A 3x3 conv over 256 channels: the weight panel of one output-channel vector block
    (256 x 9 x 16 x 4 B = 147 KB) outgrows 3 x L1 but fits L2, so the default blocks the
    channel loop to a third of L1 and packs the panel once (per outer block, or once per call
    where the parallel loop runs over blocks that do not index the weights)."""
    from dataclasses import replace

    target = _host_with_lanes(8)
    caches = replace(target, caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)))
    x = tw.placeholder((1, 256, 12, 12), "float32", name="x")
    w = tw.placeholder((32, 256, 3, 3), "float32", name="w")
    out = tw.ops.conv2d(x, w, padding=1)
    space, plan = cpu_space(out, caches)
    p = default_point(space, plan)
    block = p["split.rc"][1] * 9 * p["split.o"][2] * 4
    assert p["reduce_block"] == 1 and block <= 32 * 1024 // 3
    assert PACK[p["pack.w"]] in ("outer", "root") and pack_repeats(plan, p, w) == 1
    _check(out, [x, w], tw.build(apply_cpu(out, plan, p), [x, w, out], target=target))


def test_gemv_default_sums_in_lanes_along_the_reduction():
    """A GEMV reads its matrix once: the default vectorizes along k (lane sums) with rows of one
    vector each and packs nothing; a GEMM (whose B the k loop indexes in its first dimension) has
    no such option."""
    target = _host_with_lanes(4)
    inputs, out = gemv()
    space, plan = cpu_space(out, target)
    p = default_point(space, plan)
    assert p["vec_reduce"] == 1 and p["split.k"] == (1, 64) and p["pack.A"] == 0
    _check(out, inputs, tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target))
    assert "vec_reduce" not in cpu_space(gemm()[1], target)[0].knobs


def bilinear_form(batch=32, in1=64, in2=256, out=16):
    x1 = tw.placeholder((batch, in1), "float32", name="x1")
    x2 = tw.placeholder((batch, in2), "float32", name="x2")
    w = tw.placeholder((out, in1, in2), "float32", name="w")
    return [x1, x2, w], tw.ops.bilinear(x1, x2, w)


def _tile(space, plan, p, name):
    return p[f"split.{name}"][2] if f"split.{name}" in space.knobs else 1


def test_bilinear_default_streams_its_weight_once_per_row_block():
    """A bilinear form's largest operand is w[m, k1, k2], read by rows of m: the default keeps
    the batch loop (which does not index w) inside the blocked reduction, and no middle tiles
    along m, so every core reads its own rows of w once instead of once per batch tile; it
    vectorizes along the batch (w along m would need a transposed copy of all of w for few
    uses); nothing is packed per block while the whole panel fits in L2, and nothing twice."""
    from dataclasses import replace

    target = _host_with_lanes(8)
    caches = replace(target, caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)), cores=2)
    inputs, out = bilinear_form()
    space, plan = cpu_space(out, caches)
    p = default_point(space, plan)
    vec = plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name
    assert vec == "n" and p["reduce_block"] == 1 and p["split.k1"][0] > 1
    batch_tiles = 32 // _tile(space, plan, p, "n")
    assert p["split.n"][0] <= max(1, batch_tiles // 2) and p["split.m"][1] == 1
    assert PACK[p["pack.w"]] == "none"
    for t in inputs[:2]:
        assert PACK[p[f"pack.{t.name}"]] in ("outer", "root") and pack_repeats(plan, p, t) == 1
    _check(out, inputs, tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target))


def test_blocked_bilinear_packs_per_block_only_what_the_blocked_loop_indexes():
    """When the panel outgrows a (pretend) 32 KB L2, operands are packed per reduction block
    only if the blocked loop (k1) indexes them: x1[n, k1] per block, x2[n, k2] once (it is the
    same for every block of k1)."""
    from dataclasses import replace

    target = _host_with_lanes(8)
    small = replace(target, caches=((1, "Data", 8192), (2, "Unified", 32768)), cores=2)
    inputs, out = bilinear_form()
    space, plan = cpu_space(out, small)
    p = default_point(space, plan)
    assert p["reduce_block"] == 1 and PACK[p["pack.x1"]] == "tile" and pack_repeats(plan, p, inputs[1]) == 1
    _check(out, inputs, tw.build(apply_cpu(out, plan, p), [*inputs, out], target=target))


def test_middle_tiles_leave_two_parallel_blocks_per_core():
    """Reduction blocking moves outer iterations into middle tiles only while the parallel loops
    keep two blocks per core: a batch-3 conv on a (pretend) 4-core host keeps at least 8."""
    import math
    from dataclasses import replace

    from tilewright.space.cpu import outer_orders

    target = _host_with_lanes(8)
    four = replace(target, cores=4, caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)))
    x = tw.placeholder((3, 256, 8, 8), "float32", name="x")
    w = tw.placeholder((16, 256, 3, 3), "float32", name="w")
    out = tw.ops.conv2d(x, w, padding=1)
    space, plan = cpu_space(out, four)
    p = default_point(space, plan)
    sp = plan.main.spatial
    fused = outer_orders(plan)[p["outer_order"]][:p["fuse"] + 1]
    assert p["reduce_block"] == 1
    assert math.prod(p[f"split.{sp[q].name}"][0] for q in fused if f"split.{sp[q].name}" in space.knobs) >= 8
    _check(out, [x, w], tw.build(apply_cpu(out, plan, p), [x, w, out], target=target))


def test_heuristic_points_without_an_operand_along_the_reduction():
    """A 1x1 depthwise conv's only reduce axes have extent 1 and the axis merge fixes them, so no
    operand varies along the reduction: there is no panel to block, and the first-measured
    points are still valid and correct."""
    target = _host_with_lanes(4)
    x = tw.placeholder((2, 16, 7, 7), "float32", name="x")
    w = tw.placeholder((16, 1, 1, 1), "float32", name="w")
    out = tw.ops.depthwise_conv2d(x, w)
    space, plan = cpu_space(out, target)
    points = heuristic_points(space, plan)
    assert points and all(space.valid(p) for p in points)
    _check(out, [x, w], tw.build(apply_cpu(out, plan, points[-1]), [x, w, out], target=target))


def test_register_rows_never_alias_one_l1_set():
    """Rows of m of w[m, k1, k2] with k1 * k2 * 4 B a multiple of 4 KB all map to one set of
    a 32 KB 8-way L1: no modelled register tile (default or first-measured) holds more rows
    along m than the L1 has ways, and with a 4-way L1 no more than 4."""
    from dataclasses import replace

    target = _host_with_lanes(8)
    inputs, out = bilinear_form(batch=32, in1=16, in2=256, out=32)
    for ways in (8, 4):
        l1 = replace(target, l1_ways=ways, caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)))
        space, plan = cpu_space(out, l1)
        assert plan.l1_ways == ways
        for p in heuristic_points(space, plan):
            vec = plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name
            assert vec == "m" or _tile(space, plan, p, "m") <= ways


def test_group_conv_rows_do_not_straddle_groups():
    """A 1x1 group conv reads input channel o // 32 * C + c: rows along o share that broadcast only
    when a tile stays inside one group, so a register tile along o divides the group's 32 outputs."""
    target = _host_with_lanes(8)
    x = tw.placeholder((1, 64, 28, 28), "float32", name="x")
    w = tw.placeholder((128, 16, 1, 1), "float32", name="w")
    out = tw.ops.conv2d(x, w, groups=4)
    space, plan = cpu_space(out, target)
    for p in heuristic_points(space, plan):
        assert 32 % _tile(space, plan, p, "o") == 0
    p = default_point(space, plan)
    _check(out, [x, w], tw.build(apply_cpu(out, plan, p), [x, w, out], target=target))


def test_packing_cost_counts_only_transposing_copies():
    """The register-tile model charges a packed copy that reorders an operand for the vector (a
    conv's w[o, c, 1, 1] along o), spread over every tile step; a transposed conv's w[c, o, 1, 1]
    is already contiguous along o and costs nothing."""
    from tilewright.space.cpu_tiles import pack_cycles

    target = _host_with_lanes(8)
    x = tw.placeholder((1, 64, 14, 14), "float32", name="x")
    for w_shape, op, charged in (((128, 64, 1, 1), tw.ops.conv2d, True),
                                 ((64, 128, 1, 1), tw.ops.conv_transpose2d, False)):
        w = tw.placeholder(w_shape, "float32", name="w")
        space, plan = cpu_space(op(x, w), target)
        o = next(n for n, lp in enumerate(plan.main.spatial) if lp.name == "o")
        assert any(t is w for t in plan.main.inputs)  # the main node reads w itself
        assert (pack_cycles(plan, w, {}, o, 16) > 0) == charged


def test_a_reshape_then_permute_is_one_copy():
    """Neither node does arithmetic: the last (the permute) is the main node and the reshape its
    producer, inlined by default, so the default copies once (no intermediate buffer)."""
    x = tw.placeholder((1, 16, 96), "float32", name="x")
    y = tw.ops.permute(tw.ops.reshape(x, (1, 16, 3, 32)), (0, 2, 1, 3))
    space, plan = cpu_space([y], AVX2)
    assert plan.main.tensor is y and [p.name for p in plan.producers] == ["reshape"]
    s = apply_cpu([y], plan, default_point(space, plan))
    assert "allocate reshape" not in str(tw.lower(s, [x, y]))  # register tiles only
    if host_runs(AVX2):
        a = np.random.default_rng(0).standard_normal(x.shape).astype("float32")
        out = np.empty(y.shape, "float32")
        tw.build(s, [x, y], target=AVX2)(a, out)
        np.testing.assert_array_equal(out, a.reshape(1, 16, 3, 32).transpose(0, 2, 1, 3))


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_padding_is_inlined_and_a_dense_convs_copied(stride):
    """A depthwise conv reads each padded element at most 9 times (3x3 window): packed NCHW8c,
    vectorized along the channels, the default inlines its padding; in NCHW it is vectorized along
    w, where the guard differs between lanes, and copied once; a dense conv reads its padding
    9 x 8 / stride^2 times per element or more: copied once."""
    x = tw.placeholder((1, 8, 16, 16), "float32", name="x")
    xc = tw.placeholder((1, 1, 16, 16, 8), "float32", name="xc")
    packed = tw.ops.depthwise_conv2d_nchwc(xc, tw.placeholder((1, 1, 3, 3, 1, 8), "float32", name="w"),
                                           stride=stride, padding=1)
    dw = tw.ops.depthwise_conv2d(x, tw.placeholder((8, 1, 3, 3), "float32", name="w"), stride=stride, padding=1)
    dense = tw.ops.conv2d(x, tw.placeholder((8, 8, 3, 3), "float32", name="w"), stride=stride, padding=1)
    for y, want in ((packed, "inline"), (dw, "root"), (dense, "root")):
        space, plan = cpu_space([y], AVX2)
        (key,) = [k for k in space.knobs if k.startswith("place.")]
        assert PLACE[dict(default_point(space, plan).values)[key]] == want, y.name


def test_layer_norm_sums_squares_along_its_rows():
    """The main node (the sum of squared deviations) reads each element once: lane sums along the
    row, however much arithmetic the group's other stages add (2.5x faster than packing the rows
    transposed for BERT's 128 x 768, Zen 1)."""
    x = tw.placeholder((16, 64), "float32", name="x")
    y = tw.ops.layer_norm(x, 64)
    space, plan = cpu_space([y], AVX2)
    assert plan.main.name.endswith("sqdev")
    assert dict(default_point(space, plan).values)["vec_reduce"] == 1


@pytest.mark.parametrize("hw, cin, cout, split", [(14, 384, 64, "pixels"), (7, 960, 160, "channels")])
def test_a_1x1_conv_splits_its_larger_operand_between_the_cores(hw, cin, cout, split):
    """MobileNet-v2's 14x14 projection (residual add, weights packed once) reads 301 KB of
    activations and 98 KB of weights: the default's parallel loop splits the pixels, so each core
    reads half the activations and all of the weights, from its L2. Its 7x7 layers' weights
    outweigh their activations and exceed a quarter of L2: the output channels stay split."""
    x = tw.placeholder((1, cin // 8, hw, hw, 8), "float32", name="x")
    w = tw.placeholder((cout // 8, cin // 8, 1, 1, 8, 8), "float32", name="w")
    r = tw.placeholder((1, cout // 8, hw, hw, 8), "float32", name="r")
    c = tw.ops.conv2d_nchwc(x, w)
    y = tw.compute(c.shape, lambda *i: c[i] + r[i], name="add")
    space, plan = cpu_space([y], AVX2, constants=[w])
    p = dict(default_point(space, plan).values)
    sp = plan.main.spatial
    order = outer_orders(plan)[p["outer_order"]]
    first = next(sp[i].name for i in order if p.get(f"split.{sp[i].name}", (1,))[0] > 1)  # of several blocks
    assert first == {"pixels": "hw", "channels": "o"}[split]


def test_block_transposed_pack_is_cheap_where_weights_stay_in_cache():
    """R50 l4_reduce2 (1x1, 2048 -> 512 channels, 7x7) on AVX2: vectorized along the output
    channels, its weights are packed in every call. The C backend copies them in 8 x 8 block
    transposes; with 4 MB of weights and their copy inside half of a 32 MB last-level cache
    that costs a fifth of a scalar copy, so the default vectorizes along o (measured on Zen 4:
    0.60 ms against 0.88 for the h*w tile the scalar rate chose). With a 512 KB last level the
    copy streams from memory and the h*w tile stays."""
    from dataclasses import replace

    x = tw.placeholder((1, 2048, 7, 7), "float32", name="x")
    w = tw.placeholder((512, 2048, 1, 1), "float32", name="w")
    out = tw.ops.conv2d(x, w)
    with_l3 = replace(AVX2, caches=AVX2.caches + ((3, "Unified", 32 * 1024 * 1024),))
    picks = {}
    for name, target in (("l3", with_l3), ("l2 only", AVX2)):
        space, plan = cpu_space(out, target)
        p = default_point(space, plan)
        picks[name] = plan.main.spatial[vector_position(p, plan)].name
    assert picks == {"l3": "o", "l2 only": "hw"}


def test_a_reduction_to_a_scalar_builds_and_tunes(tmp_path):
    """A main node without spatial loops (a sum over every axis, a layer norm over every axis) has
    one point, the plain loop nest; it once left the space with an empty knob."""
    x = tw.placeholder((5, 7), "float32", name="x")
    i, j = tw.reduce_axis(5, "i"), tw.reduce_axis(7, "j")
    total = tw.compute((), lambda: tw.sum(x[i, j], axis=[i, j]), name="total")
    normed = tw.ops.layer_norm(x, (5, 7))
    a = np.random.default_rng(0).random((5, 7), dtype=np.float32)
    for y in (total, normed):
        space, plan = cpu_space([y], AVX2)
        assert len(heuristic_points(space, plan)) >= 1
        if not host_runs(AVX2):
            continue
        kernels = [tw.build([x, y], target=AVX2),
                   tw.tune([x, y], target=AVX2, trials=2, records=tmp_path / "r.db").build()]
        for kernel in kernels:
            out = np.zeros(y.shape, np.float32)
            kernel(a, out)
            np.testing.assert_allclose(out, tw.evaluate(y, {x: a}), rtol=1e-5, atol=1e-6)


def test_an_elementwise_chain_behind_an_inlined_producer_is_inlined(rng):
    """GPT-2's tanh GELU spelled out: every stage before the inlined producers runs inside the
    vectorized tile instead of a pass of its own over a temporary."""
    from tilewright.schedule.stage import AttachKind

    x = tw.placeholder((4, 64), "float32", name="x")
    cube = tw.compute(x.shape, lambda i, j: x[i, j] * x[i, j] * x[i, j], name="cube")
    inner = tw.compute(x.shape, lambda i, j: (x[i, j] + cube[i, j] * 0.044715) * 0.7978846, name="inner")
    th = tw.compute(x.shape, lambda i, j: tw.tanh(inner[i, j]), name="th")
    half = tw.compute(x.shape, lambda i, j: x[i, j] * 0.5, name="half")
    y = tw.compute(x.shape, lambda i, j: half[i, j] * (th[i, j] + 1.0), name="y")
    space, plan = cpu_space([y], AVX2)
    s = apply_cpu([y], plan, default_point(space, plan))
    assert plan.main.tensor.name == "inner" and s[inner].attach is AttachKind.AT  # the tile
    assert all(s[t].attach is AttachKind.INLINE for t in (cube, th, half))  # half: read by the epilogue alone
    if not host_runs(AVX2):
        return
    a = rng.standard_normal((4, 64)).astype(np.float32)
    out = np.zeros((4, 64), np.float32)
    tw.build([x, y], target=AVX2)(a, out)
    np.testing.assert_allclose(out, tw.evaluate(y, {x: a}), rtol=1e-5, atol=1e-6)
