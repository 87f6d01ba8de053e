"""The VTA-like instruction set: instructions and micro-ops as data, their binary
encoding, and a disassembler (what `kernel.source` shows).

Layout (apache/tvm-vta include/vta/hw_spec.h): an instruction is 128 bits, two
little-endian 64-bit words filled with bit fields from the least significant bit
up, in the order listed below; a field that would cross into the second word
starts there (as a C compiler lays out `uint64_t` bit fields). Field widths
follow the configuration (buffer depths set the index widths). Every
instruction starts with opcode (3 bits) and four dependence flags: pop_prev,
pop_next, push_prev, push_next. A module's "prev" is the one before it in the
load -> compute -> store pipeline, "next" the one after.

- LOAD / STORE: memory_type (2: UOP 0, WGT 1, INP 2, ACC 3), sram_base (16),
  dram_base (32) | y_size (16), x_size (16), x_stride (16), y_pad_0, y_pad_1,
  x_pad_0, x_pad_1 (4 each). Addresses count elements of the buffer's type; a
  load writes (y_pad_0 + y_size + y_pad_1) rows of (x_pad_0 + x_size + x_pad_1)
  elements densely from sram_base, padding with zeros. STORE always moves the
  accumulator's int8 view (each lane truncated to its low 8 bits) to DRAM; its
  memory_type field is not read.
- GEMM: reset (1), uop_bgn (log uop depth), uop_end (+1 bit), iter_out,
  iter_in (14 each) | dst_factor_out, dst_factor_in (log acc depth),
  src_factor_out, src_factor_in (log inp depth), wgt_factor_out, wgt_factor_in
  (log wgt depth).
- ALU: as GEMM up to iter_in | dst and src factors (log acc depth each),
  alu_opcode (2: MIN 0, MAX 1, ADD 2, SHR 3), use_imm (1), imm (16, signed).
- FINISH: the flags only.
- A micro-op is 32 bits: dst (log acc depth), src (log acc depth), wgt (log wgt depth).

GEMM and ALU run `for o < iter_out: for i < iter_in: for u in uops[bgn:end]`
with dst = u.dst + o*dst_factor_out + i*dst_factor_in (and likewise src and
wgt); GEMM accumulates acc[dst] += inp[src] . wgt[wgt]^T (or sets acc[dst] = 0
with reset); ALU sets acc[dst] = op(acc[dst], imm or acc[src])."""

from __future__ import annotations

import struct

from ..errors import LoweringError
from ..ir.vta_insn import (
    AluInsn,
    AluOp,
    Deps,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    MemType,
    Module,
    Opcode,
    Uop,
    module_of,
)
from ..targets.vta import VTAConfig

LOOP_ITER_BITS = 14
IMM_BITS = 16


def _layouts(cfg: VTAConfig) -> dict[Opcode, list[tuple[str, int]]]:
    head = [("opcode", 3), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1), ("push_next", 1)]
    loop = [("reset", 1), ("uop_bgn", cfg.log_uop_depth), ("uop_end", cfg.log_uop_depth + 1),
            ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS)]
    acc, inp, wgt = cfg.log_acc_depth, cfg.log_inp_depth, cfg.log_wgt_depth
    mem = head + [("mem", 2), ("sram_base", 16), ("dram_base", 32), ("y_size", 16), ("x_size", 16),
                  ("x_stride", 16), ("y_pad0", 4), ("y_pad1", 4), ("x_pad0", 4), ("x_pad1", 4)]
    gemm = head + loop + [("dst_out", acc), ("dst_in", acc), ("src_out", inp), ("src_in", inp),
                          ("wgt_out", wgt), ("wgt_in", wgt)]
    alu = head + loop + [("dst_out", acc), ("dst_in", acc), ("src_out", acc), ("src_in", acc),
                         ("op", 2), ("use_imm", 1), ("imm", IMM_BITS)]
    return {Opcode.LOAD: mem, Opcode.STORE: mem, Opcode.GEMM: gemm, Opcode.ALU: alu, Opcode.FINISH: head}


