"""Vector min/max and round-to-integer as single x86 instructions where -march enables them.

GCC renders the portable spelling of a vector min (`k = a < b; (a & k) | (b & ~k)`) as a compare into a
mask register, the mask widened back to a vector and three logic operations (AVX-512: ~8 instructions
where `vpminsd` is one), and `(int)nearbyintf(x)` as a round and a truncating conversion where
`vcvtps2dq` is one. Quantized epilogues are made of these: a requantize clamps twice and rounds once.
Every helper keeps the portable spelling under `#else`, so other compilers and ISAs get the same values.
"""

from __future__ import annotations

from ..ir.dtype import DType

# (vector bits, element kind) -> (ISA macro, intrinsic prefix, C vector type); kind: "i8", "i16", "i32",
# "i64" (integers of that width), "ps", "pd"
_INT_ISA = {
    (128, 8): "__SSE4_1__", (128, 16): "__SSE4_1__", (128, 32): "__SSE4_1__",
    (256, 8): "__AVX2__", (256, 16): "__AVX2__", (256, 32): "__AVX2__", (256, 64): "__AVX512VL__",
    (512, 8): "__AVX512BW__", (512, 16): "__AVX512BW__", (512, 32): "__AVX512F__", (512, 64): "__AVX512F__",
}
_FLOAT_ISA = {128: "__SSE4_1__", 256: "__AVX__", 512: "__AVX512F__"}
_PREFIX = {128: "_mm", 256: "_mm256", 512: "_mm512"}
_INCLUDE = "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"


def _native_minmax(op: str, d: DType) -> tuple[str, str] | None:
    """(ISA macro, C expression over `a`, `b`) of one instruction's min/max, or None."""
    bits = d.bits * d.lanes
    if bits not in _PREFIX:
        return None
    pre = _PREFIX[bits]
    if d.is_int:
        isa = _INT_ISA.get((bits, d.bits))
        if isa is None:
            return None
        sign = "u" if d.name.startswith("uint") else "i"
        vec = f"__m{bits}i"
        return isa, f"{pre}_{op}_ep{sign}{d.bits}(({vec})a, ({vec})b)"
    if not d.is_float or d.bits not in (32, 64):
        return None
    # x86's min(a, b) is `a < b ? a : b`; a NaN in `a` is put back so a NaN wins, as in NumPy
    s = "ps" if d.bits == 32 else "pd"
    vec = f"__m{bits}" + ("" if d.bits == 32 else "d")
    if bits == 512:
        body = (f"{pre}_mask_mov_{s}({pre}_{op}_{s}(({vec})a, ({vec})b), "
                f"{pre}_cmp_{s}_mask(({vec})a, ({vec})a, _CMP_UNORD_Q), ({vec})a)")
    elif bits == 256:
        body = (f"{pre}_blendv_{s}({pre}_{op}_{s}(({vec})a, ({vec})b), ({vec})a, "
                f"{pre}_cmp_{s}(({vec})a, ({vec})a, _CMP_UNORD_Q))")
    else:
        body = (f"{pre}_blendv_{s}({pre}_{op}_{s}(({vec})a, ({vec})b), ({vec})a, "
                f"{pre}_cmpunord_{s}(({vec})a, ({vec})a))")
    return _FLOAT_ISA[bits], body


def minmax_helper(op: str, d: DType, t: str, m: str) -> tuple[str, str]:
    """(name, definition) of lane-wise `op` ("min"/"max") on vectors `t` of dtype `d` (`m`: the same-width
    integer mask type): NumPy's minimum/maximum, a NaN in either operand wins."""
    cmp = "<" if op == "min" else ">"
    keep = f"(a {cmp} b) | (a != a)" if d.is_float else f"a {cmp} b"
    portable = f"{m} k = {keep}; return ({t})((({m})a & k) | (({m})b & ~k));"
    name = f"tw_{op}_{t[3:]}"
    native = _native_minmax(op, d)
    if native is None:
        return name, f"static inline {t} {name}({t} a, {t} b) {{ {portable} }}"
    isa, native_expr = native
    return name, (f"{_INCLUDE}static inline {t} {name}({t} a, {t} b) {{\n#if defined({isa})\n"
                  f"  return ({t}){native_expr};\n#else\n  {portable}\n#endif\n}}")


def round_to_int_helper(src: DType, dst: DType, src_t: str, dst_t: str) -> tuple[str, str] | None:
    """(name, definition) of float32 -> int32 lanes rounded half to even (`nearbyintf` then a conversion)
    as one `cvtps2dq` (it rounds by MXCSR, which kernels leave at nearest-even; out-of-range lanes give
    INT32_MIN both ways), or None for other dtypes and widths."""
    bits = src.bits * src.lanes
    if src.name != "float32" or dst.name != "int32" or bits not in _PREFIX:
        return None
    isa = {128: "__SSE2__", 256: "__AVX__", 512: "__AVX512F__"}[bits]
    name = f"tw_round_cvt_{src_t[3:]}_{dst_t[3:]}"
    portable = (f"{src_t} r; for (int l = 0; l < {src.lanes}; ++l) r[l] = nearbyintf(a[l]); "
                f"return __builtin_convertvector(r, {dst_t});")
    return name, (f"{_INCLUDE}static inline {dst_t} {name}({src_t} a) {{\n#if defined({isa})\n"
                  f"  return ({dst_t}){_PREFIX[bits]}_cvtps_epi32((__m{bits})a);\n#else\n  {portable}\n#endif\n}}")


__all__ = ["minmax_helper", "round_to_int_helper"]
