"""The Vyasa passes on the AIE-like target: shuffle selections, the expert 3x3 int32 loop as the
cycle model's calibration, bit-exact kernels through the emulated intrinsics, the ablation's
direction and the errors a point the hardware cannot run gets."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import LoweringError, ScheduleError
from tilewright.lower.aie_program import LayoutSpec, Load, Mac, Store, VyasaSchedule
from tilewright.lower.vyasa import build_program, realize
from tilewright.lower.vyasa_form import conv_form
from tilewright.lower.vyasa_select import select_x16, select_x32, select_z
from tilewright.reference import evaluate
from tilewright.runtime.aie_cycles import cycles
from tilewright.runtime.aie_kernel import AIEKernel
from tilewright.workloads.vyasa import CONV3D, TABLE_VI, TABLE_VII, VyasaWorkload, random_inputs

CFG = tw.Target("aie").aie


def _form(w: VyasaWorkload, bits: int):
    inp, wgt, out = w.build(bits)
    return (inp, wgt, out), conv_form(out, CFG.acc_bits)


def _run(tensors, kernel, seed=0):
    a, b, got = random_inputs(tensors, seed)
    kernel(a, b, got)
    ref = evaluate([tensors[2]], {tensors[0]: a, tensors[1]: b})
    return got, ref[0] if isinstance(ref, (list, tuple)) else ref


def test_sliding_window_selection_for_16_bit_pairs():
    # lane i reads (x[i + s], x[i + s + 1]): even s from the lane-pair words directly, odd s through xsquare
    for s in range(6):
        sel = select_x16(tuple((i + s, i + s + 1) for i in range(16)), 64)
        assert sel is not None and sel.start % 2 == 0
    # a lane that needs two non-adjacent 16-bit values from different words is beyond the network
    assert select_x16(tuple((i, i + 5) for i in range(16)), 64) is None


def test_32_bit_and_z_selection_limits():
    assert select_x32(tuple(range(3, 11)), 16).start == 3
    assert select_x32(tuple(range(0, 32, 4)), 32) is None  # offsets past a nibble
    assert select_z(tuple((2, 3) for _ in range(16)), 16).step == 1
    assert select_z(tuple((15, 16) for _ in range(16)), 16) is None  # straddles the register


def test_expert_3x3_int32_loop_is_8_macs_per_cycle():
    """Vyasa's golden 3x3 int32 filter: per 8 outputs 9 lmac8, 6 upd_w (3 rows x 2), 2 filter loads, 1 store."""
    _, form = _form(TABLE_VI[1], 32)
    prog = build_program(form, VyasaSchedule("ax1", ("ax0", "ax1")), CFG)
    loads = [op for op in prog.body if isinstance(op, Load)]
    assert prog.count(Mac) == 9 and prog.count(Store) == 1
    assert sum(op.tensor == "x" for op in loads) == 6 and sum(op.tensor == "z" for op in loads) == 2
    rep = cycles(prog, CFG)
    assert rep.ii == 9 and rep.steady_macs_per_cycle == 8.0
    assert 7.5 < rep.macs_per_cycle < 8.0


@pytest.mark.parametrize("k,bits,jam", [(2, 16, (("ax0", 4), ("ax1", 2))), (3, 16, (("ax0", 2),)), (3, 32, ()),
                                        (5, 32, (("ax0", 2),)), (7, 16, ())])
def test_kernels_are_bit_exact_and_counted(k, bits, jam):
    tensors, form = _form(TABLE_VI[k - 2], bits)
    prog = build_program(form, VyasaSchedule("ax1", ("ax0", "ax1"), jam), CFG)
    kernel = AIEKernel(prog, CFG)
    got, ref = _run(tensors, kernel)
    np.testing.assert_array_equal(got, ref)
    trips = prog.trips
    assert kernel.counters["vector_macs"] == prog.count(Mac) * trips
    assert kernel.counters["loads"] == prog.count(Load) * trips
    assert kernel.counters["stores"] == prog.count(Store) * trips
    assert kernel.stats()["simulated"] is True


def test_odd_16_bit_filter_is_padded_with_a_zero_tap():
    _, form = _form(TABLE_VI[1], 16)  # 3x3: three taps a row, paired as (0, 1), (2, pad)
    prog = build_program(form, VyasaSchedule("ax1", ("ax0", "ax1")), CFG)
    assert prog.count(Mac) == 6 and prog.layouts["z"].padded == (3, 4)
    assert cycles(prog, CFG).steady_macs_per_cycle == pytest.approx(32 * 9 / 12)


def test_each_pass_pays_for_itself_in_the_model():
    _, form = _form(TABLE_VI[2], 16)
    sched = dict(vector_axis="ax1", order=("ax0", "ax1"), jam=(("ax0", 2),))
    full = cycles(build_program(form, VyasaSchedule(**sched), CFG), CFG).cycles
    for off in ("reuse_graph", "lazy_stores", "fuse_columns"):
        prog = build_program(form, VyasaSchedule(**sched, **{off: False}), CFG)
        assert cycles(prog, CFG).cycles > 1.25 * full, off


