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
