"""The native analog of the AIE dialect: a Vyasa program for x86's own 2-D datapath, AVX2 `vpmaddwd`
(8 lanes x 2 columns of int16 -> int32 per 256-bit register; a 16-lane output vector is two of
them). The triplets, lazy stores and column fusion are the AIE target's passes run with this
datapath's shape (`native_config`); what the shuffle network did, x86 does by choosing which
outputs a register holds: for a sliding pair of taps (lane i reads x[b + i], x[b + i + 1]) one
accumulator holds the even outputs, whose pairs a plain load of x[b..] already lines up, the other
the odd ones, from the load one element on; the two are interleaved once per store (unpack, then
`vperm2i128`), not once per MAC. A channel pair (x[b + 2i], x[b + 2i + 1]) is a plain load, a
weight pair one 32-bit broadcast, and each window is loaded once per iteration for every MAC
that reads it (the reuse graph's wide register is L1 here). The MACs are emitted grouped by the
window they read, so the live registers are the accumulators and one group's operands; the
accumulations are kept in that order (the compiler would reassociate integer sums into all
products first, each one live, spilled). The sums wrap in int32 exactly as
the te's int32 sum does (vpmaddwd's -32768 x -32768 x 2 case included).

The source exports the same entry points as every CPU kernel (`tw_call`, `tw_time`,
`tw_set_num_threads`), so the same C timing loop times it and tilewright's own kernels."""

from __future__ import annotations

import itertools

from ..errors import LoweringError
from ..lower.aie_program import AIEProgram, Mac, Store
from ..targets.aie import AIEConfig
from .c import entry_points


def native_config() -> AIEConfig:
    """x86 AVX2 as a 2-D datapath: two 8 x 2 vpmaddwd per 16-lane vector, unaligned loads (the
    alignment unit is one element), windows read from L1 (no register width bound), 6 accumulator
    pairs of the 16 ymm registers."""
    return AIEConfig(datapath16=(16, 2), align_bits=16, vector_registers=1024, max_register_bits=1 << 16,
                     accumulators=6, program_memory_bytes=1 << 30)


def _x_pattern(mac: Mac) -> tuple[str, int]:
    """("slide", b) for lanes (b + i, b + i + 1), ("pairs", b) for (b + 2i, b + 2i + 1)."""
    b = mac.x[0][0]
    if all(x == (b + i, b + i + 1) for i, x in enumerate(mac.x)):
        return "slide", b
    if all(x == (b + 2 * i, b + 2 * i + 1) for i, x in enumerate(mac.x)):
        return "pairs", b
    raise LoweringError(f"x86 vpmaddwd: lanes reading {mac.x[:3]}... are neither a sliding nor an adjacent pair")


def _register_order(body) -> list:
    """The MACs grouped by the window they read (ascending offset), each group's accumulators in
    turn, then the stores: a window and its weights live for one group only, so the register file
    holds the accumulators and a group's operands, whatever the unroll. The sums wrap in int32, so
    their order is free; a store follows all of its accumulator's MACs."""
    macs = [op for op in body if isinstance(op, Mac)]
    rank = {acc: i for i, acc in enumerate(dict.fromkeys(op.acc for op in macs))}
    macs.sort(key=lambda op: (_x_pattern(op)[1], rank[op.acc]))
    return macs + [op for op in body if isinstance(op, Store)]


