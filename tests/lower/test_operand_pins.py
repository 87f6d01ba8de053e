"""Operand pinning (lower/operand_pins.py): a register tile's operand vectors, read by
every row, are loaded once into pinned variables (an empty asm keeps GCC from folding
them into memory operands), as many as fit beside the accumulators; results unchanged."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
from oracle import check_kernel
from synthetic_targets import AVX2 as AVX2_TARGET
from synthetic_targets import host_runs

import tilewright as tw
from tilewright.ir.stmt import LetStmt
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower.lower import lower
from tilewright.lower.registers import RegisterFile


def tile_4x24(n=48, k=32, rolled=False):
    """C = A @ B in register tiles of 4 rows x 24 columns (3 AVX2 vectors), accumulated locally
    across k: each vector of B's row is read by the 4 rows."""
    A = tw.placeholder((n, k), "float32", name="A")
    B = tw.placeholder((k, n), "float32", name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((n, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = tw.create_schedule(C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 24)
    s[CL].compute_at(s[C], jo)
    i, j = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], i, j)
    jv, lanes = s[CL].split(j, factor=8)
    s[CL].unroll(i)
    s[CL].unroll(jv)
    s[CL].vectorize(lanes)
    if rolled:
        s[CL].no_unroll(s[CL].op.reduce_axis[0])
    return s, [A, B, C]


def pins(func):
    return [s for s in walk_stmt(func.body) if isinstance(s, LetStmt) and s.pin]


def test_the_tiles_operand_vectors_are_pinned_and_fit_the_register_file():
    s, args = tile_4x24()
    func = lower(s, args, registers=RegisterFile(32, 16, pin_constraint="x"))
    assert len(pins(func)) == 3  # 12 accumulators + 3 operand vectors + 1 broadcast = 16
    s, args = tile_4x24()
    assert len(pins(lower(s, args, registers=RegisterFile(32, 14, pin_constraint="x")))) == 1  # 12 + 1 + 1
    s, args = tile_4x24()
    assert not pins(lower(s, args, registers=RegisterFile(32, 16)))  # no asm register class: nothing pinned


def test_only_x86_cpu_register_files_pin():
    assert RegisterFile.of(AVX2_TARGET).pin_constraint == "x"
    assert RegisterFile.of(dataclasses.replace(AVX2_TARGET, arch="aarch64")).pin_constraint == ""
    assert RegisterFile.of(SimpleNamespace(is_gpu=True)).pin_constraint == ""


def test_pinned_kernels_compute_the_same_result():
    if not host_runs(AVX2_TARGET):
        import pytest

        pytest.skip("the host cannot run AVX2 code")
    s, args = tile_4x24()
    kernel = check_kernel(s, args, np.random.default_rng(0), target=AVX2_TARGET)
    assert '__asm__("" : "+x"' in kernel.source


def test_loops_the_compiler_peels_pin_nothing():
    """A short reduce loop GCC unrolls completely keeps its loads foldable: pinned, every copy's
    loads would stay live at once (YOLO conv8's 3-tap loop ran 16% slower)."""
    s, args = tile_4x24(k=8)
    assert not pins(lower(s, args, registers=RegisterFile(32, 16, pin_constraint="x")))
    s, args = tile_4x24(k=8, rolled=True)  # kept rolled by the schedule: pinned again
    assert len(pins(lower(s, args, registers=RegisterFile(32, 16, pin_constraint="x")))) == 3
