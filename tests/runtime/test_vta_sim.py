"""The VTA simulator (tilewright/runtime/vta_sim.py) against NumPy: loads with padding and strides,
stores, GEMM loop nests, ALU ops, the checked timing model and its dependence checks (deadlock,
races found by vector clocks, unmatched pushes), bounds and program errors."""

from __future__ import annotations

import numpy as np
import pytest

from tilewright.codegen.vta_isa import (
    AluInsn,
    AluOp,
    Deps,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    encode,
    encode_uops,
)
from tilewright.errors import MeasureError
from tilewright.runtime.vta_sim import VTASimError, VTAStats, simulate
from tilewright.targets.vta import VTAConfig

CFG = VTAConfig()
CFG8 = VTAConfig(batch=8, block_in=8, block_out=8)
OUT = 1 << 19  # byte address of the readback area
NO_DEPS = Deps()


class Dram:
    """A DRAM image: `put` places data aligned for its element size and returns its element address."""

    def __init__(self, nbytes: int = 1 << 20):
        self.a = np.zeros(nbytes, np.uint8)
        self.top = 1024

    def put(self, data, elem_bytes: int) -> int:
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes) else data.view(np.uint8).ravel()
        base = -(-self.top // elem_bytes) * elem_bytes
        self.a[base:base + raw.size] = raw
        self.top = base + raw.size
        return base // elem_bytes


def load(mem, sram, dram, y, x, stride=None, deps=NO_DEPS, **pads):
    return MemInsn(Opcode.LOAD, mem, sram, dram, y, x, x if stride is None else stride, deps=deps, **pads)


def store(sram, dram, y, x, stride=None, deps=NO_DEPS):
    return MemInsn(Opcode.STORE, MemType.ACC, sram, dram, y, x, x if stride is None else stride, deps=deps)


def run(prog, dram, cfg=CFG, checked=True) -> VTAStats:
    return simulate(encode(prog, cfg), dram.a if isinstance(dram, Dram) else dram, cfg, checked=checked)


def readback(n, cfg):
    """Compute -> store epilogue writing ACC[0:n] as four int8 slices (v >> 0, 8, 16, 24) at OUT; uop 0
    must be (0, 0, 0). Every token it pushes is popped, the last by FINISH."""
    base = OUT // cfg.out_elem_bytes
    prog = [AluInsn(AluOp.ADD, 0, 1, iter_in=n, dst_in=1, src_in=1, use_imm=True, imm=0, deps=Deps(push_next=True))]
    for k in range(4):
        if k:
            prog.append(AluInsn(AluOp.SHR, 0, 1, iter_in=n, dst_in=1, src_in=1, use_imm=True, imm=8,
                                deps=Deps(pop_next=True, push_next=True)))
        prog.append(store(0, base + k * n, 1, n, deps=Deps(pop_prev=True, push_prev=True)))
    return prog + [FinishInsn(Deps(pop_next=True))]


def read_acc(dram, n, cfg):
    b = dram.a[OUT:OUT + 4 * n * cfg.out_elem_bytes].reshape(4, n, cfg.batch, cfg.block_out).astype(np.uint32)
    return (b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24).view(np.int32)


def acc_program(dram, values, cfg, ops=(), uops=()):
    """Load `values` (n, batch, block_out int32) into ACC[0:n], run `ops`, read ACC[0:n] back; micro-op 0
    is (0, 0, 0), `uops` follow it."""
    n, uops = len(values), [Uop(0, 0, 0), *uops]
    ub = dram.put(encode_uops(uops, cfg), 4)
    acc = dram.put(values.astype(np.int32), cfg.acc_elem_bytes)
    return [load(MemType.UOP, 0, ub, 1, len(uops)), load(MemType.ACC, 0, acc, 1, n), *ops, *readback(n, cfg)]


def test_padded_strided_load_and_store_round_trip(rng):
    y, x, stride, pads = 3, 5, 7, dict(y_pad0=1, y_pad1=2, x_pad0=2, x_pad1=1)
    lanes = CFG.batch * CFG.block_out
    src = rng.integers(-1000, 1000, (y, stride, lanes)).astype(np.int32)
    rows, cols = y + 3, x + 3
    want = np.zeros((rows, cols, lanes), np.int32)
    want[1:1 + y, 2:2 + x] = src[:, :x]
    for checked in (True, False):
        dram = Dram()
        base = dram.put(src, CFG.acc_elem_bytes)
        out = OUT // CFG.out_elem_bytes
        prog = [load(MemType.ACC, 4, base, y, x, stride, deps=Deps(push_next=True), **pads),
                store(4, out, rows, cols, stride=cols + 2, deps=Deps(pop_prev=True, push_prev=True)),
                FinishInsn(Deps(pop_next=True))]
        stats = run(prog, dram, checked=checked)
        got = dram.a[OUT:OUT + rows * (cols + 2) * lanes].reshape(rows, cols + 2, lanes)[:, :cols]
        assert np.array_equal(got.view(np.int8), want.astype(np.int8))
        assert not dram.a[OUT:].reshape(-1, lanes)[np.arange(rows) * (cols + 2) + cols].any()  # the gap stays
        assert stats.pad_elements == rows * cols - y * x and stats.load_bytes_acc == y * x * CFG.acc_elem_bytes
        assert stats.store_bytes == rows * cols * lanes and stats.load_insns == 0 and stats.store_insns == 1
        load_cost = CFG.dma_setup + y * x * CFG.acc_elem_bytes // CFG.bus_bytes + rows * cols - y * x
        store_cost = CFG.dma_setup + -(-rows * cols * lanes // CFG.bus_bytes)
        assert stats.cycles == load_cost + store_cost + 1 and stats.store_busy == store_cost


@pytest.mark.parametrize("cfg", [CFG, CFG8], ids=lambda c: c.block)
def test_gemm_two_level_loop_matches_numpy(cfg, rng):
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    x = rng.integers(-128, 128, (40, B, BI)).astype(np.int8)
    w = rng.integers(-128, 128, (30, BO, BI)).astype(np.int8)
    x[0], w[0] = -128, -128  # the extremes: -128 * -128 summed
    uops = [Uop(0, 0, 0), Uop(1, 3, 2), Uop(5, 1, 0), Uop(2, 7, 4), Uop(1, 0, 9)]
    io, ii = 3, 4
    f = dict(dst_out=6, dst_in=1, src_out=8, src_in=2, wgt_out=5, wgt_in=1)
    n = 6 * (io - 1) + (ii - 1) + 6
    want = np.zeros((n, B, BO), np.int64)
    for o in range(io):
        for i in range(ii):
            for u in uops[1:]:
                d, s = u.dst + o * f["dst_out"] + i * f["dst_in"], u.src + o * f["src_out"] + i * f["src_in"]
                want[d] += x[s].astype(np.int64) @ w[u.wgt + o * f["wgt_out"] + i * f["wgt_in"]].astype(np.int64).T
    dram = Dram()
    xb, wb = dram.put(x, cfg.inp_elem_bytes), dram.put(w, cfg.wgt_elem_bytes)
    ub = dram.put(encode_uops(uops, cfg), 4)
    prog = [load(MemType.UOP, 0, ub, 1, len(uops)), load(MemType.WGT, 0, wb, 1, len(w)),
            load(MemType.INP, 0, xb, 1, len(x), deps=Deps(push_next=True)),
            GemmInsn(0, 1, iter_in=n, dst_in=1, reset=True, deps=Deps(pop_prev=True)),
            GemmInsn(1, len(uops), iter_out=io, iter_in=ii, **f), *readback(n, cfg)]
    stats = run(prog, dram, cfg)
    assert np.array_equal(read_acc(dram, n, cfg), want.astype(np.int32))
    assert stats.gemm_uops == io * ii * (len(uops) - 1) and stats.gemm_reset_uops == n
    assert stats.gemm_cycles == stats.gemm_uops * cfg.gemm_ii and stats.load_insns == 2


def test_gemm_accumulator_wraps_around():
    dram = Dram()
    x = np.full((1, 1, 16), -128, np.int8)
    xb, wb = dram.put(x, 16), dram.put(np.full((1, 16, 16), -128, np.int8), 256)
    ub = dram.put(encode_uops([Uop(0, 0, 0)], CFG), 4)
    reps = (1 << 14) - 1
    prog = [load(MemType.UOP, 0, ub, 1, 1), load(MemType.WGT, 0, wb, 1, 1),
            load(MemType.INP, 0, xb, 1, 1, deps=Deps(push_next=True)),
            GemmInsn(0, 1, iter_out=reps, deps=Deps(pop_prev=True)), *readback(1, CFG)]
    run(prog, dram)
    assert (read_acc(dram, 1, CFG) == np.int64(reps * 16 * 128 * 128).astype(np.int32)).all()
    assert reps * 16 * 128 * 128 > 2 ** 31


def alu_ref(op, a, b):
    a, b = a.astype(np.int64), np.broadcast_to(b, a.shape).astype(np.int64)
    if op is AluOp.SHR:  # shifting by 32 or more moves every bit out
        out = np.where(b >= 0, a >> np.clip(b, 0, 63), a << np.clip(-b, 0, 32))
    else:
        out = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add}[op](a, b)
    return out.astype(np.int32)  # int64 -> int32 wraps


@pytest.mark.parametrize("op", list(AluOp), ids=lambda o: o.name)
@pytest.mark.parametrize("imm", [None, -3, 5, -32768, 32767])
def test_alu_ops_match_numpy(op, imm, rng):
    n, lanes = 6, CFG.batch * CFG.block_out
    a = rng.integers(-2 ** 31, 2 ** 31, (n, 1, lanes), dtype=np.int64).astype(np.int32)
    a[0, 0, :4] = [2 ** 31 - 1, -2 ** 31, 0, -1]
    if op is AluOp.SHR:
        b = rng.integers(-31, 32, (n, 1, lanes)).astype(np.int32)
        b[0, 0, :4] = [40, 33, -33, 31]
    else:
        b = rng.integers(-2 ** 31, 2 ** 31, (n, 1, lanes), dtype=np.int64).astype(np.int32)
        b[0, 0, :4] = [1, -1, 5, 2 ** 31 - 1]
    dram = Dram()
    # ACC[0:n] = a (dst), ACC[n:2n] = b (src, through micro-op 1 = (0, n, 0))
    ops = [load(MemType.ACC, n, dram.put(b, CFG.acc_elem_bytes), 1, n),
           AluInsn(op, 1, 2, iter_out=n, dst_out=1, src_out=1, use_imm=imm is not None, imm=imm or 0)]
    stats = run(acc_program(dram, a, CFG, ops, uops=[Uop(0, n, 0)]), dram)
    assert np.array_equal(read_acc(dram, n, CFG), alu_ref(op, a, b if imm is None else np.int64(imm)))
    assert stats.alu_uops == 5 * n  # the op, then readback's ADD and three SHRs
    assert stats.alu_cycles == n * (CFG.alu_ii if imm is None else CFG.alu_imm_ii) + 4 * n * CFG.alu_imm_ii


def test_reset_zeroes_accumulators(rng):
    dram = Dram()
    a = rng.integers(1, 100, (4, 1, 16)).astype(np.int32)
    prog = acc_program(dram, a, CFG, [GemmInsn(0, 1, iter_in=2, dst_in=2, reset=True),
                                      AluInsn(AluOp.ADD, 0, 1, iter_out=2, dst_out=3, reset=True)])
    run(prog, dram)
    want = a.copy()
    want[[0, 2, 3]] = 0
    assert np.array_equal(read_acc(dram, 4, CFG), want)


def pipeline(dram, x, w, tiles, n):
    """Double-buffered load -> compute -> store: tile t's input and accumulators live in half t % 2,
    and tokens hand each half back before it is reused."""
    ub = dram.put(encode_uops([Uop(0, 0, 0), Uop(n, n, 0)], CFG), 4)
    xb, wb = dram.put(x, CFG.inp_elem_bytes), dram.put(w, CFG.wgt_elem_bytes)
    prog = [load(MemType.UOP, 0, ub, 1, 2), load(MemType.WGT, 0, wb, 1, 1)]
    for t in range(tiles):
        h, more = t % 2, t + 2 < tiles
        prog += [load(MemType.INP, h * n, xb + t * n, 1, n, deps=Deps(pop_next=t >= 2, push_next=True)),
                 GemmInsn(h, h + 1, iter_in=n, dst_in=1, reset=True, deps=Deps(pop_next=t >= 2)),
                 GemmInsn(h, h + 1, iter_in=n, dst_in=1, src_in=1,
                          deps=Deps(pop_prev=True, push_prev=more, push_next=True)),
                 store(h * n, OUT // CFG.out_elem_bytes + t * n, 1, n,
                       deps=Deps(pop_prev=True, push_prev=more or t == tiles - 1))]
    return prog + [FinishInsn(Deps(pop_next=True))]


def test_tokened_pipeline_same_in_both_modes_and_overlaps(rng):
    tiles, n = 6, 32
    x = rng.integers(-128, 128, (tiles * n, 1, 16)).astype(np.int8)
    w = rng.integers(-128, 128, (1, 16, 16)).astype(np.int8)
    want = (x[:, 0].astype(np.int32) @ w[0].T.astype(np.int32)).astype(np.int8)
    results = {}
    for checked in (True, False):
        dram = Dram()
        stats = run(pipeline(dram, x, w, tiles, n), dram, checked=checked)
        assert np.array_equal(dram.a[OUT:OUT + x.shape[0] * 16].view(np.int8).reshape(-1, 16), want)
        results[checked] = (stats, dram.a.copy())
    (c, cd), (f, fd) = results[True], results[False]
    assert np.array_equal(cd, fd) and c.counts() == f.counts()
    assert c.cycles < f.cycles == c.load_busy + c.compute_busy + c.store_busy
    assert c.cycles >= max(c.load_busy, c.compute_busy, c.store_busy)
    assert "simulated" in c.report() and c.seconds == c.cycles / 200e6 and 0 < c.gemm_utilization < 1


def expect(prog, kind, insn, *fragments, cfg=CFG, dram=None, checked=True):
    with pytest.raises(VTASimError) as info:
        run(prog, dram if dram is not None else Dram(), cfg, checked)
    err = info.value
    assert isinstance(err, MeasureError) and err.kind == kind and err.insn == insn, str(err)
    for frag in fragments:
        assert frag in str(err), str(err)
    return err


def test_pop_without_push_deadlocks():
    prog = [load(MemType.INP, 0, 0, 1, 1), GemmInsn(0, 0, deps=Deps(pop_prev=True)), FinishInsn()]
    expect(prog, "deadlock", 1, "instruction 1 (GEMM", "empty load->compute FIFO", "load: finished",
           "load->compute 0")
    run(prog, Dram(), checked=False)  # tokens are not checked in functional mode
    prog = [store(0, 0, 1, 1, deps=Deps(pop_prev=True)), FinishInsn()]
    expect(prog, "deadlock", 0, "empty compute->store FIFO")


def test_full_fifo_blocks_then_deadlocks():
    cfg = VTAConfig(dep_queue_depth=2)
    prog = [load(MemType.INP, 0, 0, 1, 1, deps=Deps(push_next=True)) for _ in range(3)]
    expect(prog + [FinishInsn()], "deadlock", 2, "full load->compute FIFO", cfg=cfg)


def test_full_fifo_stalls_the_pusher_until_the_pop():
    cfg = VTAConfig(dep_queue_depth=1)
    prog = [load(MemType.UOP, 0, 0, 1, 1),  # compute [0, 151)
            load(MemType.INP, 0, 0, 1, 1, deps=Deps(push_next=True)),  # load [1, 153)
            load(MemType.INP, 1, 0, 1, 1, deps=Deps(push_next=True)),  # FIFO full until the pop at 5231
            GemmInsn(0, 1, iter_out=5000, reset=True),  # compute [151, 5231)
            GemmInsn(0, 1, deps=Deps(pop_prev=True)),  # [5231, 5312); the second load runs [5231, 5383)
            GemmInsn(0, 1, deps=Deps(pop_prev=True)),  # [5383, 5464)
            FinishInsn()]
    assert run(prog, Dram(), cfg).cycles == 5465


def test_full_command_queue_stalls_fetch():
    cfg = VTAConfig(cmd_queue_depth=1)
    prog = [GemmInsn(0, 1, iter_out=5000, reset=True), GemmInsn(0, 1, reset=True), GemmInsn(0, 1, reset=True),
            load(MemType.INP, 0, 0, 1, 100, deps=Deps(push_next=True)), FinishInsn(deps=Deps(pop_prev=True))]
    assert run(prog, Dram()).cycles == 5243  # the load overlaps the first GEMM
    # fetched once the second GEMM starts; FINISH waits for it
    assert run(prog, Dram(), cfg).cycles == 5081 + CFG.dma_setup + 200 + 1
    prog = [GemmInsn(0, 0, deps=Deps(pop_prev=True)), GemmInsn(0, 0),
            load(MemType.INP, 0, 0, 1, 1, deps=Deps(push_next=True)), FinishInsn()]
    run(prog, Dram())
    expect(prog, "deadlock", 0, "fetch stalled at instruction 1", "instruction 2 (LOAD INP, load module) not fetched",
           cfg=cfg)


def race_program(fixed: bool):
    """GEMM reads INP[0]; a later load overwrites it, ordered only if `fixed` (the GEMM hands the buffer back)."""
    return [load(MemType.UOP, 0, 0, 1, 1), load(MemType.WGT, 0, 0, 1, 1),
            load(MemType.INP, 0, 0, 1, 1, deps=Deps(push_next=True)),
            GemmInsn(0, 1, deps=Deps(pop_prev=True, push_prev=fixed)),
            load(MemType.INP, 0, 1, 1, 1, deps=Deps(pop_next=fixed, push_next=True)),
            FinishInsn(deps=Deps(pop_prev=True))]


def test_finish_before_the_last_store_is_an_error():
    prog = [load(MemType.INP, 0, 0, 1, 100), FinishInsn()]
    err = expect(prog, "early_finish", 0, "FINISH (instruction 1)", "load module's last instruction 0")
    assert "pop a token" in str(err)


def test_missing_token_is_a_race():
    err = expect(race_program(False), "race", 3, "INP[0]", "instruction 3 (GEMM", "instruction 4 (LOAD INP")
    assert "no dependence token" in str(err)
    run(race_program(True), Dram())
    run(race_program(False), Dram(), checked=False)


def test_store_reading_accumulators_a_later_gemm_resets_races():
    prog = [load(MemType.UOP, 0, 0, 1, 1), GemmInsn(0, 1, deps=Deps(push_next=True)),
            store(0, 0, 1, 1, deps=Deps(pop_prev=True)), GemmInsn(0, 1, reset=True), FinishInsn()]
    with pytest.raises(VTASimError) as info:  # which side reports depends on the schedule: both are named
        run(prog, Dram())
    err = info.value
    assert err.kind == "race" and err.insn in (2, 3) and "ACC[0]" in str(err), str(err)
    assert "instruction 2 (STORE" in str(err) and "instruction 3 (GEMM reset" in str(err)


def test_leftover_token_is_an_unmatched_push():
    prog = [load(MemType.INP, 0, 0, 1, 1), load(MemType.INP, 0, 0, 1, 1, deps=Deps(push_next=True)), FinishInsn()]
    expect(prog, "unmatched_push", 1, "unmatched push", "load->compute")


@pytest.mark.parametrize("insn, flag", [(load(MemType.INP, 0, 0, 1, 1, deps=Deps(pop_prev=True)), "pop_prev"),
                                        (load(MemType.WGT, 0, 0, 1, 1, deps=Deps(push_prev=True)), "push_prev"),
                                        (store(0, 0, 1, 1, deps=Deps(push_next=True)), "push_next"),
                                        (store(0, 0, 1, 1, deps=Deps(pop_next=True)), "pop_next")])
def test_invalid_dependence_flags(insn, flag):
    for checked in (True, False):
        expect([load(MemType.UOP, 0, 0, 1, 1), insn, FinishInsn()],
               "invalid_flag", 1, f"invalid dependence flag {flag}", checked=checked)


BOUNDS = {
    "inp sram": [load(MemType.INP, CFG.inp_depth - 2, 0, 1, 1, x_pad1=2)],
    "wgt dram": [load(MemType.WGT, 0, (1 << 20) // 256 - 1, 2, 1)],
    "uop end": [GemmInsn(0, CFG.uop_depth + 1)],
    "uop order": [GemmInsn(3, 2)],
    "gemm dst": [load(MemType.UOP, 0, 0, 1, 1), GemmInsn(0, 1, iter_out=3, dst_out=CFG.acc_depth - 1)],
    "gemm src": [load(MemType.UOP, 0, 0, 1, 1), GemmInsn(0, 1, iter_in=CFG.inp_depth + 1, src_in=1)],
    "alu src": [load(MemType.UOP, 0, 0, 1, 1), AluInsn(AluOp.ADD, 0, 1, iter_in=3, src_in=CFG.acc_depth // 2)],
    "store dram": [store(0, (1 << 20) // 16 - 1, 1, 2, stride=2)],
    "store sram": [store(CFG.acc_depth - 1, 0, 2, 1)],
}


@pytest.mark.parametrize("name", list(BOUNDS))
def test_bounds_errors(name):
    prog = BOUNDS[name] + [FinishInsn()]
    for checked in (True, False):
        expect(prog, "bounds", len(prog) - 2, checked=checked)


def test_program_errors():
    expect([load(MemType.INP, 0, 0, 1, 1)], "program", 0, "does not end with FINISH")
    expect([FinishInsn(), FinishInsn()], "program", 0, "FINISH must be last")
    with pytest.raises(VTASimError, match="empty") as info:
        simulate(b"", np.zeros(16, np.uint8), CFG)
    assert info.value.kind == "program" and info.value.insn is None


def read_only(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("dram, why", [(np.zeros(64, np.int8), "dtype"), (np.zeros(128, np.uint8)[::2], "contiguous"),
                                       (read_only(np.zeros(64, np.uint8)), "read-only"), ([0] * 64, "NumPy")])
def test_bad_arguments(dram, why):
    with pytest.raises(VTASimError, match=why) as info:
        simulate(encode([FinishInsn()], CFG), dram, CFG)
    assert info.value.kind == "input" and info.value.insn is None
    with pytest.raises(VTASimError, match="16-byte"):
        simulate(b"\0" * 17, np.zeros(64, np.uint8), CFG)


def test_million_gemm_uop_iterations_run(rng):
    dram = Dram()
    uops = encode_uops([Uop(k % 64, k % 32, k % 16) for k in range(1000)], CFG)
    ub = dram.put(uops, 4)
    prog = [load(MemType.UOP, 0, ub, 1, 1000), GemmInsn(0, 1000, iter_out=1000), FinishInsn()]
    stats = run(prog, dram)
    assert stats.gemm_uops == 10 ** 6 and stats.cycles == CFG.dma_setup + 500 + CFG.gemm_setup + 10 ** 6 + 1
