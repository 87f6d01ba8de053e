"""How the main node reads an operand along the loops of a register tile, for
the default model (`cpu_tiles`): the lane map along the vector loop (one
element broadcast, a vector load of some stride, or a gather the vectorizer
cannot express), which register rows share its registers, how many distinct
loads the rows and the unrolled taps of a reduce loop make, and whether the
rows' elements crowd one L1 set."""

from __future__ import annotations

import itertools
import math
from collections import Counter

from ..analysis.graph import is_placeholder
from ..ir.expr import Binary, BinOp, Cast, Const, Var
from ..ir.traverse import free_vars, walk
from .cpu_plan import CpuPlan, indexing_dims, main_loads, spatial_positions

GATHER = None  # the lane map of a load the vectorizer cannot express as vector loads
# Strided ramps a vector load takes (lower/vectorize.py's MAX_LOAD_STRIDE): |s| contiguous loads and
# |s| - 1 two-source permutes (codegen/strided.py); a larger stride is a gather.
MAX_LOAD_STRIDE = 4
LINE_BYTES = 64


def coefficient(e, var, width: int = 1):
    """The change of index `e` per step of `var`, or GATHER where it is not affine in
    `var`. A division by D of c * var alone is constant over an aligned run of
    `width` steps when c * width divides D (a group conv's o // 64 along 16 lanes):
    coefficient 0, a broadcast."""
    if isinstance(e, Var):
        return 1 if e is var else 0
    if isinstance(e, Const) or not any(v is var for v in free_vars(e)):
        return 0
    if isinstance(e, Cast):
        return coefficient(e.value, var, width)
    if isinstance(e, Binary):
        a, b = coefficient(e.a, var, width), coefficient(e.b, var, width)
        if GATHER in (a, b) and e.op is not BinOp.FLOORDIV:
            return GATHER
        if e.op is BinOp.ADD:
            return a + b
        if e.op is BinOp.SUB:
            return a - b
        if e.op is BinOp.MUL and isinstance(e.b, Const) and b == 0:
            return a * int(e.b.value)
        if e.op is BinOp.MUL and isinstance(e.a, Const) and a == 0:
            return b * int(e.a.value)
        if e.op is BinOp.FLOORDIV and isinstance(e.b, Const) and a is not GATHER:
            d = int(e.b.value)
            alone = all(v is var for v in free_vars(e.a))  # no other variable shifts the run off a quotient
            return 0 if a == 0 or (alone and d > 0 and d % (abs(a) * width) == 0) else GATHER
    return GATHER


def _strides(tensor) -> list[int]:
    return [math.prod(tensor.shape[d + 1:]) for d in range(len(tensor.shape))]


def packed_along(plan: CpuPlan, tensor, vpos: int) -> bool:
    """A placeholder the vector loop indexes, alone, in one dimension other than its
    last: the default packs it with that dimension innermost (contiguous vectors)."""
    dims = indexing_dims(plan, tensor, vpos)
    return is_placeholder(tensor) and len(dims) == 1 and dims != {len(tensor.shape) - 1}


def column_panel(plan: CpuPlan, tensor, vpos: int) -> bool:
    """A placeholder read along the vector (the output's innermost loop) and a reduction:
    a column panel (GEMM's B, a 1x1 conv's x[c, h*w]), strided by whole rows unless packed;
    the default packs it."""
    reduce_vars = {id(a) for a in plan.main.tensor.op.reduce_axis}
    return (is_placeholder(tensor) and vpos == len(plan.main.spatial) - 1
            and bool(indexing_dims(plan, tensor, vpos))
            and any(id(i) in reduce_vars for n in main_loads(plan, tensor) for i in n.indices))


def padded_reads(plan: CpuPlan, vpos: int) -> bool:
    """Whether every operand the vector loop indexes is read from a copy the default
    packs (padded to the split total): a rounded-up total along the vector then keeps
    its last tile in vector code (only its stores are guarded); read in place, the
    lanes past the extent are guarded and the tile is scalar code."""
    var = plan.main.tensor.op.axis[vpos]
    return all(packed_along(plan, t, vpos) or column_panel(plan, t, vpos) for t in plan.main.inputs
               if any(var in free_vars(i) for n in main_loads(plan, t) for i in n.indices))


def lane_stride(plan: CpuPlan, tensor, vpos: int, width: int, packed: bool = False):
    """Elements between neighbouring lanes of `tensor`'s reads along spatial loop `vpos`
    in vectors of `width` lanes: 0 a broadcast, 1 contiguous, another small int a
    strided load, GATHER otherwise; `packed`: read from a packed copy (contiguous)."""
    key = ("stride", id(tensor), vpos, width, packed)
    if key not in plan.memo:
        plan.memo[key] = _lane_stride(plan, tensor, vpos, width, packed)
    return plan.memo[key]


def _lane_stride(plan: CpuPlan, tensor, vpos: int, width: int, packed: bool):
    if packed and packed_along(plan, tensor, vpos):
        return 1
    var = plan.main.tensor.op.axis[vpos]
    worst = 0
    for n in main_loads(plan, tensor):
        coefs = [coefficient(i, var, width) for i in n.indices]
        if GATHER in coefs:
            return GATHER
        s = sum(c * st for c, st in zip(coefs, _strides(tensor)))
        if abs(s) > MAX_LOAD_STRIDE:
            return GATHER
        worst = max(worst, abs(s))
    return worst


