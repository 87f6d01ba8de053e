"""Strided vector loads for the C backend: a load of L lanes at base + s*lane
(|s| small, e.g. a stride-2 conv's input along its output width) becomes a few
contiguous vector loads and two-source shuffles, not a gather or scalar code.

The loads cover exactly the span the lanes read, [lo, lo + |s|*(L-1)], the
last one ending at its last element (it may overlap the one before): nothing
outside the elements between the first and the last lane is read, so no bounds
proof beyond the scalar one is needed. Each lane's element is taken from the
first load that holds it; the loads are merged pairwise in a tree (the first
level permutes two loads into place, the levels above blend), which GCC turns
into vpermi2ps on AVX-512 and vpermd/vpermilps + blends on AVX2.

A store at a wider stride (an NCHW output written along its channels: a plane
apart) is a scatter: each lane stored on its own."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Load, Ramp
from ..ir.stmt import Store
from ..ir.traverse import walk
from ..lower.simplify import to_linear

# __builtin_shufflevector (Clang, GCC >= 12) takes constant lane numbers; older GCC only has
# __builtin_shuffle, which takes them as an integer vector of the data's width.
SHUFFLE_MACRO = """#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define TW_SHUFFLE(a, b, mask_t, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TW_SHUFFLE(a, b, mask_t, ...) __builtin_shuffle(a, b, (mask_t){__VA_ARGS__})
#endif"""


@dataclass(frozen=True)
class StridedPlan:
    """How L lanes at stride s are read from the span that starts `low` elements
    from the ramp's base (low <= 0 for a negative stride)."""

    stride: int
    lanes: int
    low: int
    starts: tuple[int, ...]  # start of each contiguous vector load, relative to the span
    sources: tuple[tuple[int, int], ...]  # per lane: (load, position in it)


def strided_plan(stride: int, lanes: int) -> StridedPlan:
    if stride == 0 or lanes < 2:
        raise ValueError(f"a strided load needs a nonzero stride and 2+ lanes, got stride {stride}, {lanes} lanes")
    low = min(0, stride * (lanes - 1))
    span = abs(stride) * (lanes - 1) + 1
    offsets = sorted(stride * i - low for i in range(lanes))
    starts: list[int] = []
    for off in offsets:  # greedy: each load starts at the first element not yet covered, ending in the span
        if not starts or off >= starts[-1] + lanes:
            starts.append(min(off, span - lanes))
    sources = []
    for i in range(lanes):
        offset = stride * i - low
        j = next(j for j, start in enumerate(starts) if start <= offset < start + lanes)
        sources.append((j, offset - starts[j]))
    return StridedPlan(stride, lanes, low, tuple(starts), tuple(sources))


def shuffle_steps(plan: StridedPlan) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """(result, first, second, lane numbers) per shuffle: loads are named c0, c1, ...,
    merged results t0, t1, ...; the last step's result is the loaded vector."""
    lanes = plan.lanes
    # an item is (name, loads it holds, positioned): a load's lanes are where they lie in memory,
    # a merged result's lanes are already in their final place
    items = [(f"c{j}", frozenset([j]), False) for j in range(len(plan.starts))]
    if len(items) == 1:  # one load (a reversed ramp): permute it alone
        items.append(items[0])
    steps: list = []
    while len(items) > 1:
        merged = []
        for k in range(0, len(items) - 1, 2):
            a, b = items[k], items[k + 1]
            mask = tuple(_pick(plan, i, a, b) for i in range(lanes))
            name = f"t{len(steps)}"
            steps.append((name, a[0], b[0], mask))
            merged.append((name, a[1] | b[1], True))
        if len(items) % 2:
            merged.append(items[-1])
        items = merged
    return steps


def _pick(plan: StridedPlan, i: int, a, b) -> int:
    j, pos = plan.sources[i]
    for n, (_, holds, positioned) in enumerate((a, b)):
        if j in holds:
            return n * plan.lanes + (i if positioned else pos)
    # a lane neither side holds: keep a positioned side's lane (a blend), else any lane
    return i


def strided_load_helper(stride: int, lanes: int, vector_t: str, mask_t: str, scalar_t: str) -> tuple[str, str]:
    """(name, C definition) of `vector_t name(const scalar_t *p)`, p the span's first element."""
    plan = strided_plan(stride, lanes)
    sign = "m" if stride < 0 else ""
    name = f"tw_load_s{sign}{abs(stride)}_{vector_t[3:]}"
    loads = ", ".join(f"c{j} = *(const {vector_t} *)({'p' if start == 0 else f'p + {start}'})"
                      for j, start in enumerate(plan.starts))
    lines = [f"static inline {vector_t} {name}(const {scalar_t} *p) {{", f"  const {vector_t} {loads};"]
    steps = shuffle_steps(plan)
    for n, (result, a, b, mask) in enumerate(steps):
        call = f"TW_SHUFFLE({a}, {b}, {mask_t}, {', '.join(map(str, mask))})"
        lines.append(f"  return {call};" if n == len(steps) - 1 else f"  const {vector_t} {result} = {call};")
    lines.append("}")
    return name, "\n".join(lines)