def test_register_file_and_accumulators_bound_the_jam():
    _, form = _form(TABLE_VI[9], 32)  # 11x11: a wide window per row
    with pytest.raises(ScheduleError, match="register"):
        build_program(form, VyasaSchedule("ax1", ("ax0", "ax1"), (("ax1", 4),)), CFG)
    _, form = _form(TABLE_VI[2], 32)  # 4x4 over 4 rows x 2 vectors: row 3 feeds 8 outputs at once
    with pytest.raises(ScheduleError, match="accumulators"):
        build_program(form, VyasaSchedule("ax1", ("ax0", "ax1"), (("ax0", 4), ("ax1", 2))), CFG)


def test_overflow_needs_declared_ranges():
    inp = tw.placeholder((18, 258), "int32", name="I")  # full int32: 9 products overflow the int64 sum
    wgt = tw.placeholder((3, 3), "int32", name="W")
    ry, rx = tw.reduce_axis((0, 3), "ry"), tw.reduce_axis((0, 3), "rx")
    acc = tw.compute((16, 256), lambda y, x: tw.sum(inp[y + ry, x + rx].astype("int64")
                                                   * wgt[ry, rx].astype("int64"), axis=[ry, rx]))
    out = tw.ops.shift_round_saturate(acc, 0, "int32")
    with pytest.raises(LoweringError, match="value_range"):
        conv_form(out, CFG.acc_bits)


def test_output_width_must_match_the_datapath():
    inp = tw.placeholder((18, 258), "int16", name="I")
    wgt = tw.placeholder((3, 3), "int16", name="W")
    ry, rx = tw.reduce_axis((0, 3), "ry"), tw.reduce_axis((0, 3), "rx")
    acc = tw.compute((16, 256), lambda y, x: tw.sum(inp[y + ry, x + rx].astype("int64")
                                                   * wgt[ry, rx].astype("int64"), axis=[ry, rx]))
    with pytest.raises(LoweringError, match="shift_round_saturate"):
        conv_form(tw.ops.shift_round_saturate(acc, 4, "int8"), CFG.acc_bits)


LAYER_SCHEDULES = [  # (workload, bits, schedule): points the tuner found, fixed here
    (TABLE_VII[0], 16, VyasaSchedule("k", ("k", "yy", "xx"), (("yy", 2),),
                                     (LayoutSpec((1, 2, 0)), LayoutSpec((0, 2, 3, 1), ((0, 16),))), False)),
    (TABLE_VII[3], 32, VyasaSchedule("k", ("k", "yy", "xx"), (("k", 2), ("yy", 2)),
                                     (LayoutSpec((1, 2, 0)), LayoutSpec((0, 2, 3, 1), ((0, 8),))))),
    (TABLE_VII[6], 16, VyasaSchedule("xx", ("yy", "xx", "kk"), (("yy", 2), ("xx", 2)))),
    (TABLE_VII[7], 16, VyasaSchedule("kk", ("kk",), (("kk", 8),), (None, LayoutSpec((0, 1), ((0, 16),))), False)),
    (CONV3D[0], 16, VyasaSchedule("ax0", ("ax1", "ax0", "ax2"), (("ax1", 2), ("ax2", 2)),
                                  (LayoutSpec((1, 2, 0)), LayoutSpec((1, 2, 0))))),
]


@pytest.mark.parametrize("w,bits,schedule", LAYER_SCHEDULES, ids=[f"{w.name}-{b}" for w, b, _ in LAYER_SCHEDULES])
def test_layer_layouts_are_bit_exact(w, bits, schedule):
    """Table VII's layers and a CONV3D run through the layouts Vyasa's tuner explores: channels
    innermost for the broadcast operand, the output channels blocked by the lanes for the streamed one."""
    tensors, form = _form(w, bits)
    kernel = AIEKernel(build_program(form, schedule, CFG), CFG)
    got, ref = _run(tensors, kernel, seed=2)
    np.testing.assert_array_equal(got, ref)
    assert kernel.report.macs_per_cycle > 0.7 * CFG.peak_macs(bits)


def test_layout_spec_offsets_and_names():
    spec = LayoutSpec((0, 2, 3, 1), ((0, 16), (1, 2)))  # (K/16)SR(C/2)(16)(2) of a [K, C, S, R] weight
    assert spec.describe("KCSR") == "(K/16)SR(C/2)(16)(2)"
    lay = realize((32, 8, 3, 3), spec, (32, 8, 3, 3), 8, 16)
    assert lay.offset((0, 0, 0, 0)) == 0 and lay.offset((1, 0, 0, 0)) == 2 and lay.offset((0, 1, 0, 0)) == 1
    assert lay.offset((16, 0, 0, 0)) == 3 * 3 * 4 * 16 * 2