def row_varies(plan: CpuPlan, tensor, pos: int, factor: int) -> bool:
    """Whether register rows along spatial loop `pos` (`factor` of them, aligned) read
    different elements of `tensor`: not when it sees the loop only through a division
    that keeps an aligned run of `factor` in one quotient (the output channels of one
    group share their input channel o // M: they share its registers)."""
    key = ("varies", id(tensor), pos, factor)
    if key not in plan.memo:
        var = plan.main.tensor.op.axis[pos]
        plan.memo[key] = any(coefficient(i, var, factor) != 0 for n in main_loads(plan, tensor) for i in n.indices)
    return plan.memo[key]


_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "//": lambda a, b: a // b if b else None, "%": lambda a, b: a % b if b else None,
        "min": min, "max": max}


def _compile(e):
    """`e` as a function of {id(var): value} (other variables 0: the tile's base, aligned)
    returning an int, or None for an expression this does not evaluate."""
    if isinstance(e, Var):
        key = id(e)
        return lambda env: env.get(key, 0)
    if isinstance(e, Const):
        value = int(e.value)
        return lambda env: value
    if isinstance(e, Cast):
        return _compile(e.value)
    if isinstance(e, Binary) and e.op.value in _OPS:
        fa, fb, op = _compile(e.a), _compile(e.b), _OPS[e.op.value]

        def binary(env):
            a, b = fa(env), fb(env)
            return None if a is None or b is None else op(a, b)
        return binary
    return lambda env: None


def distinct_reads(plan: CpuPlan, tensor, spans: dict, tap=None, taps: int = 1) -> int:
    """Distinct elements (or vectors) of `tensor` one step of a register tile reads: the
    spatial loops at the positions of `spans` ({position: [values]}: the rows, the
    vectors' first lanes) crossed with `taps` iterations of reduce axis `tap` (an
    unrolled loop whose copies share operands: a 3-tap window's overlapping inputs
    x[w + rw]; the 6 output channels of one group read one input channel o // 6).
    An index this cannot evaluate counts every combination."""
    op = plan.main.tensor.op
    loops = [(id(op.axis[pos]), tuple(vals)) for pos, vals in sorted(spans.items())]
    if tap is not None and taps > 1:
        loops.append((id(tap), tuple(range(taps))))
    key = ("reads", id(tensor), tuple(loops))
    if key in plan.memo:
        return plan.memo[key]
    total = math.prod(len(v) for _, v in loops)
    best = 0
    for n in main_loads(plan, tensor):
        index = plan.memo.setdefault(("index", id(n)), [_compile(i) for i in n.indices])
        seen = set()
        for combo in itertools.product(*(vals for _, vals in loops)):
            env = {var: v for (var, _), v in zip(loops, combo)}
            values = tuple(f(env) for f in index)
            if None in values:
                best = total
                break
            seen.add(values)
        best = max(best, len(seen))
    plan.memo[key] = best or 1
    return plan.memo[key]


def crowds_l1_set(plan: CpuPlan, tensor, rows: dict) -> bool:
    """Whether the rows of a register tile ({position: factor}), reading `tensor` in the
    caller's layout, put more cache lines in one L1 set than it has ways: rows whose
    elements lie a multiple of the set span (L1 bytes / ways: 4 KB on an 8-way 32 KB
    cache) apart all map to one set, half of it to two (a 1x1 conv's w[o, c] rows of
    512 channels, 2 KB apart: 26 rows put 13 lines in each of two sets of 8 ways).
    Measured on bil_0: 11 rows in one 8-way set ran 1.6x slower than 8 or 4."""
    sets = plan.l1_bytes // max(1, plan.l1_ways) // LINE_BYTES
    if sets <= 0 or not rows:
        return False
    op = plan.main.tensor.op
    strides = _strides(tensor)
    steps = []  # bytes between neighbouring rows along each loop that varies the tensor
    for pos, factor in rows.items():
        if factor <= 1:
            continue
        for n in main_loads(plan, tensor):
            coefs = [coefficient(i, op.axis[pos], factor) for i in n.indices]
            if GATHER in coefs:
                continue
            step = sum(c * st for c, st in zip(coefs, strides)) * tensor.dtype.bytes
            if step:
                steps.append((abs(step), factor))
            break
    if not steps or math.prod(f for _, f in steps) <= plan.l1_ways:
        return False
    lines = {sum(i * s for i, (s, _) in zip(combo, steps)) // LINE_BYTES
             for combo in itertools.product(*(range(f) for _, f in steps))}
    return max(Counter(line % sets for line in lines).values()) > plan.l1_ways


def group_sizes(plan: CpuPlan, width: int) -> dict[int, int]:
    """{spatial loop position: D} for loops some operand sees only through a division
    by a multiple D of `width` (a group conv's input channel o // 64 * C + c, one
    broadcast across a vector along o): rows along them share that operand's
    registers only when no tile straddles a group."""
    out: dict[int, int] = {}
    for t in plan.main.inputs:
        exact = set(spatial_positions(plan, t, exact=True))
        hidden = exact - set(spatial_positions(plan, t, width=width))
        for n in main_loads(plan, t):
            for e in (x for i in n.indices for x in walk(i)):
                if isinstance(e, Binary) and e.op is BinOp.FLOORDIV and isinstance(e.b, Const):
                    for p in hidden:
                        if plan.main.tensor.op.axis[p] in free_vars(e.a):
                            out[p] = math.gcd(out.get(p, 0), int(e.b.value))
    return out
