"""Accumulator promotion (lower/accumulators.py): a reduction that a schedule leaves
accumulating in its output across a reduce loop (no cache_write) keeps the tile in
registers, loaded or zeroed before the loop and stored after it, where that is legal
and the tile fits; elsewhere the output stays in memory, and results are right either way.
Also register slots wider than a machine vector are split (lower/registers.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import check_kernel
from synthetic_targets import AVX2 as AVX2_TARGET

import tilewright as tw
from tilewright.ir import arith
from tilewright.ir.dtype import float32
from tilewright.ir.expr import AxisKind, Broadcast, Const, IterVar, Load
from tilewright.ir.stmt import Allocate, Buffer, Fence, For, ForKind, IfThenElse, Scope, Seq, Store
from tilewright.ir.stmt_functor import all_expr_nodes, walk_stmt
from tilewright.lower.accumulators import promote_accumulators
from tilewright.lower.lower import lower
from tilewright.lower.registers import RegisterFile

AVX2 = RegisterFile(vector_bytes=32, count=16)


def gemm(m, n, k, dtype="float32"):
    A = tw.placeholder((m, k), dtype, name="A")
    B = tw.placeholder((k, n), dtype, name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def tutorial(n=128, inner_order=("xi", "ki", "yi")):
    """The TVM tutorial's GEMM schedule (issue 14): blocked 8 x 64, vectorized by 16,
    rows unrolled, outer loop parallel, no cache_write."""
    A, B, C = gemm(n, n, n)
    s = tw.create_schedule(C)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 64)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    loops = {"xi": xi, "ki": ki, "yi": yi}
    s[C].reorder(xo, yo, ko, *[loops[name] for name in inner_order])
    yio, yii = s[C].split(yi, factor=16)
    s[C].vectorize(yii)
    s[C].unroll(xi)
    s[C].parallel(xo)
    return s, [A, B, C]


def reduce_loops(func, innermost=False):
    def is_reduce(s):
        return isinstance(s, For) and isinstance(s.var, IterVar) and s.var.kind is AxisKind.REDUCE

    loops = [s for s in walk_stmt(func.body) if is_reduce(s)]
    return [s for s in loops if not any(is_reduce(x) for x in walk_stmt(s.body))] if innermost else loops


def accesses(stmt, buf) -> int:
    stores = sum(1 for s in walk_stmt(stmt) if isinstance(s, Store) and s.buffer is buf)
    return stores + sum(1 for n in all_expr_nodes(stmt) if isinstance(n, Load) and n.tensor is buf)


def register_tiles(func):
    return [s for s in walk_stmt(func.body) if isinstance(s, Allocate) and s.register_lanes]


def output(func, name="C"):
    return next(b for b in func.args if b.name == name)


# ---- the acceptance case ----------------------------------------------------------------------------------

def test_tutorial_schedule_keeps_its_accumulators_in_registers(rng):
    s, args = tutorial()
    func = lower(s, args, registers=AVX2)
    C = output(func)
    inner = reduce_loops(func, innermost=True)
    assert inner and all(accesses(loop, C) == 0 for loop in inner), "C is accessed inside the k.inner loop"
    tiles = register_tiles(func)
    assert tiles, "no register tile"
    for tile in tiles:
        assert tile.buffer.scope is Scope.LOCAL and tile.register_lanes == 8  # 16-lane vectors split for AVX2
        assert tile.buffer.size == 64  # one row of the block: 4 vectors of 16, across the inner reduce loop
        parts = tile.body.stmts
        loop = next(n for n, p in enumerate(parts) if isinstance(p, For))
        assert isinstance(parts[loop].var, IterVar) and parts[loop].var.kind is AxisKind.REDUCE
        before, after = parts[:loop], parts[loop + 1:]
        assert before and all(isinstance(p, Store) and p.buffer is tile.buffer and isinstance(p.value, Load)
                              and p.value.tensor is C for p in before), "the tile is loaded from C before the loop"
        assert after and all(isinstance(p, Store) and p.buffer is C and p.value.tensor is tile.buffer
                             for p in after), "the tile is stored to C after the loop"
    kernel = check_kernel(s, args, rng, rtol=1e-4, atol=1e-4)
    a, b = rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 128), dtype=np.float32)
    c = np.empty((128, 128), np.float32)
    kernel(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def fences_between_tiles(func) -> list[int]:
    """For each run of sibling register tiles, how many fences separate them."""
    out = []
    for s in walk_stmt(func.body):
        if isinstance(s, Seq) and sum(1 for c in s.stmts if isinstance(c, Allocate) and c.register_lanes) > 1:
            out.append(sum(1 for c in s.stmts if isinstance(c, Fence)))
    return out


def test_sibling_tiles_that_do_not_fit_together_are_fenced_apart():
    s, args = tutorial()  # 8 unrolled rows, each a tile of 8 ymm: two of them overflow 16 registers
    assert fences_between_tiles(lower(s, args, registers=AVX2)) == [7]
    source = tw.build(s, args, target=AVX2_TARGET).source
    assert source.count('__asm__ __volatile__("" ::: "memory");') == 7
    wide = RegisterFile(vector_bytes=64, count=32)  # AVX-512: a row is 4 zmm, 7 rows fit, then one more
    assert fences_between_tiles(lower(s, args, registers=wide)) == [1]


def test_a_block_too_large_for_the_registers_is_split_by_rows_and_strip_mined(rng):
    """The tutorial's 8 x 64 block is 64 ymm: each row's 8 ymm are promoted across a strip of k.outer
    whose rows of B fit one way of the L1 (so the 8 rows reuse them from L1), instead of being loaded
    and stored around every 4 steps of k.inner."""
    s, args = tutorial(n=128)
    func = lower(s, args, registers=AVX2)
    strips = [x for x in walk_stmt(func.body) if isinstance(x, For) and x.var.name.endswith(".strip")]
    assert len(strips) == 1
    tiles = register_tiles(func)
    assert len(tiles) == 8 and all(t.buffer.size == 64 for t in tiles)
    for tile in tiles:  # each row's tile spans a whole strip: the strip's inner loop, k.inner inside it
        loop = next(p for p in tile.body.stmts if isinstance(p, For))
        assert loop.var.name.endswith(".in") and accesses(loop, output(func)) == 0
    # a step of k.outer reads, for one row of the block, 4 x 64 floats of B and 4 of A (1152 B as counted):
    # one way of a 32 KB 8-way L1 (4 KB) holds 3 steps, so strips of 2 of the 32
    assert int(strips[0].extent.value) == 16
    check_kernel(s, args, rng, rtol=1e-4, atol=1e-4)


def test_an_init_right_before_the_loop_becomes_the_registers_initial_value(rng):
    A, B, C = gemm(16, 32, 24)
    s = tw.create_schedule(C)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 2, 16)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    s[C].unroll(xi)
    s[C].vectorize(yi)
    func = lower(s, [A, B, C], registers=AVX2)
    buf = output(func)
    tiles = register_tiles(func)
    assert len(tiles) == 1 and tiles[0].buffer.size == 32  # 2 x 16 across the outer reduce loop
    zeroes = [p for p in tiles[0].body.stmts if isinstance(p, Store) and p.buffer is tiles[0].buffer]
    assert zeroes and all(isinstance(p.value, (Const, Broadcast)) for p in zeroes)
    for s_ in walk_stmt(func.body):  # C is written once, from the registers: its zeroing is gone
        if isinstance(s_, Store) and s_.buffer is buf:
            assert isinstance(s_.value, Load) and s_.value.tensor is tiles[0].buffer
    check_kernel(s, [A, B, C], rng, rtol=1e-4, atol=1e-4)


def test_scalar_accumulator_of_an_unvectorized_reduction(rng):
    A, B, C = gemm(6, 5, 7, "int32")
    s = tw.create_schedule(C)
    func = lower(s, [A, B, C], registers=AVX2)
    assert [t.register_lanes for t in register_tiles(func)] == [1]
    assert all(accesses(loop, output(func)) == 0 for loop in reduce_loops(func))
    check_kernel(s, [A, B, C], rng)


# ---- where promotion must not happen ------------------------------------------------------------------------

def test_rows_under_the_inner_reduce_loop_are_split_there(rng):
    s, args = tutorial(inner_order=("ki", "xi", "yi"))  # under k.inner: 8 rows x 64 columns = 64 registers
    func = lower(s, args, registers=AVX2)
    assert [t.buffer.size for t in register_tiles(func)] == [64] * 8  # one row each, across k.inner
    check_kernel(s, args, rng, rtol=1e-4, atol=1e-4)


def test_statements_that_write_one_element_are_never_distributed():
    """Two statements of a reduce loop accumulating into the same element must keep their order per
    iteration: the loop is not split, and the tile (too large) stays in memory."""
    C = Buffer("C", (256,), float32, Scope.GLOBAL)
    A = Buffer("A", (256,), float32, Scope.GLOBAL)
    k = IterVar("k", extent=16, kind=AxisKind.REDUCE)

    def acc(base):
        index = arith.const(base, "int32")
        return Store(C, (index,), Load(C, (index,), float32) + Load(A, (k,), float32))

    rows = [Seq(tuple(acc(base + n) for n in range(12))) for base in (0, 6)]  # they overlap on 6..11
    loop = For(k, arith.const(0, "int32"), arith.const(16, "int32"), ForKind.SERIAL, Seq(tuple(rows)))
    out = promote_accumulators(loop, RegisterFile(vector_bytes=0, count=16))
    assert not any(isinstance(x, Allocate) for x in walk_stmt(out))
    assert isinstance(out, For) and out.var is k and int(out.extent.value) == 16


def test_a_long_spatial_loop_inside_the_reduce_loop_is_not_unrolled(rng):
    A, B, C = gemm(4, 64, 8)
    s = tw.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(i, k, j)  # 64 scalars across k: more than the slots, and j is not unrolled
    func = lower(s, [A, B, C], registers=AVX2)
    assert not register_tiles(func)
    check_kernel(s, [A, B, C], rng, rtol=1e-4, atol=1e-4)


def test_partial_tiles_of_non_divisible_splits_stay_in_memory_and_results_stay_right(rng):
    A, B, C = gemm(50, 45, 37)  # no factor divides: every split has a tail
    s = tw.create_schedule(C)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    yio, yii = s[C].split(yi, factor=8)
    s[C].vectorize(yii)
    s[C].unroll(xi)
    func = lower(s, [A, B, C], registers=AVX2)
    # partitioning gives the full blocks guard-free loops, promoted; the column tail (5 of 8 lanes,
    # an omp simd loop) and the tail of k stay in C; a tile is never accessed under a branch
    assert register_tiles(func)
    assert any(accesses(loop, output(func)) for loop in reduce_loops(func, innermost=True))
    for tile in register_tiles(func):
        assert not any(isinstance(x, IfThenElse) and accesses(x, tile.buffer) for x in walk_stmt(tile.body))
    check_kernel(s, [A, B, C], rng, rtol=1e-4, atol=1e-4)


def test_an_output_that_is_an_input_is_right():
    s, args = tutorial(n=64)
    kernel = tw.build(s, args, target="cpu")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    want = a @ b
    kernel(a, b, a)  # C is A: the runtime computes through a copy, the registers never see A change
    assert np.allclose(a, want, rtol=1e-4, atol=1e-4)


# IR built by hand: patterns the pass must leave alone, and one it promotes as a control

def _ir():
    X = Buffer("X", (8,), float32)
    A = Buffer("A", (8,), float32)
    k = IterVar("k", extent=8, kind=AxisKind.REDUCE)
    return X, A, k


def _load(buf, index):
    return Load(buf, (arith.const(index) if isinstance(index, int) else index,), float32)


def _accumulate(X, index, value):
    return Store(X, (arith.const(index) if isinstance(index, int) else index,),
                 arith.binary(arith.BinOp.ADD, _load(X, index), value))


def _reduce_loop(k, body):
    return For(k, arith.const(0), arith.const(8), ForKind.SERIAL, body)


def test_an_output_indexed_by_the_reduce_loop_is_left_alone():
    X, A, k = _ir()
    loop = _reduce_loop(k, _accumulate(X, k, _load(A, k)))
    assert not any(isinstance(s, Allocate) for s in walk_stmt(promote_accumulators(loop, AVX2)))


def test_a_read_of_the_output_at_another_index_is_left_alone():
    X, A, k = _ir()
    value = arith.binary(arith.BinOp.MUL, _load(X, 1), _load(A, k))
    loop = _reduce_loop(k, _accumulate(X, 0, value))
    assert not any(isinstance(s, Allocate) for s in walk_stmt(promote_accumulators(loop, AVX2)))


def test_an_accumulate_under_a_branch_is_left_alone():
    X, A, k = _ir()
    cond = arith.compare(arith.CmpOp.LT, k, arith.const(5))
    loop = _reduce_loop(k, IfThenElse(cond, _accumulate(X, 0, _load(A, k))))
    assert not any(isinstance(s, Allocate) for s in walk_stmt(promote_accumulators(loop, AVX2)))


def test_a_parallel_loop_inside_the_reduce_loop_is_left_alone():
    X, A, k = _ir()
    j = IterVar("j", extent=2)
    inner = For(j, arith.const(0), arith.const(2), ForKind.PARALLEL, _accumulate(X, j, _load(A, k)))
    loop = _reduce_loop(k, inner)
    assert not any(isinstance(s, Allocate) for s in walk_stmt(promote_accumulators(loop, AVX2)))


def test_the_hand_built_accumulate_is_promoted():
    X, A, k = _ir()
    loop = _reduce_loop(k, _accumulate(X, 3, _load(A, k)))
    out = promote_accumulators(loop, AVX2)
    assert isinstance(out, Allocate) and out.buffer.scope is Scope.LOCAL and out.buffer.size == 1
    assert isinstance(out.body, Seq) and isinstance(out.body.stmts[1], For)
    assert accesses(out.body.stmts[1], X) == 0


# ---- register slots are at most one machine vector --------------------------------------------------------

def cache_write_schedule(lanes=16):
    A, B, C = gemm(16, 64, 32)
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 2, 32)
    jio, jii = s[C].split(ji, factor=lanes)
    s[C].unroll(ii)
    s[C].unroll(jio)
    s[C].vectorize(jii)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=lanes)
    s[CC].reorder(ck, ci, cjo, cji)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    return s, [A, B, C]


@pytest.mark.parametrize("regs, lanes", [(AVX2, 8), (RegisterFile(64, 32), 16)])
def test_a_register_slot_is_at_most_one_machine_vector(regs, lanes, rng):
    s, args = cache_write_schedule(lanes=16)
    func = lower(s, args, registers=regs)
    assert [t.register_lanes for t in register_tiles(func)] == [lanes]
    check_kernel(s, args, rng, rtol=1e-4, atol=1e-4)


# ---- random tutorial-like schedules --------------------------------------------------------------------------

@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_blocked_reductions_match_the_reference(data, rng):
    m, n, k = (data.draw(st.integers(3, 24), label=axis) for axis in "mnk")
    dtype = data.draw(st.sampled_from(["float32", "int32"]), label="dtype")
    reducer = data.draw(st.sampled_from([tw.sum, tw.max]), label="reducer")
    A = tw.placeholder((m, k), dtype, name="A")
    B = tw.placeholder((k, n), dtype, name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: reducer(A[i, r] * B[r, j], axis=r), name="C")
    s = tw.create_schedule(C)
    fi, fj, fk = (data.draw(st.sampled_from([1, 2, 3, 4, 8]), label=f"factor {x}") for x in "ijk")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], fi, fj)
    ko, ki = s[C].split(r, factor=fk)
    inner = data.draw(st.permutations([xi, ki, yi]), label="inner order")
    s[C].reorder(xo, yo, ko, *inner)
    if data.draw(st.booleans(), label="unroll xi"):
        s[C].unroll(xi)
    if inner[-1] is yi and data.draw(st.booleans(), label="vectorize yi"):
        s[C].vectorize(yi)
    if data.draw(st.booleans(), label="parallel xo"):
        s[C].parallel(xo)
    check_kernel(s, [A, B, C], rng, rtol=1e-4, atol=1e-4)
