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
        if base in C_KEYWORDS or base.startswith("tw_") or base.startswith("__"):
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