def scatter_helper(stride: int, lanes: int, vector_t: str, scalar_t: str) -> tuple[str, str]:
    """(name, definition) of the store of `lanes` lanes `stride` elements apart."""
    name = f"tw_scatter_{vector_t[3:]}_s{stride}"
    stores = " ".join(f"p[{k * stride}] = v[{k}];" for k in range(lanes))
    return name, f"static inline void {name}({scalar_t} *p, {vector_t} v) {{ {stores} }}"


def interleaved_run(stmts, n: int, promoted, wide: bool = False) -> int:
    """k if `stmts[n:n + k]` are k vector stores at stride k to offsets 0 .. k-1 of one buffer (k = 2
    or 4, at most 128 bytes together; with `wide`, k = 4, 8 or 16 dividing the lanes, over 128 bytes),
    none reading what an earlier one wrote, else 0."""
    first = stmts[n]
    if not (isinstance(first, Store) and isinstance(first.indices[0], Ramp) and first.value.dtype.lanes > 1):
        return 0
    k, lanes = first.indices[0].stride, first.value.dtype.lanes
    small = k * lanes * first.value.dtype.bytes <= 128
    fits = (k in (4, 8, 16) and lanes % k == 0 and not small) if wide else (k in (2, 4) and small)
    if not fits or n + k > len(stmts) or id(first.buffer) in promoted:
        return 0
    base = to_linear(first.indices[0].base)
    for j in range(1, k):
        st = stmts[n + j]
        if not (isinstance(st, Store) and st.buffer is first.buffer and isinstance(st.indices[0], Ramp)
                and st.indices[0].stride == k and st.value.dtype == first.value.dtype):
            return 0
        diff = to_linear(st.indices[0].base).add(base, -1)
        if diff.terms or diff.const != j:
            return 0
        if any(isinstance(x, Load) and x.tensor is first.buffer for x in walk(st.value)):
            return 0
    return k


def blocked_interleave_helper(k: int, lanes: int, vector_t: str, scalar_t: str, transpose: str) -> tuple[str, str]:
    """(name, definition) of `name(dst, v0, .., v{k-1})`: dst[n * k + j] = v_j[n], the `k` vectors of
    `lanes` lanes interleaved as `lanes / k` k x k transposes (`transpose`: codegen/transpose.py's helper
    over k-lane vectors), for a relayout into 8- or 16-channel blocks."""
    name = f"tw_interleave_blocked{k}_{vector_t[3:]}"
    args = ", ".join(f"{vector_t} v{j}" for j in range(k))
    rows = ", ".join(f"v{j}" for j in range(k))
    return name, (f"static inline void {name}({scalar_t} *restrict dst, {args}) {{\n"
                  f"  {vector_t} rows[{k}] = {{{rows}}};\n"
                  f"  for (int c = 0; c < {lanes // k}; ++c) {transpose}(dst + {k * k} * c, {k}, "
                  f"(const {scalar_t} *)rows + {k} * c, {lanes});\n}}")


def narrowing_helper(lanes: int, ratio: int, src_t: str, dst_t: str, wide_t: str,
                     chunk: tuple[int, str, str] | None = None) -> tuple[str, str]:
    """(name, definition) of an integer vector narrowed as C does (the low part of each lane), by
    picking the low element of each lane from the source's bytes: GCC 12 scalarizes
    __builtin_convertvector from int32 x 8 to uint8 x 8 on AVX2 (one element extract per lane; a
    requantize epilogue spent more in it than in its rounding). `chunk` (lanes, the narrow type's bytes
    of that many source lanes, the narrow type of them): a source wider than one 64-byte register is
    narrowed a register at a time (GCC inserts every byte of a shuffle over a 256-byte vector)."""
    name = f"tw_narrow_{src_t[3:]}_{dst_t[3:]}"
    part, part_wide, part_t = chunk if chunk and lanes > chunk[0] else (lanes, wide_t, dst_t)
    picks = ", ".join(str(n * ratio) for n in range(part))  # little-endian: the low part first
    if part == lanes:
        fast = f"  {wide_t} b = ({wide_t})v; return __builtin_shufflevector(b, b, {picks});\n"
    else:
        fast = (f"  {dst_t} r; for (int c = 0; c < {lanes // part}; ++c) {{ {part_wide} b; "
                f"memcpy(&b, (const char *)&v + sizeof(b) * c, sizeof(b)); {part_t} d = "
                f"__builtin_shufflevector(b, b, {picks}); memcpy((char *)&r + sizeof(d) * c, &d, sizeof(d)); }}"
                f" return r;\n")
    body = (f"#if (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)) && "
            f"__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__\n{fast}#else\n"
            f"  return __builtin_convertvector(v, {dst_t});\n#endif\n")
    return name, f"static inline {dst_t} {name}({src_t} v) {{\n{body}}}"


