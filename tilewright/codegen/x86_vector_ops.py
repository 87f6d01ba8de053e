"""Vector min/max and round-to-integer as single x86 instructions where -march enables them.

GCC renders the portable spelling of a vector min (`k = a < b; (a & k) | (b & ~k)`) as a compare into a
mask register, the mask widened back to a vector and three logic operations (AVX-512: ~8 instructions
where `vpminsd` is one), and `(int)nearbyintf(x)` as a round and a truncating conversion where
`vcvtps2dq` is one. Quantized epilogues are made of these: a requantize clamps twice and rounds once.
Every helper keeps the portable spelling under `#else`, so other compilers and ISAs get the same values.
"""

from __future__ import annotations

from ..ir.dtype import DType

# (register bits, element bits) -> the ISA macro under which x86 has an integer min/max of that width
_INT_ISA = {
    (128, 8): "__SSE4_1__", (128, 16): "__SSE4_1__", (128, 32): "__SSE4_1__",
    (256, 8): "__AVX2__", (256, 16): "__AVX2__", (256, 32): "__AVX2__", (256, 64): "__AVX512VL__",
    (512, 8): "__AVX512BW__", (512, 16): "__AVX512BW__", (512, 32): "__AVX512F__", (512, 64): "__AVX512F__",
}
_FLOAT_ISA = {128: "__SSE4_1__", 256: "__AVX__", 512: "__AVX512F__"}
_CVT_ISA = {128: "__SSE2__", 256: "__AVX__", 512: "__AVX512F__"}
_PREFIX = {128: "_mm", 256: "_mm256", 512: "_mm512"}
_INCLUDE = "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"


def _minmax_expr(op: str, d: DType, width: int) -> tuple[str, str, str] | None:
    """(ISA macro, operand and result register types, C expression over registers `x`, `y`) of `op` in one
    instruction on `width`-bit registers, or None."""
    pre = _PREFIX[width]
    if d.is_int:
        isa = _INT_ISA.get((width, d.bits))
        sign = "u" if d.name.startswith("uint") else "i"
        return None if isa is None else (isa, f"__m{width}i", f"__m{width}i", f"{pre}_{op}_ep{sign}{d.bits}(x, y)")
    if not d.is_float or d.bits not in (32, 64):
        return None
    # x86's min(x, y) is `x < y ? x : y`; a NaN in `x` is put back so a NaN wins, as in NumPy
    s = "ps" if d.bits == 32 else "pd"
    if width == 512:
        body = f"{pre}_mask_mov_{s}({pre}_{op}_{s}(x, y), {pre}_cmp_{s}_mask(x, x, _CMP_UNORD_Q), x)"
    elif width == 256:
        body = f"{pre}_blendv_{s}({pre}_{op}_{s}(x, y), x, {pre}_cmp_{s}(x, x, _CMP_UNORD_Q))"
    else:
        body = f"{pre}_blendv_{s}({pre}_{op}_{s}(x, y), x, {pre}_cmpunord_{s}(x, x))"
    reg = f"__m{width}" + ("" if d.bits == 32 else "d")
    return _FLOAT_ISA[width], reg, reg, body


def _chunked(bits: int, variants, portable: str, args: tuple[str, ...], result_t: str) -> str:
    """A helper body: for each (width, (ISA macro, operand and result register types, expression)) whose
    width divides `bits`,
    the vector split into registers of that width (memcpy: no alignment assumed, compiled to moves), the
    widest ISA first; `portable` under the last #else."""
    lines, first = [], True
    for width, found in variants:
        if found is None or bits % width:
            continue
        isa, reg, out_reg, expr = found
        names = ("x", "y")[:len(args)]
        step = width // 8
        lines.append(f"#{'if' if first else 'elif'} defined({isa})")
        lines.append(f"  {result_t} r; for (int c = 0; c < {bits // width}; ++c) {{ {reg} "
                     + ", ".join(names) + "; "
                     + " ".join(f"memcpy(&{n}, (const char *)&{a} + {step} * c, {step});" for n, a in zip(names, args))
                     + f" {out_reg} z = {expr}; memcpy((char *)&r + {step} * c, &z, {step}); }} return r;")
        first = False
    if first:
        return f"  {portable}\n"
    return "\n".join(lines) + f"\n#else\n  {portable}\n#endif\n"


def minmax_helper(op: str, d: DType, t: str, m: str) -> tuple[str, str]:
    """(name, definition) of lane-wise `op` ("min"/"max") on vectors `t` of dtype `d` (`m`: the same-width
    integer mask type): NumPy's minimum/maximum, a NaN in either operand wins."""
    cmp = "<" if op == "min" else ">"
    keep = f"(a {cmp} b) | (a != a)" if d.is_float else f"a {cmp} b"
    portable = f"{m} k = {keep}; return ({t})((({m})a & k) | (({m})b & ~k));"
    name = f"tw_{op}_{t[3:]}"
    variants = [(w, _minmax_expr(op, d, w)) for w in (512, 256, 128)]
    body = _chunked(d.bits * d.lanes, variants, portable, ("a", "b"), t)
    return name, f"{_INCLUDE}static inline {t} {name}({t} a, {t} b) {{\n{body}}}"


def round_to_int_helper(src: DType, dst: DType, src_t: str, dst_t: str) -> tuple[str, str] | None:
    """(name, definition) of float32 -> int32 lanes rounded half to even (`nearbyintf` then a conversion)
    as `cvtps2dq` per register (it rounds by MXCSR, which kernels leave at nearest-even; out-of-range lanes
    give INT32_MIN both ways), or None for other dtypes."""
    if src.name != "float32" or dst.name != "int32":
        return None
    name = f"tw_round_cvt_{src_t[3:]}_{dst_t[3:]}"
    portable = (f"{src_t} r; for (int l = 0; l < {src.lanes}; ++l) r[l] = nearbyintf(a[l]); "
                f"return __builtin_convertvector(r, {dst_t});")
    variants = [(w, (_CVT_ISA[w], f"__m{w}", f"__m{w}i", f"{_PREFIX[w]}_cvtps_epi32(x)")) for w in (512, 256, 128)]
    body = _chunked(src.bits * src.lanes, variants, portable, ("a",), dst_t)
    return name, f"{_INCLUDE}static inline {dst_t} {name}({src_t} a) {{\n{body}}}"


__all__ = ["minmax_helper", "round_to_int_helper"]
