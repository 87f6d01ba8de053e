"""C for the CPU template's innermost level: the vector type and its helpers, and one
register-tile microkernel per row count 1..mr (edge tiles get their own, fully unrolled).

The microkernel keeps an m x nrv tile of vector accumulators in registers and walks the
reduction as segments (one for a GEMM's row, one per kernel tap group for a convolution),
broadcasting one input element per row and loading one row of the packed weight panel
per step; the weight panel is laid out so its loads are aligned and consecutive."""

from __future__ import annotations

from ..codegen.vector_math import mvec_symbol
from .cpu_tiles import CpuTile

_MATH = {"ERF": ("erf", "erff"), "TANH": ("tanh", "tanhf"), "EXP": ("exp", "expf"), "LOG": ("log", "logf")}


def prelude(tile: CpuTile) -> str:
    """Includes, `tw_vf`, loads/stores, the masks the epilogues use and the vector math (libmvec's
    vector-ABI functions where the compiler links them, one libm call per lane otherwise)."""
    vb, lanes = tile.vec_bytes, tile.lanes
    out = [
        "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n#include <time.h>",
        "#ifdef _OPENMP\n#include <omp.h>\n#endif",
        f"#define TW_L {lanes}",
        f"typedef float tw_vf __attribute__((vector_size({vb})));",
        f"typedef float tw_vfu __attribute__((vector_size({vb}), aligned(4)));",
        f"typedef int32_t tw_vi __attribute__((vector_size({vb})));",
        "static inline tw_vf tw_load(const float *p) { return *(const tw_vfu *)p; }",
        "static inline tw_vf tw_load_aligned(const float *p) { return *(const tw_vf *)p; }",
        "static inline void tw_store(float *p, tw_vf v) { *(tw_vfu *)p = v; }",
        "static inline tw_vf tw_splat(float x) { return (tw_vf){0} + x; }",
        "static inline tw_vf tw_select(tw_vi m, tw_vf a, tw_vf b) {\n"
        "  return (tw_vf)((m & (tw_vi)a) | (~m & (tw_vi)b));\n}",
        "static inline tw_vf tw_relu(tw_vf v) { return tw_select(v > tw_splat(0.0f), v, tw_splat(0.0f)); }",
        "static inline tw_vf tw_clamp(tw_vf v, float lo, float hi) {\n"
        "  v = tw_select(v < tw_splat(lo), tw_splat(lo), v);\n"
        "  return tw_select(v > tw_splat(hi), tw_splat(hi), v);\n}",
        "static inline tw_vf tw_where_gt(tw_vf v, float t, tw_vf a, tw_vf b) {\n"
        "  return tw_select(v > tw_splat(t), a, b);\n}",
    ]
    for macro, (func, libm) in _MATH.items():
        sym = mvec_symbol(func, 32, lanes)
        fallback = (f"static inline tw_vf tw_{func}_lanes(tw_vf x) {{\n"
                    f"  for (int i = 0; i < TW_L; ++i) x[i] = {libm}(x[i]);\n  return x;\n}}")
        if sym is None:
            out += [fallback, f"#define TW_{macro}(x) tw_{func}_lanes(x)"]
            continue
        name, isa = sym
        out.append(f"#if defined(TW_LIBMVEC) && defined({isa})\nextern tw_vf {name}(tw_vf);\n"
                   f"#define TW_{macro}(x) {name}(x)\n#else\n{fallback}\n#define TW_{macro}(x) tw_{func}_lanes(x)\n"
                   "#endif")
    return "\n".join(out)


def _at(tile: CpuTile, v: int, blk: int) -> str:
    """Offset of the tile's v-th vector in its row: `blk` columns stored together, `plane` floats on to
    the next `blk` (channel-blocked output; a dense tile has blk = nr, so every vector is in the first)."""
    q, e = divmod(v * tile.lanes, blk)
    return f"{q} * plane + {e}" if q else f"{e}"


def microkernel(tile: CpuTile, m: int, prefix: str = "", blk: int = 0) -> str:
    """`tw_ukr<prefix>_<m>`: out[m x nr] = (cin or 0) + sum over segments s, k < len of
    rows[r][seg[s] + k] * bp[k-th packed row]; `cin` may alias `out`. Both are read and written
    `blk` columns together, `plane` floats between such groups (see `_at`)."""
    nrv, blk = tile.nrv, blk or tile.nr
    acc = [[f"c{r}_{v}" for v in range(nrv)] for r in range(m)]
    lines = [f"static inline void tw_ukr{prefix}_{m}(int nseg, const long *seg, int len, const float *const *rows,",
             "                                const float *restrict bp, const float *cin, long ldin, float *out, "
             "long ldout, long plane) {",
             "  (void)plane;",
             "  tw_vf " + ", ".join(a for row in acc for a in row) + ";",
             "  if (cin) {"]
    lines += [f"    {acc[r][v]} = tw_load(cin + {r} * ldin + {_at(tile, v, blk)});"
              for r in range(m) for v in range(nrv)]
    lines += ["  } else {"]
    lines += [f"    {acc[r][v]} = (tw_vf){{0}};" for r in range(m) for v in range(nrv)]
    lines += ["  }",
              "  for (int s = 0; s < nseg; ++s) {"]
    lines += [f"    const float *restrict a{r} = rows[{r}] + seg[s];" for r in range(m)]
    lines += ["    for (int k = 0; k < len; ++k) {"]
    # the empty asm keeps each weight vector in a register: folded into every row's FMA as a memory
    # operand it would be loaded m times per step, and the loads, not the FMAs, would bound the loop
    lines += [f"      tw_vf b{v} = tw_load_aligned(bp + {v * tile.lanes}); __asm__(\"\" : \"+v\"(b{v}));"
              for v in range(nrv)]
    lines += [f"      bp += {tile.nr};"]
    for r in range(m):
        lines.append(f"      {{ tw_vf a = tw_splat(a{r}[k]); "
                     + " ".join(f"{acc[r][v]} += a * b{v};" for v in range(nrv)) + " }")
    lines += ["    }", "  }"]
    lines += [f"  tw_store(out + {r} * ldout + {_at(tile, v, blk)}, {acc[r][v]});"
              for r in range(m) for v in range(nrv)]
    lines.append("}")
    return "\n".join(lines)


def microkernels(tile: CpuTile, prefix: str = "", blk: int = 0) -> str:
    """Every row count's microkernel and `tw_ukr<prefix>(m, ...)`, which picks one."""
    return ("\n\n".join(microkernel(tile, m, prefix, blk) for m in range(1, tile.mr + 1)) + "\n\n"
            + _dispatch(tile, prefix))


def _dispatch(tile: CpuTile, prefix: str) -> str:
    cases = "\n".join(f"    case {m}: tw_ukr{prefix}_{m}(nseg, seg, len, rows, bp, cin, ldin, out, ldout, plane); "
                      "return;"
                      for m in range(1, tile.mr + 1))
    return (f"static inline void tw_ukr{prefix}(int m, int nseg, const long *seg, int len, const float *const *rows,\n"
            "                          const float *bp, const float *cin, long ldin, float *out, long ldout,\n"
            "                          long plane) {\n"
            f"  switch (m) {{\n{cases}\n  }}\n}}")