def _positions(layout: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(field, bit offset in the 128 bits, width), C bit-field placement in two 64-bit words."""
    out, word, bit = [], 0, 0
    for name, width in layout:
        if bit + width > 64:
            word, bit = word + 1, 0
        if word > 1:
            raise LoweringError(f"VTA instruction layout overflows 128 bits at field '{name}'")
        out.append((name, 64 * word + bit, width))
        bit += width
    return out


def field_positions(cfg: VTAConfig) -> dict[Opcode, list[tuple[str, int, int]]]:
    """Per opcode, (field, bit offset in the 128 bits, width): the one definition of the layout
    (the simulator's decoder is handed this table)."""
    return {op: _positions(lay) for op, lay in _layouts(cfg).items()}


def uop_field_widths(cfg: VTAConfig) -> list[tuple[str, int]]:
    """(field, width) of a micro-op's 32 bits, from bit 0 up."""
    return _uop_fields(cfg)


def encode(insns, cfg: VTAConfig) -> bytes:
    """Instructions -> 16 bytes each; a value that does not fit its field is an error naming it."""
    layouts = {op: _positions(lay) for op, lay in _layouts(cfg).items()}
    out = bytearray()
    for n, insn in enumerate(insns):
        vals = {**vars(insn), **vars(insn.deps)}
        bits = 0
        for name, off, width in layouts[insn.opcode]:
            v = int(vals[name])
            if name == "imm":
                if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
                    raise LoweringError(f"VTA instruction {n} ({insn.opcode.name}): immediate {v} does not fit "
                                        f"a signed {width}-bit field")
                v &= (1 << width) - 1
            elif not 0 <= v < (1 << width):
                raise LoweringError(f"VTA instruction {n} ({insn.opcode.name}): {name}={v} does not fit its "
                                    f"{width}-bit field (0..{(1 << width) - 1})")
            bits |= v << off
        out += bits.to_bytes(16, "little")
    return bytes(out)


def decode(data: bytes, cfg: VTAConfig) -> list[Insn]:
    layouts = {op: _positions(lay) for op, lay in _layouts(cfg).items()}
    insns: list[Insn] = []
    for n in range(0, len(data), 16):
        bits = int.from_bytes(data[n:n + 16], "little")
        op = Opcode(bits & 7)
        vals = {}
        for name, off, width in layouts[op]:
            v = (bits >> off) & ((1 << width) - 1)
            if name == "imm" and v >> (width - 1):
                v -= 1 << width
            vals[name] = v
        deps = Deps(*(bool(vals.pop(k)) for k in ("pop_prev", "pop_next", "push_prev", "push_next")))
        vals.pop("opcode")
        if op in (Opcode.LOAD, Opcode.STORE):
            insns.append(MemInsn(opcode=op, deps=deps, **{**vals, "mem": MemType(vals["mem"])}))
        elif op is Opcode.GEMM:
            insns.append(GemmInsn(deps=deps, **{**vals, "reset": bool(vals["reset"])}))
        elif op is Opcode.ALU:
            insns.append(AluInsn(deps=deps, **{**vals, "op": AluOp(vals["op"]), "reset": bool(vals["reset"]),
                                               "use_imm": bool(vals["use_imm"])}))
        else:
            insns.append(FinishInsn(deps=deps))
    return insns


def _uop_fields(cfg: VTAConfig) -> list[tuple[str, int]]:
    return [("dst", cfg.log_acc_depth), ("src", cfg.log_acc_depth), ("wgt", cfg.log_wgt_depth)]


def encode_uops(uops, cfg: VTAConfig) -> bytes:
    out = bytearray()
    for n, u in enumerate(uops):
        bits, off = 0, 0
        for name, width in _uop_fields(cfg):
            v = getattr(u, name)
            if not 0 <= v < (1 << width):
                raise LoweringError(f"VTA micro-op {n}: {name}={v} does not fit its {width}-bit field")
            bits |= v << off
            off += width
        out += struct.pack("<I", bits)
    return bytes(out)


def decode_uops(data: bytes, cfg: VTAConfig) -> list[Uop]:
    uops = []
    for (bits,) in struct.iter_unpack("<I", data):
        vals, off = {}, 0
        for name, width in _uop_fields(cfg):
            vals[name] = (bits >> off) & ((1 << width) - 1)
            off += width
        uops.append(Uop(**vals))
    return uops


def _loop_text(i) -> str:
    return (f"uop[{i.uop_bgn}:{i.uop_end}] x {i.iter_out}x{i.iter_in} "
            f"dst+={i.dst_out}o+{i.dst_in}i src+={i.src_out}o+{i.src_in}i")


def disassemble_one(insn: Insn) -> str:
    if isinstance(insn, MemInsn):
        pads = (f" pad y({insn.y_pad0},{insn.y_pad1}) x({insn.x_pad0},{insn.x_pad1})"
                if any((insn.y_pad0, insn.y_pad1, insn.x_pad0, insn.x_pad1)) else "")
        body = (f"{insn.opcode.name:<6}{'OUT' if insn.opcode is Opcode.STORE else insn.mem.name:<4} "
                f"sram={insn.sram_base} dram={insn.dram_base} {insn.y_size}x{insn.x_size} "
                f"stride={insn.x_stride}{pads}")
    elif isinstance(insn, GemmInsn):
        body = f"GEMM  {'reset ' if insn.reset else ''}{_loop_text(insn)} wgt+={insn.wgt_out}o+{insn.wgt_in}i"
    elif isinstance(insn, AluInsn):
        operand = f"imm={insn.imm}" if insn.use_imm else "src"
        body = f"ALU   {insn.op.name} {operand} {_loop_text(insn)}"
    else:
        body = "FINISH"
    deps = insn.deps.text()
    return f"{body}  [{deps}]" if deps else body


def disassemble(insns, uops=(), cfg: VTAConfig | None = None) -> str:
    lines = [f"; {cfg.describe()}"] if cfg is not None else []
    lines += [f"{n:5d}  {module_of(i).name.lower():<7} {disassemble_one(i)}" for n, i in enumerate(insns)]
    if uops:
        lines.append(f"; {len(uops)} micro-ops (dst, src, wgt)")
        lines += [f"  u{n:<5d} {u.dst:5d} {u.src:5d} {u.wgt:5d}" for n, u in enumerate(uops)]
    return "\n".join(lines)



__all__ = ["AluInsn", "AluOp", "Deps", "FinishInsn", "GemmInsn", "Insn", "MemInsn", "MemType", "Module", "Opcode",
           "Uop", "decode", "decode_uops", "disassemble", "encode", "encode_uops", "field_positions", "module_of",
           "uop_field_widths"]
