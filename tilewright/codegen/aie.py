"""The aie dialect: an `AIEProgram` (lower/vyasa.py) as C with AI Engine vector intrinsics, in the
style of the AI Engine compiler's own kernels and Vyasa's outputs (`upd_w` loads into wide
registers, `lmac8` / `mac16` with shuffle-network selections, `srs` stores, pipelining pragmas).
The source includes "aie_emu.h"; runtime/aie_kernel.py compiles it against our emulation of those
intrinsics, so the same text runs bit-exact on the host."""

from __future__ import annotations

from ..errors import LoweringError
from ..lower.aie_program import AIEProgram, Load, Mac, Store

_XTYPE = {(32, 512): "v16int32", (32, 1024): "v32int32", (16, 512): "v32int16", (16, 1024): "v64int16"}
_ELEM = {32: "int32_t", 16: "int16_t"}


def _hex(v: int) -> str:
    return f"0x{v:x}"


def _mac(op: Mac, bits: int) -> str:
    x, z = op.xsel, op.zsel
    if bits == 32:
        args = f"{op.xreg}, {x.start}, {_hex(x.offsets)}, {op.zreg}, {z.start}, {_hex(z.offsets)}"
        return f"{op.acc} = lmul8({args});" if op.first else f"{op.acc} = lmac8({op.acc}, {args});"
    args = (f"{op.xreg}, {x.start}, {_hex(x.offsets)}, {_hex(x.offsets_hi)}, {_hex(x.square)}, {op.zreg}, "
            f"{z.start}, {_hex(z.offsets)}, {_hex(z.offsets_hi)}, {z.step}")
    return f"{op.acc} = mul16({args});" if op.first else f"{op.acc} = mac16({op.acc}, {args});"


def _pointer(role: str, inc: dict, steps: dict) -> str:
    """The iteration's pointer: `inc` elements per step of each loop."""
    terms = []
    for a, e in inc.items():
        if e:
            count = a if steps[a] == 1 else f"({a} / {steps[a]})"
            terms.append(f"{e} * {count}")
    return f"{role}p = {role}mem + ({' + '.join(terms) or '0'})"


def render_aie(program: AIEProgram, name: str = "kernel") -> str:
    """C source of `program`: `void name(out, first operand, second operand)` over the padded layouts."""
    if not program.runnable:
        raise LoweringError(f"the ablation program ({program.schedule}) is timed by the cycle model only; it has "
                            f"no code (its partial sums and unfused MACs are not rendered)")
    b = program.bits
    et = _ELEM[b]
    vt = f"v{program.lanes}int{b}"
    zt = f"v{256 // b}int{b}"
    acct = "v8acc80" if b == 32 else "v16acc48"
    params = {"x": f"const {et} *restrict xmem", "z": f"const {et} *restrict zmem"}
    lines = [
        '#include "aie_emu.h"',
        "",
        f"/* {program.form.output.name}: {program.schedule} */",
        f"void {name}({et} *restrict omem, {params[program.roles[0]]}, {params[program.roles[1]]}) {{",
        f"    set_rnd({'rnd_pos_inf' if program.form.round_half_up else 'rnd_floor'});",
    ]
    depth = 1
    for k, (axis, extent, step) in enumerate(program.loops):
        inner = k == len(program.loops) - 1
        pad = "    " * depth
        lines.append(f"{pad}for (int {axis} = 0; {axis} < {extent}; {axis} += {step})"
                     + (f" chess_prepare_for_pipelining chess_loop_range({extent // step},)" if inner else ""))
        lines.append(f"{pad}{{")
        depth += 1
    pad = "    " * depth
    steps = {axis: step for axis, _, step in program.loops}
    for role in ("x", "z", "o"):
        const = "const " if role != "o" else ""
        lines.append(f"{pad}{const}{et} *{_pointer(role, program.pointers[role], steps)};")
    declared = set()
    for op in program.body:
        if isinstance(op, Load):
            if op.tensor == "x":
                xt = _XTYPE[(b, program.registers[op.reg])]
                if op.reg not in declared:
                    declared.add(op.reg)
                    lines.append(f"{pad}{xt} {op.reg} = null_{xt}();")
                lines.append(f"{pad}{op.reg} = upd_w({op.reg}, {op.part}, load_{zt}(xp + {op.offset}));")
            else:
                lines.append(f"{pad}{zt} {op.reg} = load_{zt}(zp + {op.offset});")
        elif isinstance(op, Mac):
            decl = f"{acct} " if op.acc not in declared else ""
            declared.add(op.acc)
            lines.append(pad + decl + _mac(op, b))
        elif isinstance(op, Store):
            lines.append(f"{pad}store_{vt}(op + {op.offset}, srs({op.acc}, {program.form.shift}));")
    for _ in program.loops:
        depth -= 1
        lines.append("    " * depth + "}")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["render_aie"]