# x86 zero/sign extensions by (source dtype, destination bits, lanes): (ISA macro, intrinsic, the load of the
# source vector's bytes into an __m128i)
_WIDENINGS = {
    ("uint8", 32, 8): ("__AVX2__", "_mm256_cvtepu8_epi32", "_mm_loadl_epi64"),
    ("int8", 32, 8): ("__AVX2__", "_mm256_cvtepi8_epi32", "_mm_loadl_epi64"),
    ("uint8", 16, 16): ("__AVX2__", "_mm256_cvtepu8_epi16", "_mm_loadu_si128"),
    ("int8", 16, 16): ("__AVX2__", "_mm256_cvtepi8_epi16", "_mm_loadu_si128"),
    ("int16", 32, 8): ("__AVX2__", "_mm256_cvtepi16_epi32", "_mm_loadu_si128"),
    ("uint16", 32, 8): ("__AVX2__", "_mm256_cvtepu16_epi32", "_mm_loadu_si128"),
    ("uint8", 32, 16): ("__AVX512F__", "_mm512_cvtepu8_epi32", "_mm_loadu_si128"),
    ("int8", 32, 16): ("__AVX512F__", "_mm512_cvtepi8_epi32", "_mm_loadu_si128"),
}


def widening_helper(src: str, dst_bits: int, lanes: int, src_t: str, dst_t: str) -> tuple[str, str] | None:
    """(name, definition) of an integer vector zero- or sign-extended with one x86 instruction
    (vpmovzxbd, ...) where -march enables it, else as C converts: GCC 12 turns __builtin_convertvector
    from uint8 x 8 to int32 x 8 into a byte extract and insert per lane (a residual int8 epilogue
    spent more there than its convolution took). None where no instruction applies."""
    entry = _WIDENINGS.get((src, dst_bits, lanes))
    if entry is None:
        return None
    isa, op, load = entry
    name = f"tw_widen_{src_t[3:]}_{dst_t[3:]}"
    body = (f"#if defined({isa})\n  return ({dst_t}){op}({load}((const __m128i *)&v));\n#else\n"
            f"  return __builtin_convertvector(v, {dst_t});\n#endif\n")
    return name, f"#include <immintrin.h>\nstatic inline {dst_t} {name}({src_t} v) {{\n{body}}}"


def integer_cast_helper(src, dst, vector_type) -> tuple[str, str] | None:
    """(name, definition) of a vector integer cast GCC 12 would scalarize, or None: narrowing picks the low
    part of each lane, widening uses vpmovzx/vpmovsx (`vector_type(dtype)`: the C type of a vector dtype)."""
    if not (src.is_int and dst.is_int) or src.bits == dst.bits:
        return None
    if src.bits > dst.bits:
        ratio, per_register = src.bits // dst.bits, 512 // src.bits
        chunk = (per_register, vector_type(dst.with_lanes(per_register * ratio)), vector_type(dst.with_lanes(
            per_register))) if src.lanes > per_register and src.lanes % per_register == 0 else None
        return narrowing_helper(src.lanes, ratio, vector_type(src), vector_type(dst),
                                vector_type(dst.with_lanes(src.lanes * ratio)), chunk)
    return widening_helper(src.name, dst.bits, src.lanes, vector_type(src), vector_type(dst))


def interleave_helper(k: int, lanes: int, vector_t: str, wide_t: str, pair_t: str) -> tuple[str, str]:
    """(name, definition) of the `k`-way interleave of `k` vectors of `lanes` lanes into one of k x lanes
    (element l * k + j is lane l of vector j): `k` scatters at stride k to offsets 0 .. k-1 become one
    contiguous store. Pairs are concatenated, then one shuffle picks the lanes (GCC >= 12, clang; an
    element-wise fallback elsewhere)."""
    name = f"tw_interleave{k}_{vector_t[3:]}"
    args = ", ".join(f"{vector_t} v{j}" for j in range(k))
    picks = ", ".join(str(j * lanes + n) for n in range(lanes) for j in range(k))
    if k == 2:
        fast = f"return __builtin_shufflevector(v0, v1, {picks});"
    else:
        concat = ", ".join(str(n) for n in range(2 * lanes))
        fast = " ".join(f"{pair_t} c{j} = __builtin_shufflevector(v{2 * j}, v{2 * j + 1}, {concat});"
                        for j in range(2)) + f" return __builtin_shufflevector(c0, c1, {picks});"
    slow = f"{wide_t} r; " + " ".join(f"r[{n * k + j}] = v{j}[{n}];" for n in range(lanes) for j in range(k)) \
        + " return r;"
    return name, (f"static inline {wide_t} {name}({args}) {{\n#if defined(__clang__) || __GNUC__ >= 12\n  {fast}\n"
                  f"#else\n  {slow}\n#endif\n}}")


__all__ = ["SHUFFLE_MACRO", "StridedPlan", "blocked_interleave_helper", "interleave_helper", "interleaved_run",
           "narrowing_helper",
           "scatter_helper", "shuffle_steps", "strided_load_helper", "strided_plan"]
