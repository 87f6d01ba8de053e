"""An int8 2-D convolution (a dense layer is its 1 x 1 case) lowered to a VTA-like
instruction stream: tiles staged through the on-chip buffers by 2-D DMA with
padding on the fly, the tile's multiply-accumulate as GEMM micro-op loops, the
epilogue ((acc >> shift) + bias, clipped) on the ALU, then stores.

Layouts are VTA's blocked ones: data (N/b, C/bi, H, W, b, bi), weights
(O/bo, C/bi, KH, KW, bo, bi), bias (N/b, O/bo, 1, 1, b, bo) int32, output
(N/b, O/bo, OH, OW, b, bo) int8, where (b, bi, bo) is the GEMM block.

A `VTATiling` is one point of the space: output rows, columns and channel
blocks per tile, input channel blocks per load step, and virtual threads that
split the tile loop (along output channel blocks or rows). Each virtual thread
owns a slot of every buffer, and its statements are interleaved round-robin
with the others' at every step (as lower/vthreads.py pushes a virtual thread
into the innermost statements), so that one thread's loads can run while
another's GEMM does; `insert_tokens` then adds exactly the dependence tokens
the interleaved stream needs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..errors import ScheduleError, ShapeError
from ..ir.vta_insn import AluInsn, AluOp, GemmInsn, MemInsn, MemType, Opcode, Uop
from ..targets.vta import VTAConfig
from .vta_sync import Access, Step, insert_tokens

ITER_MAX = (1 << 14) - 1


@dataclass(frozen=True)
class ConvShape:
    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    name: str = ""

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.pad_h - self.kernel_h) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.pad_w - self.kernel_w) // self.stride_w + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_h * self.out_w * self.in_channels
                * self.kernel_h * self.kernel_w)

    def __str__(self) -> str:
        return (f"{self.name + ': ' if self.name else ''}{self.batch}x{self.in_channels}x{self.height}x{self.width}"
                f" -> {self.out_channels} k{self.kernel_h}x{self.kernel_w} s{self.stride_h} p{self.pad_h}")


@dataclass(frozen=True)
class Epilogue:
    """out = clip((acc >> shift) + bias, lo, hi) as int8: the output TVM's VTA benchmarks check."""

    shift: int = 8
    bias: bool = True
    lo: int = 0
    hi: int = 127
    round: bool = False  # add 2^(shift-1) before shifting (ops.shift_bias_clip's round_half_up)


TVM_EPILOGUE = Epilogue()


@dataclass(frozen=True)
class VTATiling:
    tile_h: int
    tile_w: int
    tile_co: int  # output channel blocks
    tile_ci: int  # input channel blocks per load step
    vthreads: int = 1
    vthread_axis: str = "co"  # "co" or "h": which tile loop the virtual threads split
    # the tile loops from outer to inner (after the batch): which tiles follow each other, so which
    # operand stays on chip from one tile to the next when all input channels fit one step
    order: str = "h co w"

    def __str__(self) -> str:
        vt = f" vthreads={self.vthreads}({self.vthread_axis})" if self.vthreads > 1 else ""
        order = f" order {self.order.replace(' ', '-')}" if self.order != "h co w" else ""
        return f"tile h{self.tile_h} w{self.tile_w} co{self.tile_co} ci{self.tile_ci}{vt}{order}"


@dataclass
class VTAProgram:
    cfg: VTAConfig
    shape: ConvShape
    tiling: VTATiling
    epilogue: Epilogue
    insns: list
    uops: list
    regions: dict  # name -> (byte offset, bytes) in device memory: uop, data, kernel, bias, out
    dram_bytes: int


@dataclass(frozen=True)
class _Blocked:
    nb: int
    cb: int
    ob: int


