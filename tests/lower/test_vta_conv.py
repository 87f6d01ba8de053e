"""The VTA convolution lowering: bit-exact in the dependence-checked simulator
against the te reference evaluator, tokens that satisfy Theorem 3.1 for random
virtual-thread programs, and every broken token order caught by the simulator."""

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilewright.bench.vta_resnet import random_inputs, reference
from tilewright.codegen.vta_isa import Deps, MemInsn, Module, module_of
from tilewright.errors import ScheduleError, ShapeError
from tilewright.lower.vta_conv import TVM_EPILOGUE, ConvShape, Epilogue, VTATiling, lower_conv2d
from tilewright.lower.vta_sync import check_theorem_3_1
from tilewright.runtime.vta_kernel import VTAKernel
from tilewright.runtime.vta_sim import VTASimError
from tilewright.space.vta import tiling_of, vta_space
from tilewright.targets.vta import VTAConfig

CFG = VTAConfig()
SMALL = VTAConfig(batch=1, block_in=16, block_out=16, inp_buffer_bytes=4096, wgt_buffer_bytes=16384,
                  acc_buffer_bytes=8192, uop_buffer_bytes=4096)


def _run(shape, cfg, tiling, epilogue=TVM_EPILOGUE, seed=0, checked=True):
    inputs = random_inputs(shape, cfg, seed)
    kernel = VTAKernel(lower_conv2d(shape, cfg, tiling, epilogue), checked=checked)
    got = kernel(inputs["data"], inputs["kernel"], inputs["bias"] if epilogue.bias else None)
    return kernel, got, reference(shape, inputs, epilogue)


@pytest.mark.parametrize("shape, tiling", [
    (ConvShape(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1), VTATiling(4, 8, 1, 1, 2, "co")),
    (ConvShape(1, 32, 9, 9, 48, 3, 3, 1, 1, 2, 2), VTATiling(5, 5, 3, 2, 1)),
    (ConvShape(1, 64, 14, 14, 32, 1, 1, 0, 0, 2, 2), VTATiling(7, 7, 2, 4, 1)),
    (ConvShape(1, 16, 7, 7, 32, 3, 3, 1, 1, 1, 1), VTATiling(7, 7, 1, 1, 2, "co")),
    (ConvShape(1, 16, 12, 10, 16, 5, 3, 2, 1, 1, 1), VTATiling(3, 10, 1, 1, 4, "h")),
    (ConvShape(1, 32, 7, 9, 16, 1, 1, 0, 0, 2, 2), VTATiling(4, 5, 1, 2, 1)),  # odd rows, skipped by the DMA
    (ConvShape(1, 32, 13, 8, 16, 1, 1, 0, 0, 3, 1), VTATiling(1, 8, 1, 1, 5, "h")),
    (ConvShape(1, 16, 6, 6, 16, 3, 3, 5, 5, 1, 1), VTATiling(1, 2, 1, 1, 2, "h")),  # windows wholly in the pad
])
def test_convolutions_are_bit_exact(shape, tiling):
    kernel, got, want = _run(shape, CFG, tiling)
    np.testing.assert_array_equal(got, want)
    s = kernel.stats()
    assert s.gemm_uops * CFG.macs_per_cycle == shape.macs  # every MAC once, none twice
    assert 0 < s.gemm_utilization <= 1


@pytest.mark.parametrize("rounding", [False, True])
def test_dense_is_a_one_by_one_convolution_without_bias(rounding):
    shape = ConvShape(1, 256, 1, 1, 64, 1, 1)
    ep = Epilogue(shift=5, bias=False, lo=-128, hi=127, round=rounding)
    kernel, got, want = _run(shape, CFG, VTATiling(1, 1, 4, 16), ep)
    np.testing.assert_array_equal(got, want)
    assert ("ALU   ADD imm=16" in kernel.source) == rounding


def test_block_8x8x8_with_batch_8():
    cfg = VTAConfig(batch=8, block_in=8, block_out=8)
    shape = ConvShape(8, 16, 6, 6, 24, 3, 3, 1, 1, 1, 1)
    _, got, want = _run(shape, cfg, VTATiling(3, 6, 1, 2, 2, "h"))
    np.testing.assert_array_equal(got, want)


def test_functional_and_checked_modes_agree_and_threads_hide_latency():
    shape = ConvShape(1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1)
    one = VTATiling(7, 14, 2, 1, 1)
    k1, got1, want = _run(shape, CFG, one)
    k2, got2, _ = _run(shape, CFG, replace(one, vthreads=2))
    kf, gotf, _ = _run(shape, CFG, one, checked=False)
    for got in (got1, got2, gotf):
        np.testing.assert_array_equal(got, want)
    assert k2.stats().cycles < k1.stats().cycles < kf.stats().cycles  # overlap beats serial execution
    assert "simulated" in str(k1.time())


def test_buffer_overflow_names_the_buffer_and_bytes():
    shape = ConvShape(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1)
    with pytest.raises(ScheduleError, match=r"vta\.acc.*bytes over"):
        lower_conv2d(shape, CFG, VTATiling(14, 56, 2, 1, 2))
    with pytest.raises(ScheduleError, match=r"vta\.inp"):
        lower_conv2d(shape, SMALL, VTATiling(8, 56, 1, 4, 1))
    with pytest.raises(ScheduleError, match="must divide"):
        lower_conv2d(shape, CFG, VTATiling(5, 56, 1, 1))
    with pytest.raises(ScheduleError, match="virtual threads must divide"):
        lower_conv2d(shape, CFG, VTATiling(7, 56, 4, 1, 2, "co"))


