"""bfloat16 vectors in the C dialect: 16-bit lanes holding bfloat16 bits, loaded, stored, selected
and converted to and from float32 vectors, never computed on (arithmetic on bfloat16 stays scalar,
through float32; the lowering only vectorizes these moves and conversions).

float32 -> bfloat16 rounds to nearest even and keeps a NaN a quiet NaN, bit for bit what the
scalar `tw_f32_to_bf16` and the reference do; written on integer lanes, so it is exact on every
x86 level (AVX-512 BF16's `vcvtneps2bf16` is not used: it flushes denormal inputs to zero)."""

from __future__ import annotations

from ..errors import BuildError
from ..ir.dtype import bfloat16, float32, int16, int32
from .strided import integer_cast_helper


def widen_helper(lanes: int, vector_type) -> tuple[str, str]:
    """(name, definition) of bfloat16 x lanes -> float32 x lanes: each value's bits become the high
    half of a float32 (exact)."""
    src, f32 = vector_type(bfloat16.with_lanes(lanes)), vector_type(float32.with_lanes(lanes))
    name, u32 = f"tw_bf16_to_f32_x{lanes}", f"tw_u32x{lanes}"
    return name, (f"static inline {f32} {name}({src} v) {{\n"
                  f"  typedef uint32_t {u32} __attribute__((vector_size({4 * lanes})));\n"
                  f"  return ({f32})(__builtin_convertvector(v, {u32}) << 16);\n}}")


def narrow_helper(lanes: int, vector_type) -> tuple[str, str, tuple[str, str] | None]:
    """(name, definition, the int32 -> int16 helper it calls or None) of float32 x lanes -> bfloat16
    x lanes, rounding to nearest even; the low halves are picked by `strided.integer_cast_helper`'s
    narrowing where it has one for the ISA, else __builtin_convertvector."""
    f32, dst = vector_type(float32.with_lanes(lanes)), vector_type(bfloat16.with_lanes(lanes))
    i32, i16 = vector_type(int32.with_lanes(lanes)), vector_type(int16.with_lanes(lanes))
    narrowing = integer_cast_helper(int32.with_lanes(lanes), int16.with_lanes(lanes), vector_type)
    narrow = f"{narrowing[0]}(r)" if narrowing else f"__builtin_convertvector(r, {i16})"
    name, u32 = f"tw_f32_to_bf16_x{lanes}", f"tw_u32x{lanes}"
    body = (f"static inline {dst} {name}({f32} f) {{\n"
            f"  typedef uint32_t {u32} __attribute__((vector_size({4 * lanes})));\n"
            f"  const {u32} u = ({u32})f;\n"
            f"  const {u32} rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;\n"
            f"  const {u32} nan = ({u32})((u & 0x7fffffffu) > 0x7f800000u);\n"
            f"  const {i32} r = ({i32})((nan & ((u >> 16) | 0x40u)) | (~nan & rounded));\n"
            f"  return ({dst}){narrow};\n}}")
    return name, body, narrowing


def render_bf16_cast(gen, e) -> str:
    """The C text of vector Cast `e` between float32 and bfloat16 (`gen`: the C code generator)."""
    src, dst, lanes = e.value.dtype, e.dtype, e.dtype.lanes
    if {src.name, dst.name} != {"float32", "bfloat16"}:
        raise BuildError(f"vector cast {src} -> {dst}: bfloat16 vectors convert to and from float32 only")
    if src.name == "bfloat16":
        name, definition = widen_helper(lanes, gen.vector_type)
    else:
        name, definition, narrowing = narrow_helper(lanes, gen.vector_type)
        if narrowing:
            gen.helpers.setdefault(*narrowing)
    gen.helpers.setdefault(name, definition)
    return f"{name}({gen.expr(e.value)})"


__all__ = ["widen_helper", "narrow_helper", "render_bf16_cast"]
