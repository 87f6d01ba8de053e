"""Whether the C compiler links glibc's vector math library (libmvec: exp, log,
erf, tanh, sin, cos on 2-16 lanes, at most 4 ulp, special values handled).
GCC calls it only under -ffast-math; the generated C calls it by its vector-ABI
name under `TW_LIBMVEC` (codegen/vector_math.py) and falls back to one libm call
per lane without it."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile

from ..codegen.vector_math import MVEC_FUNCS, MVEC_LANES, mvec_symbol


@functools.cache
def libmvec_flags(compiler: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compile flags, link flags) that enable libmvec calls, or two empty tuples when
    `compiler` cannot link every symbol the generated code may use (no glibc >= 2.35)."""
    symbols = [mvec_symbol(f, bits, n)[0] for f in MVEC_FUNCS for bits, widths in MVEC_LANES.items() for n in widths]
    source = "".join(f"extern void {s}(void);\n" for s in symbols)
    source += "void *tw_mvec_probe[] = {" + ", ".join(f"(void *){s}" for s in symbols) + "};\n"
    with tempfile.TemporaryDirectory(prefix="tw_mvec_") as d:
        src = os.path.join(d, "probe.c")
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler, "-shared", "-fPIC", src, "-o", os.path.join(d, "probe.so"), "-Wl,-z,defs", "-lmvec", "-lm"]
        try:
            ok = subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
    return (("-DTW_LIBMVEC",), ("-lmvec",)) if ok else ((), ())