def test_shapes_the_core_cannot_take_are_refused():
    with pytest.raises(ShapeError, match="in_channels=24 is not a multiple.*block 16"):
        lower_conv2d(ConvShape(1, 24, 8, 8, 16, 3, 3, 1, 1), CFG, VTATiling(8, 8, 1, 1))
    with pytest.raises(ShapeError, match="pads at most 15"):
        lower_conv2d(ConvShape(1, 16, 8, 8, 16, 3, 3, 16, 16), CFG, VTATiling(1, 1, 1, 1))


@st.composite
def programs(draw):
    k = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    h, w = draw(st.integers(4, 10)), draw(st.integers(4, 10))
    shape = ConvShape(1, 16 * draw(st.integers(1, 3)), h, w, 16 * draw(st.integers(1, 4)), k, k,
                      k // 2, k // 2, stride, stride)
    space = vta_space(shape, SMALL)
    point = space.sample(random.Random(draw(st.integers(0, 2**31))))
    return shape, tiling_of(space, point)


@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_virtual_thread_programs_never_deadlock_and_stay_exact(program):
    """Random shapes and random points of the space (up to 4 virtual threads, tight buffers)."""
    shape, tiling = program
    kernel, got, want = _run(shape, SMALL, tiling)
    check_theorem_3_1(kernel.program.insns)
    np.testing.assert_array_equal(got, want)


def _program():
    shape = ConvShape(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1)
    return shape, lower_conv2d(shape, CFG, VTATiling(4, 8, 1, 1, 2, "co"))


def _mutate(program, insns):
    inputs = random_inputs(program.shape, CFG)
    kernel = VTAKernel(replace(program, insns=insns))
    kernel(inputs["data"], inputs["kernel"], inputs["bias"])


def _flagged(insns, flag):
    return [n for n, i in enumerate(insns) if getattr(i.deps, flag)]


@pytest.mark.parametrize("flag", ["push_next", "push_prev", "pop_next", "pop_prev"])
def test_every_dropped_token_flag_is_caught_with_its_instruction(flag):
    _, program = _program()
    sites = _flagged(program.insns, flag)
    assert sites
    for n in sites:
        insns = list(program.insns)
        insns[n] = replace(insns[n], deps=replace(insns[n].deps, **{flag: False}))
        with pytest.raises(VTASimError) as err:
            _mutate(program, insns)
        assert err.value.kind in ("deadlock", "race", "unmatched_push", "early_finish") and err.value.insn is not None


CHANNELS = ((Module.LOAD, Module.COMPUTE, "push_next", "pop_prev"),
            (Module.COMPUTE, Module.LOAD, "push_prev", "pop_next"),
            (Module.COMPUTE, Module.STORE, "push_next", "pop_prev"),
            (Module.STORE, Module.COMPUTE, "push_prev", "pop_next"))


def test_every_dropped_push_pop_pair_is_caught():
    """The k-th push of a channel pairs with its k-th pop; removing a pair leaves an access unordered
    (a race) or lets FINISH overtake the last store (an early finish)."""
    _, program = _program()
    insns, tried = program.insns, 0
    for src, dst, push, pop in CHANNELS:
        xs = [n for n in _flagged(insns, push) if module_of(insns[n]) is src]
        ys = [n for n in _flagged(insns, pop) if module_of(insns[n]) is dst]
        assert len(xs) == len(ys) > 0
        for x, y in zip(xs, ys):
            mutant = list(insns)
            mutant[x] = replace(mutant[x], deps=replace(mutant[x].deps, **{push: False}))
            mutant[y] = replace(mutant[y], deps=replace(mutant[y].deps, **{pop: False}))
            with pytest.raises(VTASimError) as err:
                _mutate(program, mutant)
            assert err.value.kind in ("race", "early_finish") and err.value.insn is not None, (x, y, str(err.value))
            tried += 1
    assert tried > 20


def test_a_hand_built_deadlock_names_the_waiting_instruction():
    _, program = _program()
    insns = list(program.insns)
    first_load = next(n for n, i in enumerate(insns) if isinstance(i, MemInsn) and module_of(i) is Module.LOAD)
    insns[first_load] = replace(insns[first_load], deps=Deps(pop_next=True, push_next=insns[first_load].deps.push_next))
    with pytest.raises(VTASimError, match="deadlock") as err:
        _mutate(program, insns)
    assert err.value.insn is not None


@pytest.mark.parametrize("order, weight_loads, input_loads", [
    ("h co w", 2 * 2 * 1, 2 * 2 * 2),  # per (h, co) the weights stay for both w tiles
    ("co h w", 2, 2 * 2 * 2),          # weights loaded once per co tile
    ("h w co", 2 * 2 * 2, 2 * 2),      # inputs loaded once per spatial tile
])
def test_loop_order_keeps_an_operand_on_chip(order, weight_loads, input_loads):
    """All input channels in one step: consecutive tiles that share an operand's tile do not reload it."""
    shape = ConvShape(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1)  # 2 h tiles x 2 co tiles x 2 w tiles
    kernel, got, want = _run(shape, CFG, VTATiling(4, 4, 1, 2, 1, order=order))
    np.testing.assert_array_equal(got, want)
    text = kernel.source
    assert text.count("LOAD  WGT") == weight_loads
    assert text.count("LOAD  INP") == input_loads * 2  # one 2-D load per input channel block
