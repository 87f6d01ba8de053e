"""Packs of constant inputs moved out of the kernel (lower/hoist_packs.py): the
kernel reads one slot per value of the loops the pack depends on, the pack
function fills every slot once, and results match NumPy; packs that read a
non-constant, or whose slots would copy the constant many times over, stay."""

from __future__ import annotations

import numpy as np
import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.graph.const_packs import PackFill
from tilewright.ir.stmt import Allocate
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower.hoist_packs import hoist_constant_packs
from tilewright.lower.lower import lower
from tilewright.lower.verify import verify
from tilewright.targets import as_target


def dense(m=6, n=32, k=20):
    """C[i, j] = sum_k A[i, k] * W[j, k] (a dense layer; W is the constant weight)."""
    A = tw.placeholder((m, k), "float32", name="A")
    W = tw.placeholder((n, k), "float32", name="W")
    r = tw.reduce_axis(k, name="r")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * W[j, r], axis=r), name="C")
    return A, W, C


def packed_schedule(where: str, read_from: str = "W"):
    """j split by 8 with the outer part outermost; a copy of `read_from` stored with
    j innermost, made per outer j block ("outer"), once at the root ("root"), or per
    row i inside the j block ("row": the pack does not depend on i, so one slot per block)."""
    A, W, C = dense()
    s = tw.create_schedule(C)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(jo, i, C.op.reduce_axis[0], ji)
    s[C].vectorize(ji)
    src = W if read_from == "W" else A
    P = s.cache_read(src, "global", [C])
    if where == "outer":
        s[P].compute_at(s[C], jo)
    elif where == "row":
        s[P].compute_at(s[C], i)
    if read_from == "W":
        ax = list(s[P].op.axis)
        s[P].storage_order(ax[1], ax[0])
    s[C].parallel(jo)
    return s, (A, W, C)


def run_hoisted(s, args, constants):
    target = as_target("cpu")
    backend = backend_for(target)
    func = backend.lower(s, list(args), "dense", target)
    hoisted = hoist_constant_packs(func, constants)
    assert hoisted is not None
    verify(hoisted.kernel)
    verify(hoisted.pack)
    kernel = backend.build_func(hoisted.kernel, target)
    fill = PackFill(backend.build_func(hoisted.pack, target), hoisted)
    return kernel, fill, hoisted


@pytest.mark.parametrize("where,slots,slot", [("outer", 4, 160), ("root", 1, 640), ("row", 4, 160)])
def test_weight_pack_moves_out_and_results_match(where, slots, slot):
    s, (A, W, C) = packed_schedule(where)
    kernel, fill, hoisted = run_hoisted(s, (A, W, C), {"W"})
    (pack,) = hoisted.packs
    assert (pack.slots, pack.slot, pack.sources) == (slots, slot, ("W",))
    allocated = {a.buffer.name for a in walk_stmt(hoisted.kernel.body) if isinstance(a, Allocate)}
    assert pack.original in {a.buffer.name for a in walk_stmt(lower(s, [A, W, C], "dense").body)
                             if isinstance(a, Allocate)}
    assert pack.original not in allocated
    assert [b.name for b in hoisted.kernel.args] == ["A", "W", "C", pack.buffer.name]
    assert [hoisted.kernel.args[i].name for i in hoisted.pack_args] == ["W", pack.buffer.name]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 20), dtype=np.float32)
    w = rng.standard_normal((32, 20), dtype=np.float32)
    c = np.zeros((6, 32), np.float32)
    packed = fill.run([a, w, c])
    kernel(a, w, c, *packed)
    np.testing.assert_allclose(c, a @ w.T, rtol=1e-5, atol=1e-5)
    w2 = w * 2  # the kernel reads the packed copy, not W: a changed W without re-packing is not seen
    c2 = np.zeros_like(c)
    kernel(a, w2, c2, *packed)
    np.testing.assert_allclose(c2, a @ w.T, rtol=1e-5, atol=1e-5)


def test_nothing_moves_without_constants_or_for_a_non_constant_pack():
    s, args = packed_schedule("outer", read_from="A")
    func = lower(s, list(args), "dense")
    assert hoist_constant_packs(func, set()) is None
    assert hoist_constant_packs(func, {"W"}) is None  # the pack copies A, an input that changes per call


def test_slots_that_would_copy_the_constant_many_times_stay():
    """A pack per (j block, i) that indexes i too would need 6 x 4 slots of the whole block:
    here a pack of a window that depends on the row, so slots overlap; more than
    MAX_BLOWUP times the constant is refused."""
    A = tw.placeholder((64,), "float32", name="A")
    W = tw.placeholder((64,), "float32", name="W")
    r = tw.reduce_axis(32, name="r")
    C = tw.compute((32,), lambda i: tw.sum(A[i + r] * W[i + r], axis=r), name="C")
    s = tw.create_schedule(C)
    P = s.cache_read(W, "global", [C])
    s[P].compute_at(s[C], C.op.axis[0])
    func = lower(s, [A, W, C], "window")
    assert hoist_constant_packs(func, {"W"}) is None  # 32 slots of 32 elements for a 64-element constant


def test_measured_kernel_packs_once_then_times_only_the_kernel():
    """What the tuner measures for a model's task (Measurer constants=): tw_call packs on its
    first call into buffers the library keeps, and gives the right result on every call."""
    import ctypes

    target = as_target("cpu")
    backend = backend_for(target)
    s, (A, W, C) = packed_schedule("outer")
    func = backend.lower(s, [A, W, C], "dense", target)
    source = backend.render_packed(func, target, {"W"})
    assert source is not None and "tw_make_packs" in source.text
    assert backend.render_packed(func, target, {"A"}) is None  # nothing packs A: nothing moves
    lib = ctypes.CDLL(str(backend.compile(source, target).path))
    lib.tw_time.restype = ctypes.c_double
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 20), dtype=np.float32)
    w = rng.standard_normal((32, 20), dtype=np.float32)
    for _ in range(2):
        c = np.zeros((6, 32), np.float32)
        ptrs = (ctypes.c_void_p * 3)(a.ctypes.data, w.ctypes.data, c.ctypes.data)
        assert lib.tw_call(ptrs) == 0
        np.testing.assert_allclose(c, a @ w.T, rtol=1e-5, atol=1e-5)
    assert lib.tw_time(ptrs, 3) > 0


def test_tuning_with_constants_measures_checked_kernels(tmp_path):
    """Every candidate runs with its packs made once and is still checked against the reference."""
    A, W, C = dense(8, 64, 32)
    result = tw.tune([A, W, C], trials=6, seed=0, records=tmp_path / "r.db", progress=False, constants=[W])
    assert len(result.history) == 6
    assert [t.error_kind for t in result.history] == ["none"] * 6, [t.error_msg for t in result.history]
    assert np.isfinite(result.best_cost)
