"""Index arithmetic of lowered code fits its dtype: loop variables hold their extents and flattened offsets
(row-major, over whole buffers) never overflow. Checked on the IR, so no large array is allocated."""

from __future__ import annotations

import pytest

import tilewright as tw
from tilewright.ir.expr import Binary, Load
from tilewright.ir.stmt import For, Store
from tilewright.ir.stmt_functor import stmt_exprs, walk_stmt
from tilewright.ir.traverse import walk
from tilewright.lower.simplify import const_bounds


def check_index_ranges(func) -> list[str]:
    """Problems: loop extents beyond the loop variable's dtype, index (sub)expressions whose value range
    leaves the dtype of the expression."""
    problems = []
    ranges = {}
    for s in walk_stmt(func.body):
        if isinstance(s, For):
            lo = int(s.begin.value)
            hi = lo + int(s.extent.value) - 1
            ranges[id(s.var)] = (lo, hi)
            vlo, vhi = s.var.dtype.int_range
            if hi > vhi:
                problems.append(f"loop {s.var.name}: {s.var.dtype} cannot reach {hi}")
    for s in walk_stmt(func.body):
        indices = list(s.indices) if isinstance(s, Store) else []
        for e in stmt_exprs(s):
            indices += [i for n in walk(e) if isinstance(n, Load) for i in n.indices]
        for index in indices:
            for n in walk(index):
                if isinstance(n, Binary) and n.dtype.is_int:
                    b = const_bounds(n, ranges)
                    lo, hi = n.dtype.int_range
                    if b is not None and (b[0] < lo or b[1] > hi):
                        problems.append(f"index {n} ({n.dtype}) spans {b}")
    return problems


@pytest.mark.parametrize("shape", [(1000, 1000), (46340, 46340), (2, 3, 2 ** 28)])
def test_indices_fit_below_two_to_the_31(shape):
    A = tw.placeholder(shape, "int8", name="A")
    B = tw.compute(shape, lambda *i: A[i] + 1, name="B")
    s = tw.create_schedule(B)
    s[B].split(B.op.axis[-1], factor=8)
    assert check_index_ranges(tw.lower(s, [A, B])) == []


@pytest.mark.parametrize("shape", [(2 ** 31 + 8,), (50000, 50000)])
def test_indices_of_tensors_beyond_two_to_the_31(shape):
    A = tw.placeholder(shape, "int8", name="A")
    B = tw.compute(shape, lambda *i: A[i] + 1, name="B")
    problems = check_index_ranges(tw.lower(tw.create_schedule(B), [A, B]))
    assert problems == []


def test_wide_index_kernel_compiles():
    """The 64-bit path builds (running it needs 4 GB, see the closing note of the codegen issue)."""
    n = 2 ** 31 + 8
    A = tw.placeholder((n,), "int8", name="A")
    B = tw.compute((n,), lambda i: A[i] + 1, name="B")
    s = tw.create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=64)
    s[B].vectorize(xi)
    s[B].parallel(xo)
    kernel = tw.build(s, [A, B])
    assert "int64_t i_outer" in kernel.source
