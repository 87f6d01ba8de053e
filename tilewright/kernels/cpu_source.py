"""C for the CPU template's outer levels: per stage, the reduction-block table, how a register
tile finds its input rows (a matrix's rows, or the output pixels' windows of a padded NHWC
input: an implicit GEMM with no im2col buffer), the epilogue on each finished tile, and the
task loop (row blocks x column blocks across threads). A b2b kernel runs two stages per row
block, the first into a thread-owned intermediate that the second reads while it is in cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..codegen.c import entry_points
from .cpu_microkernel import microkernels, prelude
from .cpu_tiles import CpuTile
from .epilogue import Epilogue
from .problem import ConvProblem, GemmProblem


@dataclass(frozen=True)
class Stage:
    """One GEMM-shaped stage: `problem` read from `source` ("matrix" rows of stride `lda`, or "conv"),
    its epilogue, and how many output columns it stores (`store_cols`: N, or the padded width of an
    intermediate that the next stage reads)."""
    index: int
    problem: GemmProblem | ConvProblem
    epilogue: Epilogue
    tile: CpuTile
    lda: int
    store_cols: int

    @property
    def n_padded(self) -> int:
        return math.ceil(self.problem.N / self.tile.nr) * self.tile.nr

    @property
    def blocked(self) -> bool:
        """Writes NCHW{b}c: each b output channels of a pixel together, a plane of pixels per block."""
        return isinstance(self.problem, ConvProblem) and self.problem.blocked

    @property
    def blk(self) -> int:
        """Output columns stored together: a channel block, or (plain rows) a whole register tile."""
        return self.problem.out_block if self.blocked else self.tile.nr

    @property
    def plane(self) -> int:
        """Floats from one output channel block to the next (blocked only)."""
        p = self.problem
        return p.OH * p.OW * p.out_block if self.blocked else 0

    def k_blocks(self) -> list[tuple[list[int], int, int]]:
        """(segment offsets into an input row, segment length, offset into the packed reduction) per block.
        A convolution's reduction runs tap by tap, each tap's input channels block by block (k = tap * IC
        + ic, the HWIO weight's order); NHWC is the case of one block of all IC channels."""
        p, kc = self.problem, self.tile.kc
        if isinstance(p, GemmProblem):
            return [([k0], min(kc, p.K - k0), k0) for k0 in range(0, p.K, kc)]
        bi = p.in_block or p.IC
        hp, wp = p.H + 2 * p.pad, p.W + 2 * p.pad
        taps = [((kh * p.dilation) * wp + kw * p.dilation) * bi for kh in range(p.KH) for kw in range(p.KW)]
        segs = [(t, cb) for t in range(len(taps)) for cb in range(p.IC // bi)]
        at = [cb * hp * wp * bi + taps[t] for t, cb in segs]  # the NHWC case has one block: cb = 0
        if bi >= kc:
            return [([off + c0], min(kc, bi - c0), t * p.IC + cb * bi + c0)
                    for (t, cb), off in zip(segs, at) for c0 in range(0, bi, kc)]
        group = max(1, kc // bi)
        return [(at[s0:s0 + group], bi, segs[s0][0] * p.IC + segs[s0][1] * bi) for s0 in range(0, len(segs), group)]


def _table(st: Stage) -> str:
    blocks = st.k_blocks()
    width = max(len(b[0]) for b in blocks)
    i = st.index
    segs = ", ".join("{" + ", ".join(str(s) for s in b[0] + [0] * (width - len(b[0]))) + "}" for b in blocks)
    return (f"#define TW_S{i}_NKB {len(blocks)}\n"
            f"static const int tw_s{i}_nseg[] = {{{', '.join(str(len(b[0])) for b in blocks)}}};\n"
            f"static const int tw_s{i}_len[] = {{{', '.join(str(b[1]) for b in blocks)}}};\n"
            f"static const long tw_s{i}_koff[] = {{{', '.join(str(b[2]) for b in blocks)}}};\n"
            f"static const long tw_s{i}_seg[][{width}] = {{{segs}}};")


def _rows(st: Stage) -> str:
    p, i = st.problem, st.index
    head = f"static inline void tw_s{i}_rows(long ir, int m, const float *src, const float **rows) {{\n"
    if isinstance(p, GemmProblem):
        return head + f"  for (int r = 0; r < m; ++r) rows[r] = src + (ir + r) * {st.lda}L;\n}}"
    if p.pointwise and not p.blocked:  # a 1x1 stride-1 conv: output pixel r reads input pixel r
        return head + f"  for (int r = 0; r < m; ++r) rows[r] = src + (ir + r) * {p.IC}L;\n}}"
    hp, wp = p.H + 2 * p.pad, p.W + 2 * p.pad
    bi = p.in_block or p.IC
    return head + (f"  for (int r = 0; r < m; ++r) {{\n"
                   f"    long pix = ir + r, n = pix / {p.OH * p.OW}L, rem = pix % {p.OH * p.OW}L;\n"
                   f"    long oh = rem / {p.OW}L, ow = rem % {p.OW}L;\n"
                   f"    rows[r] = src + n * {hp * wp * p.IC}L + (oh * {p.stride * wp}L + ow * {p.stride}L) * {bi}L;\n"
                   "  }\n}")


def _voff(st: Stage, q: str, plane: str) -> str:
    """C offset of the tile's q-th vector from its first column, `plane` floats between channel blocks."""
    return f"(({q}) * TW_L / {st.blk}) * {plane} + ({q}) * TW_L % {st.blk}"


def _col(st: Stage, jr: str) -> str:
    """C offset of output column `jr` (a register tile's first) from its row's first column."""
    return f"({jr} / {st.blk}) * {st.plane}L + {jr} % {st.blk}" if st.blocked else jr


def _copy_tile(st: Stage, to_tile: bool) -> str:
    """The partial tile's rows between the thread's dense `tile` and the output `c`."""
    nr = st.tile.nr
    if not st.blocked:
        dst, src = (f"tile + r * {nr}", "c + r * ldo") if to_tile else ("c + r * ldo", f"tile + r * {nr}")
        return f"for (int r = 0; r < m; ++r) memcpy({dst}, {src}, (size_t)cols * sizeof(float));"
    d, sv = (f"tile + r * {nr} + q * TW_L", "c + r * ldo + " + _voff(st, "q", f"{st.plane}L"))
    dst, src = (d, sv) if to_tile else (sv, d)
    return (f"for (int r = 0; r < m; ++r) for (int q = 0; q * TW_L < cols; ++q) "
            f"memcpy({dst}, {src}, TW_L * sizeof(float));")


def _epilogue(st: Stage) -> str:
    """The epilogue on a finished register tile: `tile` in a layout with `tplane` floats between channel
    blocks, the residual's matching tile at `res` (its rows `ldres` apart, `rplane` between blocks)."""
    i, ep, nrv, nr = st.index, st.epilogue, st.tile.nrv, st.tile.nr
    body = "\n".join("      " + line for line in ep.c_body().splitlines())
    return (f"static inline void tw_s{i}_epi(float *tile, long ld, long tplane, int m, long jr, int cols,\n"
            "                               const float *bias, const float *res, long ldres, long rplane) {\n"
            "  (void)jr; (void)cols; (void)bias; (void)res; (void)ldres; (void)tplane; (void)rplane;\n"
            "  for (int r = 0; r < m; ++r) {\n"
            f"    for (int q = 0; q < {nrv}; ++q) {{\n"
            f"      float *at = tile + r * ld + {_voff(st, 'q', 'tplane')};\n"
            "      tw_vf v = tw_load(at), bv = {0}, rv = {0};\n"
            "      (void)bv; (void)rv;\n"
            + ("      bv = tw_load_aligned(bias + jr + q * TW_L);\n" if ep.bias else "")
            + (f"      const float *ra = res + r * ldres + {_voff(st, 'q', 'rplane')};\n"
               f"      if (cols == {nr}) rv = tw_load(ra);\n"
               "      else for (int e = 0; e < TW_L && q * TW_L + e < cols; ++e) rv[e] = ra[e];\n"
               if ep.residual else "")
            + f"{body}\n"
            "      tw_store(at, v);\n"
            "    }\n  }\n}")


def _block(st: Stage) -> str:
    i, p, mr, nr = st.index, st.problem, st.tile.mr, st.tile.nr
    plane = f"{st.plane}L" if st.blocked else f"{st.blk}L"
    return f"""static void tw_s{i}_block(const float *src, long m0, long mlen, long n0, long nlen, const float *bp_all,
                        const float *bias, const float *res, long ldres, float *out, long ldo) {{
  const float *rows[{mr}];
  float tile[{mr} * {nr}] __attribute__((aligned(64)));
  for (int b = 0; b < TW_S{i}_NKB; ++b) {{
    int last = b == TW_S{i}_NKB - 1;
    for (long jr = n0; jr < n0 + nlen; jr += {nr}) {{
      const float *bp = bp_all + (jr / {nr}) * {p.K}L * {nr} + tw_s{i}_koff[b] * {nr};
      int cols = {st.store_cols}L - jr < {nr} ? (int)({st.store_cols}L - jr) : {nr};
      for (long ir = m0; ir < m0 + mlen; ir += {mr}) {{
        int m = m0 + mlen - ir < {mr} ? (int)(m0 + mlen - ir) : {mr};
        float *c = out + (ir - m0) * ldo + {_col(st, "jr")};
        tw_s{i}_rows(ir, m, src, rows);
        const float *r_at = res ? res + (ir - m0) * ldres + {_col(st, "jr")} : 0;
        if (cols == {nr}) {{  /* a whole tile: stored in place, finished there while it is in L1 */
          tw_ukr{i}(m, tw_s{i}_nseg[b], tw_s{i}_seg[b], tw_s{i}_len[b], rows, bp, b ? c : 0, ldo, c, ldo, {plane});
          if (last && {int(bool(st.epilogue.steps))})
            tw_s{i}_epi(c, ldo, {plane}, m, jr, cols, bias, r_at, ldres, {plane});
          continue;
        }}
        if (b) {_copy_tile(st, True)}
        tw_ukr{i}(m, tw_s{i}_nseg[b], tw_s{i}_seg[b], tw_s{i}_len[b], rows, bp, b ? tile : 0, {nr}, tile, {nr},
                  {st.blk}L);
        if (last) tw_s{i}_epi(tile, {nr}, {st.blk}L, m, jr, cols, bias, r_at, ldres, {plane});
        {_copy_tile(st, False)}
      }}
    }}
  }}
}}"""


def _pad_input(p: ConvProblem) -> str:
    """The zero-padded copy of the input (NHWC, or NCHW{b}c block by block) that the tiles read
    (borders zeroed once, the interior copied on every call: its time is part of the kernel's)."""
    hp, wp = p.H + 2 * p.pad, p.W + 2 * p.pad
    bi = p.in_block or p.IC
    size = p.batch * hp * wp * p.IC
    return f"""static float *tw_xpad;
static const float *tw_pad_input(const float *x) {{
  if (!tw_xpad) {{
    tw_xpad = aligned_alloc(64, ({size}L * sizeof(float) + 63) / 64 * 64);
    if (!tw_xpad) return 0;
    memset(tw_xpad, 0, {size}L * sizeof(float));
  }}
  #pragma omp parallel for schedule(static)
  for (long ph = 0; ph < {p.batch * (p.IC // bi) * p.H}L; ++ph) {{
    long plane = ph / {p.H}L, h = ph % {p.H}L;
    memcpy(tw_xpad + ((plane * {hp}L + h + {p.pad}L) * {wp}L + {p.pad}L) * {bi}L, x + ph * {p.W * bi}L,
           {p.W * bi}L * sizeof(float));
  }}
  return tw_xpad;
}}"""


def _source_of(first: Stage) -> str:
    p = first.problem
    if isinstance(p, ConvProblem) and p.pad:
        return "  const float *src = tw_pad_input(x);\n  if (!src) return 1;\n"
    return "  const float *src = x;\n"


def _task_loop(st: Stage) -> str:
    """Row blocks x column blocks over the threads; blocked output keeps each row block in one image
    (its pixels' rows `out_block` floats apart)."""
    p, tile = st.problem, st.tile
    M, N, npad = p.M, p.N, st.n_padded
    cols = (f"    for (long bn = 0; bn < {math.ceil(npad / tile.nc)}L; ++bn) {{\n"
            f"      long n0 = bn * {tile.nc}L, nlen = {npad}L - n0 < {tile.nc}L ? {npad}L - n0 : {tile.nc}L;\n")
    if not st.blocked:
        return (f"  #pragma omp parallel for collapse(2) schedule(dynamic, 1)\n"
                f"  for (long bm = 0; bm < {math.ceil(M / tile.mc)}L; ++bm)\n{cols}"
                f"      long m0 = bm * {tile.mc}L, mlen = {M}L - m0 < {tile.mc}L ? {M}L - m0 : {tile.mc}L;\n"
                f"      tw_s0_block(src, m0, mlen, n0, nlen, bp, bias, res ? res + m0 * {N}L : 0, {N}L, "
                f"out + m0 * {N}L, {N}L);\n    }}")
    pix, per = p.OH * p.OW, math.ceil(p.OH * p.OW / tile.mc)
    return (f"  #pragma omp parallel for collapse(2) schedule(dynamic, 1)\n"
            f"  for (long bm = 0; bm < {p.batch * per}L; ++bm)\n{cols}"
            f"      long n = bm / {per}L, q0 = (bm % {per}L) * {tile.mc}L, m0 = n * {pix}L + q0;\n"
            f"      long mlen = {pix}L - q0 < {tile.mc}L ? {pix}L - q0 : {tile.mc}L;\n"
            f"      long at = n * {p.OC * pix}L + q0 * {p.out_block}L;\n"
            f"      tw_s0_block(src, m0, mlen, n0, nlen, bp, bias, res ? res + at : 0, {p.out_block}L, out + at, "
            f"{p.out_block}L);\n    }}")


def single_source(problem, epilogue: Epilogue, tile: CpuTile, call_slots: dict | None = None) -> str:
    """A GEMM or convolution kernel: tw_call(args) with args = x, packed weight, [padded bias],
    [residual], out; or, with `call_slots`, each of those read from the args position given
    (a model's step passes its values in its own order)."""
    lda = problem.K if isinstance(problem, GemmProblem) else 0
    st = Stage(0, problem, epilogue, tile, lda, problem.N)
    parts = [prelude(tile), microkernels(tile, "0", st.blk), _table(st), _rows(st), _epilogue(st), _block(st)]
    if isinstance(problem, ConvProblem) and problem.pad:
        parts.append(_pad_input(problem))
    parts.append(f"""int32_t tw_kernel(const float *x, const float *bp, const float *bias, const float *res,
                  float *out) {{
{_source_of(st)}{_task_loop(st)}
  return 0;
}}""")
    names = ["x", "bp"] + (["bias"] if epilogue.bias else []) + (["res"] if epilogue.residual else []) + ["out"]
    call = _call(names) if call_slots is None else _slotted_call(call_slots, SINGLE_SLOTS)
    parts += entry_points(call, call)
    return "\n\n".join(parts) + "\n"


def b2b_source(first, second: GemmProblem, epilogues: tuple[Epilogue, Epilogue], tile: CpuTile,
               tile1: CpuTile, call_slots: dict | None = None) -> str:
    """Two stages per row block: stage 0 (a GEMM or conv, `tile`) into the thread's intermediate T
    [mc x N0 padded], stage 1 (a GEMM over T's first N0 columns, its own register tile `tile1` of the
    same vector width) into out. `call_slots` as in single_source (x, bp0, bias0, bp1, bias1, res, out)."""
    lda0 = first.K if isinstance(first, GemmProblem) else 0
    s0 = Stage(0, first, epilogues[0], tile, lda0, 0)
    s0 = Stage(0, first, epilogues[0], tile, lda0, s0.n_padded)
    s1 = Stage(1, second, epilogues[1], tile1, s0.n_padded, second.N)
    M, n0p, N1, n1p = first.M, s0.n_padded, second.N, s1.n_padded
    if tile1.vec_bytes != tile.vec_bytes:
        raise ValueError("both stages of a b2b kernel use one vector width")
    parts = [prelude(tile), microkernels(tile, "0"), microkernels(tile1, "1")]
    for st in (s0, s1):
        parts += [_table(st), _rows(st), _epilogue(st), _block(st)]
    if isinstance(first, ConvProblem) and first.pad:
        parts.append(_pad_input(first))
    parts.append(f"""/* each thread's rows of the intermediate, allocated at its first call and kept (a fresh allocation
   per call would fault its pages in again every time) */
#define TW_MAX_THREADS 1024
static float *tw_rows_of[TW_MAX_THREADS];

int32_t tw_kernel(const float *x, const float *bp0, const float *bias0, const float *bp1,
                  const float *bias1, const float *res, float *out) {{
{_source_of(s0)}  int32_t failed = 0;
  #pragma omp parallel
  {{
#ifdef _OPENMP
    int me = omp_get_thread_num();
#else
    int me = 0;
#endif
    float *t = me < TW_MAX_THREADS ? tw_rows_of[me] : 0;
    if (!t && me < TW_MAX_THREADS) t = tw_rows_of[me] = aligned_alloc(64, {tile.mc * n0p}L * sizeof(float));
    if (!t) {{
      #pragma omp atomic write
      failed = 1;
    }}
    #pragma omp for schedule(dynamic, 1)
    for (long bm = 0; bm < {math.ceil(M / tile.mc)}L; ++bm) {{
      if (!t) continue;
      long m0 = bm * {tile.mc}L, mlen = {M}L - m0 < {tile.mc}L ? {M}L - m0 : {tile.mc}L;
      tw_s0_block(src, m0, mlen, 0, {n0p}L, bp0, bias0, 0, 0, t, {n0p}L);
      tw_s1_block(t, 0, mlen, 0, {n1p}L, bp1, bias1, res ? res + m0 * {N1}L : 0, {N1}L, out + m0 * {N1}L, {N1}L);
    }}
  }}
  return failed;
}}""")
    names = (["x", "bp0"] + (["bias0"] if epilogues[0].bias else []) + ["bp1"]
             + (["bias1"] if epilogues[1].bias else []) + (["res"] if epilogues[1].residual else []) + ["out"])
    call = _call(names, b2b=True) if call_slots is None else _slotted_call(call_slots, B2B_SLOTS)
    parts += entry_points(call, call)
    return "\n\n".join(parts) + "\n"


SINGLE_SLOTS = ("x", "bp", "bias", "res", "out")
B2B_SLOTS = ("x", "bp0", "bias0", "bp1", "bias1", "res", "out")


def _slotted_call(call_slots: dict, slots: tuple[str, ...]) -> str:
    return "tw_kernel(" + ", ".join("0" if call_slots.get(s) is None else f"(float *)tw_args[{call_slots[s]}]"
                                    for s in slots) + ")"


def _call(names: list[str], b2b: bool = False) -> str:
    slots = B2B_SLOTS if b2b else SINGLE_SLOTS
    args = [f"(float *)tw_args[{names.index(s)}]" if s in names else "0" for s in slots]
    return f"tw_kernel({', '.join(args)})"
