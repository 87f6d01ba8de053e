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
            base = "u_" + base.lstrip("_")
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
