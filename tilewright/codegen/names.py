"""Identifiers in generated code: every user-derived name is reduced to
[A-Za-z0-9_], kept clear of C keywords and our own prefix, and made unique,
so no tensor or axis name can inject code."""

from __future__ import annotations

import re

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local
bool true false NULL main errno
""".split())

# Identifiers the generated C or its headers define (math, libc, stdint, OpenMP, GNU C's predefined
# macros linux/unix/i386);
# all-caps names of 3+ characters are treated as macros too (INFINITY, CLOCK_MONOTONIC, ...).
C_LIBRARY = frozenset("""
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t size_t ptrdiff_t
float double _Float16 timespec clock_gettime malloc free calloc realloc aligned_alloc abort exit abs labs llabs
memcpy memset memmove strlen printf puts
exp expf log logf sqrt sqrtf tanh tanhf erf erff fabs fabsf pow powf floor floorf ceil ceilf nearbyint nearbyintf
sin sinf cos cosf fmin fminf fmax fmaxf fmod fmodf round roundf trunc truncf exp2 exp2f log2 log2f
omp_set_num_threads omp_get_num_threads omp_get_thread_num
linux unix i386
""".split())


def _reserved(name: str) -> bool:
    return (name in C_KEYWORDS or name in C_LIBRARY or name.startswith("tw_") or name.startswith("__")
            or (len(name) >= 3 and name.upper() == name and any(c.isalpha() for c in name)))


class NameTable:
    def __init__(self, reserved=()):
        self._by_object: dict[int, str] = {}
        self._keep: list = []  # keep objects alive so ids stay unique
        self._used: set[str] = set(reserved)

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v"
        base = re.sub(r"_+", "_", base)
        if base[0].isdigit():
            base = "v" + base
        if _reserved(base):
            base = "v_" + base.lstrip("_")  # not u_: BSD headers define u_int, u_char, u_long
        name, n = base, 1
        while name in self._used:
            name, n = f"{base}_{n}", n + 1
        self._used.add(name)
        return name

    def of(self, obj, hint: str) -> str:
        key = id(obj)
        if key not in self._by_object:
            self._by_object[key] = self.fresh(hint)
            self._keep.append(obj)
        return self._by_object[key]


def _vector_type_names() -> set[str]:
    scalars = "char uchar short ushort int uint long ulong float double half longlong ulonglong".split()
    return {f"{p}{s}{n}" for s in scalars for n in (1, 2, 3, 4, 8, 16) for p in ("", "make_")}


# Extra identifiers device code must not redefine: C++ keywords (CUDA is C++), CUDA built-ins, OpenCL C
# keywords, address spaces, built-in functions and vector types (float4, make_float4, ...).
GPU_RESERVED = frozenset("""
alignas alignof and asm catch class constexpr const_cast decltype delete dynamic_cast explicit export friend
mutable namespace new noexcept not nullptr operator or private protected public reinterpret_cast static_assert
static_cast template this throw try typeid typename using virtual wchar_t xor char8_t char16_t char32_t
blockIdx threadIdx blockDim gridDim warpSize dim3 min max rint rintf fma fmaf signbit isnan isinf
kernel global local constant generic read_only write_only read_write uint ushort uchar ulong half size_t
get_group_id get_local_id get_global_id get_local_size get_num_groups barrier mem_fence select clamp mad
native_exp dot cross mix step sign vload2 vload3 vload4 vload8 vload16 vstore2 vstore3 vstore4 vstore8 vstore16
as_float as_uint as_int convert_float convert_int
""".split()) | _vector_type_names()
