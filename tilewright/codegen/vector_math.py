"""Names of glibc's vector math functions (libmvec) in the x86-64 vector function
ABI: `_ZGV<isa>N<lanes>v_<func>[f]`, with the ISA letter of each vector width.
The C renderer calls them for vector exp/log/erf/tanh/sin/cos under `TW_LIBMVEC`;
`build/vector_math.py` decides whether a compiler links them."""

from __future__ import annotations

MVEC_FUNCS = ("exp", "log", "erf", "tanh", "sin", "cos")
MVEC_ISA = {128: ("b", "__SSE2__"), 256: ("d", "__AVX2__"), 512: ("e", "__AVX512F__")}
MVEC_LANES = {32: (4, 8, 16), 64: (2, 4, 8)}  # per scalar width in bits


def mvec_symbol(func: str, scalar_bits: int, lanes: int) -> tuple[str, str] | None:
    """(the function's symbol, the predefined macro of the ISA it needs), or None if libmvec has none."""
    isa = MVEC_ISA.get(scalar_bits * lanes)
    if func not in MVEC_FUNCS or isa is None or scalar_bits not in MVEC_LANES:
        return None
    return f"_ZGV{isa[0]}N{lanes}v_{func}{'f' if scalar_bits == 32 else ''}", isa[1]


def vector_math_helper(func: str, dtype, t: str, n_args: int, lane_call: str) -> tuple[str, str]:
    """(name, definition) of vector math `func` on vectors `t` of `dtype`: libmvec's vector function where
    the build links it (TW_LIBMVEC, see build/vector_math.py) and the ISA has the width, else `lane_call`
    (the scalar call on lane `l` of arguments a0, a1, ...) per lane."""
    name = f"tw_{func}_{t[3:]}"
    params = ", ".join(f"{t} a{k}" for k in range(n_args))
    per_lane = (f"static inline {t} {name}({params}) {{ {t} r; for (int l = 0; l < {dtype.lanes}; ++l) "
                f"r[l] = {lane_call}; return r; }}")
    mvec = mvec_symbol(func, dtype.bits, dtype.lanes) if dtype.is_float else None
    if mvec is None:
        return name, per_lane
    sym, isa = mvec  # the ABI passes naturally aligned vectors: a second, aligned type for the call
    elem = "float" if dtype.bits == 32 else "double"
    nat = f"{t}_abi"
    return name, (f"#if defined(TW_LIBMVEC) && defined({isa})\n"
                  f"typedef {elem} {nat} __attribute__((vector_size({dtype.bits // 8 * dtype.lanes})));\n"
                  f"extern {nat} {sym}({nat});\n"
                  f"static inline {t} {name}({t} a0) {{ return ({t}){sym}(({nat})a0); }}\n"
                  f"#else\n{per_lane}\n#endif")
