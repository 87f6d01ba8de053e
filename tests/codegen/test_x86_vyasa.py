"""The native analog: Vyasa's column fusion rendered for AVX2 vpmaddwd, bit-exact against the
reference on int16 filters (sliding tap pairs, a zero tap, full-range values whose pair sums wrap
in int32 as the te's do), reading the caller's own image layout."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.codegen.x86_vyasa import native_config, render_x86
from tilewright.lower.aie_program import VyasaSchedule
from tilewright.lower.vyasa import build_program
from tilewright.lower.vyasa_form import conv_form
from tilewright.reference import evaluate
from tilewright.runtime.x86_vyasa import NativeVyasaKernel, has_vnni16
from tilewright.workloads.vyasa import TABLE_VI

CFG = native_config()


def _program(k: int, jam=(("ax0", 2),)):
    tensors = TABLE_VI[k - 2].build_int32()
    form = conv_form(tensors[2], CFG.acc_bits, wrapping=True)
    return tensors, build_program(form, VyasaSchedule("ax1", ("ax0", "ax1"), jam), CFG)


def test_source_uses_vpmaddwd_pairs_and_the_callers_layout():
    (inp, _, _), prog = _program(3)
    src = render_x86(prog)
    assert "_mm256_madd_epi16" in src and "_mm256_unpacklo_epi32" in src and "omp parallel for" in src
    assert prog.layouts["x"].padded == tuple(inp.shape)  # no pitch padding: the image as the caller holds it


@pytest.mark.skipif(not host_runs(AVX2), reason="the host lacks AVX2")
@pytest.mark.parametrize("k,jam", [(2, (("ax0", 4),)), (3, (("ax0", 2), ("ax1", 2))), (5, ()), (8, (("ax0", 2),))])
def test_native_filters_are_bit_exact(k, jam):
    (inp, wgt, out), prog = _program(k, jam)
    kernel = NativeVyasaKernel(prog, tw.Target("cpu"))
    rng = np.random.default_rng(k)
    a = rng.integers(-2 ** 15, 2 ** 15, size=inp.shape).astype(np.int16)
    b = rng.integers(-2 ** 15, 2 ** 15, size=wgt.shape).astype(np.int16)
    a[0, :4], b[0, :2] = -2 ** 15, -2 ** 15  # the pair sum that wraps: 2 x 2^30 = 2^31
    got = np.zeros(out.shape, np.int32)
    kernel(a, b, got)
    ref = evaluate([out], {inp: a, wgt: b})
    np.testing.assert_array_equal(got, ref[0] if isinstance(ref, (list, tuple)) else ref)
    assert kernel.time(a, b, got, repeat=1, min_repeat_ms=1).median > 0


def test_the_native_form_is_the_int32_sum():
    inp, wgt, out = TABLE_VI[0].build(16)  # srs-stored: the AIE's form, not x86's
    with pytest.raises(tw.TilewrightError, match="int32 sum of int16 reads"):
        conv_form(out, CFG.acc_bits, wrapping=True)


@pytest.mark.skipif(not has_vnni16(tw.Target("cpu")), reason="the host lacks AVX512-VNNI with VL")
def test_vpdpwssd_variant_is_bit_exact():
    (inp, wgt, out), prog = _program(5)
    kernel = NativeVyasaKernel(prog, tw.Target("cpu"), vnni=True)
    assert "_mm256_dpwssd_epi32" in kernel.source
    rng = np.random.default_rng(1)
    a = rng.integers(-2 ** 15, 2 ** 15, size=inp.shape).astype(np.int16)
    b = rng.integers(-2 ** 15, 2 ** 15, size=wgt.shape).astype(np.int16)
    got = np.zeros(out.shape, np.int32)
    kernel(a, b, got)
    ref = evaluate([out], {inp: a, wgt: b})
    np.testing.assert_array_equal(got, ref[0] if isinstance(ref, (list, tuple)) else ref)