def render_x86(program: AIEProgram, name: str = "tw_vyasa", parallel: bool = True, vnni: bool = False) -> str:
    """AVX2 C of `program`; `parallel` splits its outermost loop over the OpenMP threads (a call of a
    few microseconds can lose more to the fork and join than it gains); `vnni` fuses each
    vpmaddwd + vpaddd into one vpdpwssd (AVX512-VNNI with VL: the same sums, the same wrapping)."""
    if not program.runnable or program.bits != 16 or program.lanes != 16 or program.columns != 2:
        raise LoweringError("the x86 dialect renders 16-lane, 2-column int16 programs with lazy stores and fusion")
    lines = ["#include <immintrin.h>", "#include <stdint.h>", "#include <time.h>",
             "#ifdef _OPENMP", "#include <omp.h>", "#endif", "",
             f"/* {program.form.output.name}: {program.schedule} (x86 vpmaddwd) */",
             f"__attribute__((target(\"{'avx2,avx512vnni,avx512vl' if vnni else 'avx2'}\")))",
             f"static void {name}(int32_t *restrict omem, const int16_t *restrict xmem, "
             f"const int16_t *restrict zmem) {{"]
    params = {"x": "xmem", "z": "zmem"}
    lines[-1] = lines[-1].replace("const int16_t *restrict xmem, const int16_t *restrict zmem",
                                  f"const int16_t *restrict {params[program.roles[0]]}, "
                                  f"const int16_t *restrict {params[program.roles[1]]}")
    depth = 1
    for k, (axis, extent, step) in enumerate(program.loops):
        pad = "    " * depth
        if k == 0 and extent // step > 1 and parallel:
            lines.append(f"{pad}#pragma omp parallel for schedule(static)")
        lines.append(f"{pad}for (int {axis} = 0; {axis} < {extent}; {axis} += {step}) {{")
        depth += 1
    pad = "    " * depth
    steps = {axis: step for axis, _, step in program.loops}
    for role in ("x", "z", "o"):
        terms = [f"{e} * ({a} / {steps[a]})" for a, e in program.pointers[role].items() if e]
        kind = "int32_t" if role == "o" else "const int16_t"
        lines.append(f"{pad}{kind} *{role}p = {role}mem + ({' + '.join(terms) or '0'});")
    # opaque weight pointer: otherwise every weight's address is hoisted out of the loops and spilled
    lines.append(f"{pad}__asm__(\"\" : \"+r\"(zp));")
    order = {}
    loads: dict[int, str] = {}  # the reuse graph on x86: each window loaded once per iteration

    weights: dict[tuple, str] = {}
    names = itertools.count()

    def weight(z0: int, z1: int) -> str:
        """The broadcast weight pair, once per iteration: a 32-bit broadcast straight from memory."""
        if (z0, z1) not in weights:
            w = weights[(z0, z1)] = f"w{next(names)}"
            if z1 == z0 + 1:
                lines.append(f"{pad}__m256i {w} = _mm256_castps_si256(_mm256_broadcast_ss((const float *)"
                             f"(zp + {z0})));")
            else:
                lines.append(f"{pad}__m256i {w} = _mm256_set1_epi32((int32_t)((uint16_t)zp[{z0}] | "
                             f"((uint32_t)(uint16_t)zp[{z1}] << 16)));")
        return weights[(z0, z1)]

    def load(off: int) -> str:
        if off not in loads:
            loads[off] = f"u{next(names)}"
            lines.append(f"{pad}__m256i {loads[off]} = _mm256_loadu_si256((const __m256i *)(xp + {off}));")
        return loads[off]

    seen: set[str] = set()
    previous = None
    for op in _register_order(program.body):
        if isinstance(op, Mac):
            kind, b = _x_pattern(op)
            if order.setdefault(op.acc, kind) != kind:
                raise LoweringError(f"accumulator {op.acc} mixes sliding and paired lanes")
            if previous is not None and b != previous:  # a new window: the group's operands are dead
                loads.clear()
                weights.clear()
            previous = b
            wv = weight(*op.z)
            if kind == "pairs":  # lanes 0-7 from x[b..b+15], 8-15 from the next 16
                xl, xh, wl, wh = load(b), load(b + 16), wv, wv
            elif op.zero[1]:
                # a zero tap: even lanes read the pair (x[b + 2j], x[b + 2j + 1]) with weights (w, 0), odd
                # lanes the same pair with (0, w): nothing past the real taps is read
                xl, xh, wl, wh = load(b), load(b), wv, f"_mm256_slli_epi32({wv}, 16)"
            else:  # even output lanes read x[b + 2j], x[b + 2j + 1]; odd ones the window one element on
                xl, xh, wl, wh = load(b), load(b + 1), wv, wv
            lines.append(f"{pad}{{")
            lo, hi = f"{op.acc}_l", f"{op.acc}_h"
            opens = op.acc not in seen
            seen.add(op.acc)
            if vnni:
                a_l, a_h = ("_mm256_setzero_si256()",) * 2 if opens else (lo, hi)
                lines.append(f"{pad}  {lo} = _mm256_dpwssd_epi32({a_l}, {xl}, {wl}); "
                             f"{hi} = _mm256_dpwssd_epi32({a_h}, {xh}, {wh}); }}")
            elif opens:
                lines.append(f"{pad}  {lo} = _mm256_madd_epi16({xl}, {wl}); {hi} = _mm256_madd_epi16({xh}, {wh}); }}")
            else:
                lines.append(f"{pad}  {lo} = _mm256_add_epi32({lo}, _mm256_madd_epi16({xl}, {wl})); "
                             f"{hi} = _mm256_add_epi32({hi}, _mm256_madd_epi16({xh}, {wh}));")
                # opaque to the compiler: integer sums would otherwise be reassociated into all products
                # first (every one live at once, spilled), not one accumulation after another
                lines.append(f"{pad}  __asm__(\"\" : \"+x\"({lo}), \"+x\"({hi})); }}")
        elif isinstance(op, Store):
            lo, hi = f"{op.acc}_l", f"{op.acc}_h"
            if order.get(op.acc) == "slide":  # even outputs in lo, odd in hi: interleave once per store
                lines.append(f"{pad}{{ __m256i a = _mm256_unpacklo_epi32({lo}, {hi}), "
                             f"c = _mm256_unpackhi_epi32({lo}, {hi});")
                first, second = "_mm256_permute2x128_si256(a, c, 0x20)", "_mm256_permute2x128_si256(a, c, 0x31)"
            else:
                lines.append(f"{pad}{{")
                first, second = lo, hi
            lines.append(f"{pad}  _mm256_storeu_si256((__m256i *)(op + {op.offset}), {first});")
            lines.append(f"{pad}  _mm256_storeu_si256((__m256i *)(op + {op.offset + 8}), {second}); }}")
    accs = sorted(order)
    decl = f"{pad}__m256i " + ", ".join(f"{a}_l, {a}_h" for a in accs) + ";"
    first_body = next(i for i, line in enumerate(lines) if "*op = omem" in line)
    lines.insert(first_body + 1, decl)
    for _ in program.loops:
        depth -= 1
        lines.append("    " * depth + "}")
    lines.append("}")
    args = "(int32_t *)tw_args[2], (const int16_t *)tw_args[0], (const int16_t *)tw_args[1]"  # te order: a, b, out
    lines += ["", *entry_points(f"({name}({args}), 0)", f"{name}({args})")]
    return "\n".join(lines) + "\n"


__all__ = ["native_config", "render_x86"]
