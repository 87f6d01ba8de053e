"""The `pressure_sched` knob (space/cpu_default.pressure_scheduled) and the compiler hint it
sets (Schedule.compiler_hint): present only where the compiler is GCC, on by default exactly
where a tile's accumulators and one reduction step's operand reads fit the register file,
measured both ways among the first points, carried through the trace into the C source, and
old records (written before the knob) still read as the points they measured."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.errors import ScheduleError
from tilewright.schedule.trace import Trace
from tilewright.search.features import FEATURE_NAMES, loop_nest_features
from tilewright.space import apply_cpu, cpu_space, default_point
from tilewright.space.cpu_default import heuristic_points
from tilewright.space.space import Point
from tilewright.targets import ISA_FEATURES, Target
from tilewright.workloads.builders import suite_program

ATTRIBUTE = '__attribute__((optimize("schedule-insns", "sched-pressure")))'


def avx2(compiler_version: str) -> Target:
    return Target(kind="cpu", arch="x86_64", cores=2, features=frozenset(ISA_FEATURES["avx2"]), isa="avx2",
                  caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)), l1_ways=8, compiler="cc",
                  compiler_version=compiler_version, fma_units=2, fma_bits=256, load_bits=256)


GCC = avx2("cc (Debian 12.2.0-14+deb12u1) 12.2.0")
CLANG = avx2("Debian clang version 16.0.6")


def test_the_knob_exists_only_for_gcc():
    tensors = suite_program("C2D", "yolo_conv8")
    assert GCC.compiler_is_gcc and not CLANG.compiler_is_gcc and not avx2("synthetic").compiler_is_gcc
    assert "pressure_sched" in cpu_space(tensors[-1:], GCC)[0].knobs
    assert "pressure_sched" not in cpu_space(tensors[-1:], CLANG)[0].knobs


@pytest.mark.parametrize("op, case, want", [
    ("C2D", "yolo_conv8", 1),  # 8 accumulators (2 vectors x 4 columns), 2 weight vectors, 4 inputs: 14 of 16
    ("R50", "l4_3x3", 1),  # 7 accumulators, 1 weight vector, 7 inputs (taps shared): fits
    ("R50", "l1_3x3", 0),  # 12 accumulators and 8 reads: pressure scheduling would spill
    ("GEMM", "gemm_1024", 0),  # 6 x 2 vectors and 8 reads
])
def test_the_default_schedules_for_pressure_where_the_tile_and_its_reads_fit(op, case, want):
    tensors = suite_program(op, case)
    space, plan = cpu_space(tensors[-1:], GCC)
    p = default_point(space, plan)
    assert p["pressure_sched"] == want
    first = heuristic_points(space, plan)
    assert any(q["pressure_sched"] != want for q in first), "the tuner's first points measure both"


def test_the_hint_goes_through_the_trace_lowering_and_features():
    tensors = suite_program("C2D", "yolo_conv8")
    space, plan = cpu_space(tensors[-1:], GCC)
    p = default_point(space, plan)
    for value in (0, 1):
        s = apply_cpu(tensors[-1:], plan, p.replace("pressure_sched", value))
        assert s.compiler_hints == (["pressure_scheduling"] if value else [])
        replayed = Trace.from_json(s.trace.to_json()).replay(tensors[-1:])
        assert replayed.compiler_hints == s.compiler_hints
        func = tw.lower(s, tensors)
        assert func.compiler_hints == tuple(s.compiler_hints)
        assert loop_nest_features(func, GCC)[FEATURE_NAMES.index("pressure_scheduling")] == value


def test_a_hinted_kernel_matches_the_reference(rng):
    A = tw.placeholder((48, 40), "float32", name="A")
    B = tw.placeholder((40, 32), "float32", name="B")
    C = tw.ops.matmul(A, B, name="C")
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    s[C].vectorize(ji)
    s.compiler_hint("pressure_scheduling")
    kernel = check_kernel(s, [A, B, C], rng, rtol=1e-4, atol=1e-4)
    assert kernel.source.count(ATTRIBUTE) == 1
    a, b = rng.standard_normal((48, 40), dtype=np.float32), rng.standard_normal((40, 32), dtype=np.float32)
    c = np.empty((48, 32), np.float32)
    kernel(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_an_unknown_hint_is_an_error_naming_the_valid_ones():
    A = tw.placeholder((4,), "float32", name="A")
    s = tw.create_schedule(tw.compute((4,), lambda i: A[i] * 2, name="B"))
    with pytest.raises(ScheduleError, match="unknown hint 'fast'.*pressure_scheduling"):
        s.compiler_hint("fast")


def test_a_record_from_before_the_knob_reads_as_the_point_it_measured():
    tensors = suite_program("C2D", "yolo_conv8")
    space, plan = cpu_space(tensors[-1:], GCC)
    p = default_point(space, plan)
    old = Point(tuple((k, v) for k, v in p.values if k != "pressure_sched"))
    assert not space.valid(old)
    upgraded = space.upgrade(Point.from_json(old.to_json()))
    assert space.valid(upgraded) and upgraded["pressure_sched"] == 0
    assert [k for k, _ in upgraded.values] == list(space.knobs)
    assert space.upgrade(p) is p