def _blocked(shape: ConvShape, cfg: VTAConfig) -> _Blocked:
    for what, n, block in (("batch", shape.batch, cfg.batch), ("in_channels", shape.in_channels, cfg.block_in),
                           ("out_channels", shape.out_channels, cfg.block_out)):
        if n % block:
            raise ShapeError(f"conv {shape}: {what}={n} is not a multiple of the GEMM core's block {block} "
                             f"(block {cfg.block}); pad it to {-(-n // block) * block}")
    for what, pad in (("pad_h", shape.pad_h), ("pad_w", shape.pad_w)):
        if pad > 15:
            raise ShapeError(f"conv {shape}: {what}={pad}; a VTA load pads at most 15 elements per side")
    return _Blocked(shape.batch // cfg.batch, shape.in_channels // cfg.block_in, shape.out_channels // cfg.block_out)


def blocked_shapes(shape: ConvShape, cfg: VTAConfig) -> dict[str, tuple[int, ...]]:
    """The blocked array shapes of the operands: data, kernel, bias, out."""
    b = _blocked(shape, cfg)
    return {"data": (b.nb, b.cb, shape.height, shape.width, cfg.batch, cfg.block_in),
            "kernel": (b.ob, b.cb, shape.kernel_h, shape.kernel_w, cfg.block_out, cfg.block_in),
            "bias": (b.nb, b.ob, 1, 1, cfg.batch, cfg.block_out),
            "out": (b.nb, b.ob, shape.out_h, shape.out_w, cfg.batch, cfg.block_out)}


def _check_tiling(shape: ConvShape, b: _Blocked, t: VTATiling) -> None:
    for what, n, tile in (("tile_h", shape.out_h, t.tile_h), ("tile_w", shape.out_w, t.tile_w),
                          ("tile_co", b.ob, t.tile_co), ("tile_ci", b.cb, t.tile_ci)):
        if tile < 1 or n % tile:
            raise ScheduleError(f"VTA conv {shape}: {what}={tile} must divide {n}")
    if t.vthread_axis not in ("co", "h"):
        raise ScheduleError(f"VTA tiling: vthread_axis must be 'co' or 'h', got {t.vthread_axis!r}")
    if sorted(t.order.split()) != ["co", "h", "w"]:
        raise ScheduleError(f"VTA tiling: order must name the tile loops h, co, w once each, got {t.order!r}")
    tiles = b.ob // t.tile_co if t.vthread_axis == "co" else shape.out_h // t.tile_h
    if t.vthreads < 1 or tiles % t.vthreads:
        raise ScheduleError(f"VTA conv {shape}: {t.vthreads} virtual threads must divide the {tiles} tiles along "
                            f"'{t.vthread_axis}'")


def _capacity(name: str, elems: int, elem_bytes: int, depth: int, t: VTATiling) -> None:
    if elems > depth:
        raise ScheduleError(f"VTA buffer 'vta.{name}' overflows: {t} needs {elems} elements = {elems * elem_bytes} "
                            f"bytes, the buffer holds {depth * elem_bytes} bytes "
                            f"({(elems - depth) * elem_bytes} bytes over); use smaller tiles or fewer vthreads")


def compress_uops(loops, widths) -> tuple[list[Uop], dict]:
    """Two of `loops` (name, extent, (dst, src, wgt) coefficients) become the instruction's
    iter_out / iter_in (the longest two whose factors fit their fields), the rest micro-ops."""
    fits = lambda lp: lp[1] <= ITER_MAX and all(c < (1 << w) for c, w in zip(lp[2], widths))  # noqa: E731
    real = [lp for lp in loops if lp[1] > 1]
    chosen = sorted((lp for lp in real if fits(lp)), key=lambda lp: -lp[1])[:2]
    chosen += [("unit", 1, (0, 0, 0))] * (2 - len(chosen))
    rest = [lp for lp in real if lp not in chosen]
    uops = []
    for idx in itertools.product(*(range(lp[1]) for lp in rest)):
        d = [sum(i * lp[2][k] for i, lp in zip(idx, rest)) for k in range(3)]
        uops.append(Uop(*d))
    (_, n_out, f_out), (_, n_in, f_in) = chosen
    loop = dict(iter_out=n_out, iter_in=n_in, dst_out=f_out[0], dst_in=f_in[0], src_out=f_out[1], src_in=f_in[1],
                wgt_out=f_out[2], wgt_in=f_in[2])
    return uops, loop


class _Builder:
    def __init__(self, shape: ConvShape, cfg: VTAConfig, t: VTATiling, ep: Epilogue):
        self.shape, self.cfg, self.t, self.ep = shape, cfg, t, ep
        self.b = _blocked(shape, cfg)
        _check_tiling(shape, self.b, t)
        s = shape
        # a 1-row kernel with a row stride reads every stride-th row only: the DMA skips the others
        self.row_step = s.stride_h if (s.kernel_h == 1 and s.pad_h == 0) else 1
        self.in_h = (t.tile_h - 1) * s.stride_h // self.row_step + s.kernel_h
        self.in_w = (t.tile_w - 1) * s.stride_w + s.kernel_w
        self.inp_slot = t.tile_ci * self.in_h * self.in_w
        self.wgt_slot = t.tile_co * t.tile_ci * s.kernel_h * s.kernel_w
        self.out_slot = t.tile_co * t.tile_h * t.tile_w
        self.acc_slot = self.out_slot + (t.tile_co if ep.bias else 0)
        v = t.vthreads
        _capacity("inp", v * self.inp_slot, cfg.inp_elem_bytes, cfg.inp_depth, t)
        _capacity("wgt", v * self.wgt_slot, cfg.wgt_elem_bytes, cfg.wgt_depth, t)
        _capacity("acc", v * self.acc_slot, cfg.acc_elem_bytes, cfg.acc_depth, t)
        self.uops: list[Uop] = []
        self.steps: list[Step] = []
        self.held: dict = {}  # (operand, thread) -> what its slot holds

    def add_uops(self, uops: list[Uop]) -> tuple[int, int]:
        start = len(self.uops)
        self.uops += uops
        return start, len(self.uops)

    def micro_programs(self, v: int) -> dict:
        """Micro-op ranges and loop fields of virtual thread `v`'s GEMM, reset and ALU ops."""
        s, t, cfg = self.shape, self.t, self.cfg
        acc0, inp0, wgt0 = v * self.acc_slot, v * self.inp_slot, v * self.wgt_slot
        kk = s.kernel_h * s.kernel_w
        loops = [("co", t.tile_co, (t.tile_h * t.tile_w, 0, t.tile_ci * kk)),
                 ("ci", t.tile_ci, (0, self.in_h * self.in_w, kk)),
                 ("kh", s.kernel_h, (0, self.in_w, s.kernel_w)), ("kw", s.kernel_w, (0, 1, 1)),
                 ("oh", t.tile_h, (t.tile_w, s.stride_h // self.row_step * self.in_w, 0)),
                 ("ow", t.tile_w, (1, s.stride_w, 0))]
        uops, loop = compress_uops(loops, (cfg.log_acc_depth, cfg.log_inp_depth, cfg.log_wgt_depth))
        gemm = (self.add_uops([Uop(u.dst + acc0, u.src + inp0, u.wgt + wgt0) for u in uops]), loop)
        whole = dict(iter_out=t.tile_co * t.tile_h, iter_in=t.tile_w, dst_out=t.tile_w, dst_in=1)
        flat = (self.add_uops([Uop(acc0)]), whole)
        bias = None
        if self.ep.bias:
            per_co = [Uop(acc0 + c * t.tile_h * t.tile_w, acc0 + self.out_slot + c) for c in range(t.tile_co)]
            bias = (self.add_uops(per_co), dict(iter_out=t.tile_h, iter_in=t.tile_w, dst_out=t.tile_w, dst_in=1))
        return {"gemm": gemm, "flat": flat, "bias": bias}

    def emit(self, insn, reads=(), writes=()) -> None:
        self.steps.append(Step(insn, tuple(reads), tuple(writes)))

    def tiles(self):
        """Groups of `vthreads` tiles (nb, h tile, co tile, w tile) in the tiling's loop order (TVM's
        VTA schedule: h, co, w); the threads split the co or h loop."""
        s, t, b = self.shape, self.t, self.b
        v = t.vthreads
        extent = {"h": s.out_h // t.tile_h, "co": b.ob // t.tile_co, "w": s.out_w // t.tile_w}
        extent[t.vthread_axis] //= v
        names = t.order.split()
        for n in range(b.nb):
            for idx in itertools.product(*(range(extent[a]) for a in names)):
                at = dict(zip(names, idx))
                group = []
                for k in range(v):
                    tile = dict(at, **{t.vthread_axis: at[t.vthread_axis] * v + k})
                    group.append((n, tile["h"], tile["co"], tile["w"]))
                yield group

    def unchanged(self, kind: str, v: int, key) -> bool:
        """Whether thread `v`'s `kind` slot already holds `key` (loaded by the previous tile group and
        not overwritten since); records it otherwise."""
        if self.held.get((kind, v)) == key:
            return True
        self.held[(kind, v)] = key
        return False

    def load_input(self, v: int, tile, cstep: int, base: int) -> None:
        s, t, b = self.shape, self.t, self.b
        n, h, _, w = tile
        if self.unchanged("inp", v, (n, h, w, cstep)):
            return
        r0, c0 = h * t.tile_h * s.stride_h - s.pad_h, w * t.tile_w * s.stride_w - s.pad_w
        # a window can lie wholly in the padding (pad wider than the kernel): then the load only fills zeros
        ypad0, xpad0 = min(max(0, -r0), self.in_h), min(max(0, -c0), self.in_w)
        last = r0 + (self.in_h - 1) * self.row_step
        ypad1 = min(max(0, -(-(last - s.height + 1) // self.row_step)), self.in_h - ypad0)
        xpad1 = min(max(0, c0 + self.in_w - s.width), self.in_w - xpad0)
        for ci in range(t.tile_ci):
            cb = cstep * t.tile_ci + ci
            sram = v * self.inp_slot + ci * self.in_h * self.in_w
            empty = ypad0 + ypad1 == self.in_h or xpad0 + xpad1 == self.in_w
            row, col = (0, 0) if empty else (r0 + ypad0, c0 + xpad0)
            dram = base + ((n * b.cb + cb) * s.height + row) * s.width + col
            self.emit(MemInsn(Opcode.LOAD, MemType.INP, sram, dram, self.in_h - ypad0 - ypad1,
                              self.in_w - xpad0 - xpad1, s.width * self.row_step, ypad0, ypad1, xpad0, xpad1),
                      writes=[Access("inp", sram, sram + self.in_h * self.in_w)])

    def load_weights(self, v: int, tile, cstep: int, base: int) -> None:
        s, t, b = self.shape, self.t, self.b
        kk = s.kernel_h * s.kernel_w
        co0, ci0 = tile[2] * t.tile_co, cstep * t.tile_ci
        if self.unchanged("wgt", v, (tile[2], cstep)):
            return
        sram = v * self.wgt_slot
        self.emit(MemInsn(Opcode.LOAD, MemType.WGT, sram, base + (co0 * b.cb + ci0) * kk, t.tile_co,
                          t.tile_ci * kk, b.cb * kk),
                  writes=[Access("wgt", sram, sram + self.wgt_slot)])

    def store(self, v: int, tile, base: int) -> None:
        s, t, b = self.shape, self.t, self.b
        n, h, c, w = tile
        acc0, area = v * self.acc_slot, s.out_h * s.out_w
        first = base + ((n * b.ob + c * t.tile_co) * s.out_h + h * t.tile_h) * s.out_w + w * t.tile_w
        reads = [Access("acc", acc0, acc0 + self.out_slot)]
        if t.tile_w == s.out_w:  # whole rows: each channel block's tile is one contiguous run
            self.emit(MemInsn(Opcode.STORE, MemType.ACC, acc0, first, t.tile_co, t.tile_h * t.tile_w, area), reads)
            return
        for co in range(t.tile_co):
            self.emit(MemInsn(Opcode.STORE, MemType.ACC, acc0 + co * t.tile_h * t.tile_w, first + co * area,
                              t.tile_h, t.tile_w, s.out_w), reads)

    def epilogue(self, v: int, tile, progs, bias_base: int) -> None:
        t, ep = self.t, self.ep
        acc0 = v * self.acc_slot
        out = Access("acc", acc0, acc0 + self.out_slot)
        (fb, fe), flat = progs["flat"]
        alu = lambda op, imm: AluInsn(op, fb, fe, use_imm=True, imm=imm, **flat)  # noqa: E731
        if ep.round and ep.shift:
            self.emit(alu(AluOp.ADD, 1 << (ep.shift - 1)), [out], [out])
        self.emit(alu(AluOp.SHR, ep.shift), [out], [out])
        if ep.bias:
            bias = Access("acc", acc0 + self.out_slot, acc0 + self.acc_slot)
            n, _, c, _ = tile
            self.emit(MemInsn(Opcode.LOAD, MemType.ACC, bias.lo, bias_base + n * self.b.ob + c * t.tile_co, 1,
                              t.tile_co, t.tile_co), writes=[bias])
            (bb, be), loop = progs["bias"]
            self.emit(AluInsn(AluOp.ADD, bb, be, **loop), [out, bias], [out])
        self.emit(alu(AluOp.MAX, ep.lo), [out], [out])
        self.emit(alu(AluOp.MIN, ep.hi), [out], [out])


def _regions(cfg: VTAConfig, shape: ConvShape, n_uops: int) -> tuple[dict, int]:
    align = cfg.dram_align
    sizes = {"uop": 4 * n_uops,
             "data": shape.batch * shape.in_channels * shape.height * shape.width,
             "kernel": shape.out_channels * shape.in_channels * shape.kernel_h * shape.kernel_w,
             "bias": shape.batch * shape.out_channels * 4,
             "out": shape.batch * shape.out_channels * shape.out_h * shape.out_w}
    regions, at = {}, 0
    for name, n in sizes.items():
        regions[name] = (at, n)
        at += -(-n // align) * align
    return regions, at


def _prepared(shape: ConvShape, cfg: VTAConfig, tiling: VTATiling, epilogue: Epilogue):
    bld = _Builder(shape, cfg, tiling, epilogue)
    progs = [bld.micro_programs(v) for v in range(tiling.vthreads)]
    if len(bld.uops) > cfg.uop_depth:
        raise ScheduleError(f"VTA buffer 'vta.uop' overflows: {tiling} needs {len(bld.uops)} micro-ops "
                            f"({4 * len(bld.uops)} bytes), the buffer holds {cfg.uop_buffer_bytes} bytes")
    widest = max((u.src for u in bld.uops), default=0)
    if widest >= 1 << cfg.log_acc_depth:
        raise ScheduleError(f"VTA micro-op field 'src' overflows: {tiling} reads input element {widest}, a micro-op's "
                            f"{cfg.log_acc_depth}-bit source index reaches {(1 << cfg.log_acc_depth) - 1}; use "
                            f"smaller input tiles or fewer vthreads")
    return bld, progs


def check_fits(shape: ConvShape, cfg: VTAConfig, tiling: VTATiling, epilogue: Epilogue = TVM_EPILOGUE) -> None:
    """Raise ScheduleError (naming the buffer and the bytes over) unless `tiling` is legal."""
    _prepared(shape, cfg, tiling, epilogue)


def lower_conv2d(shape: ConvShape, cfg: VTAConfig, tiling: VTATiling, epilogue: Epilogue = TVM_EPILOGUE) -> VTAProgram:
    """The instruction stream of one convolution, dependence tokens included."""
    bld, progs = _prepared(shape, cfg, tiling, epilogue)
    regions, total = _regions(cfg, shape, len(bld.uops))
    base = {"data": regions["data"][0] // cfg.inp_elem_bytes, "kernel": regions["kernel"][0] // cfg.wgt_elem_bytes,
            "bias": regions["bias"][0] // cfg.acc_elem_bytes, "out": regions["out"][0] // cfg.out_elem_bytes}
    bld.emit(MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, len(bld.uops), len(bld.uops)),
             writes=[Access("uop", 0, len(bld.uops))])
    n_steps = bld.b.cb // tiling.tile_ci
    for group in bld.tiles():
        for v, _ in enumerate(group):
            acc = Access("acc", v * bld.acc_slot, v * bld.acc_slot + bld.out_slot)
            (fb, fe), flat = progs[v]["flat"]
            bld.emit(GemmInsn(fb, fe, reset=True, **flat), writes=[acc])
        for cstep in range(n_steps):
            for v, tile in enumerate(group):
                bld.load_input(v, tile, cstep, base["data"])
                bld.load_weights(v, tile, cstep, base["kernel"])
            for v, _ in enumerate(group):
                (gb, ge), loop = progs[v]["gemm"]
                acc = Access("acc", v * bld.acc_slot, v * bld.acc_slot + bld.out_slot)
                bld.emit(GemmInsn(gb, ge, **loop),
                         reads=[Access("inp", v * bld.inp_slot, (v + 1) * bld.inp_slot),
                                Access("wgt", v * bld.wgt_slot, (v + 1) * bld.wgt_slot),
                                Access("uop", gb, ge), acc],
                         writes=[acc])
        for v, tile in enumerate(group):
            bld.epilogue(v, tile, progs[v], base["bias"])
        for v, tile in enumerate(group):
            bld.store(v, tile, base["out"])
    depths = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "acc": cfg.acc_depth, "uop": cfg.uop_depth}
    insns = insert_tokens(bld.steps, depths)
    return VTAProgram(cfg, shape, tiling, epilogue, insns, bld.uops, regions, total)


__all__ = ["TVM_EPILOGUE", "ConvShape", "Epilogue", "VTAProgram", "VTATiling", "blocked_shapes", "check_fits",
           "compress_uops", "lower_conv2d"]
