"""Generated HLS C++ run by C simulation against the te reference: fp32 within tolerance, integers bit
for bit, every design variant; the project's directives; and the errors of what cannot run."""

import subprocess

import numpy as np
import pytest

import tilewright as tw
from tilewright.codegen.hls import accumulator_type, render_hls
from tilewright.errors import BuildError, ShapeError
from tilewright.lower.hls_form import hls_form
from tilewright.runtime.hls_kernel import HLSKernel
from tilewright.space.hls import default_design, design_of
from tilewright.targets.hls import DEVICES

VU9P = DEVICES["vu9p"]


def _conv(dtype, stride=1, value_range=None):
    x = tw.te.placeholder((1, 6, 10, 10), dtype, name="x", **({"value_range": value_range} if value_range else {}))
    w = tw.te.placeholder((8, 6, 3, 3), dtype, name="w")
    y = tw.ops.conv2d(x, w, stride=stride, padding=1, out_dtype=None if dtype == "float32" else "int32")
    return [x, w, y]


def _run(args, design, rng):
    f = hls_form(args[-1])
    if args[0].dtype.name == "float32":
        a, b = (rng.standard_normal(t.shape).astype("float32") for t in args[:2])
    else:
        info = np.iinfo(args[0].dtype.name)
        a, b = (rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.name) for t in args[:2])
    got = np.zeros(args[-1].shape, args[-1].dtype.name)
    kernel = HLSKernel(f, design, VU9P)
    kernel(a, b, got)
    return kernel, got, tw.reference.evaluate(args[-1], {args[0]: a, args[1]: b})


DESIGNS = {
    "default": None,
    "pe-array": (dict(n=1, o=4, h=5, w=10, rc=3, rh=3, rw=1), dict(n=1, o=2, h=1, w=2, rc=3, rh=1, rw=1), {}),
    "double-buffered x2": (dict(n=1, o=4, h=5, w=10, rc=3, rh=3, rw=1), dict(n=1, o=2, h=1, w=2, rc=3, rh=1, rw=1),
                           dict(beat=4, pipelines=2, double_buffer=True)),
    "whole-tile": (dict(n=1, o=8, h=10, w=10, rc=6, rh=3, rw=3), dict(n=1, o=8, h=1, w=1, rc=2, rh=1, rw=3),
                   dict(beat=16)),
}


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
@pytest.mark.parametrize("which", list(DESIGNS))
def test_csim_matches_reference(dtype, which, rng):
    args = _conv(dtype)
    f = hls_form(args[-1])
    spec = DESIGNS[which]
    design = default_design(f, VU9P) if spec is None else design_of(f, spec[0], spec[1], **spec[2])
    kernel, got, ref = _run(args, design, rng)
    if dtype == "float32":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, ref)
    assert kernel.compile_seconds < 5
    stats = kernel.stats()
    assert stats["estimate"].startswith("model") and stats["cycles"] > 0 and stats["dsp"] > 0


def test_strided_gemm_and_narrow_accumulator(rng):
    args = _conv("int8", stride=2, value_range=(0, 15))
    f = hls_form(args[-1])
    assert accumulator_type(f) == "ap_int<18>"  # 15 * 128 * 54 taps = 103680: 17 bits and a sign
    _, got, ref = _run(args, design_of(f, dict(n=1, o=8, h=5, w=5, rc=6, rh=3, rw=3),
                                       dict(n=1, o=4, h=1, w=5, rc=1, rh=1, rw=1)), rng)
    np.testing.assert_array_equal(got, ref)
    a = tw.te.placeholder((24, 40), "float32", name="A")
    b = tw.te.placeholder((40, 16), "float32", name="B")
    c = tw.ops.matmul(a, b)
    fg = hls_form(c)
    _, got, ref = _run([a, b, c], design_of(fg, dict(i=8, j=16, k=20), dict(i=2, j=4, k=5), beat=8), rng)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_project_files_carry_the_design(tmp_path):
    args = _conv("int8")
    f = hls_form(args[-1])
    d = design_of(f, dict(n=1, o=8, h=10, w=10, rc=6, rh=3, rw=3), dict(n=1, o=8, h=1, w=1, rc=2, rh=1, rw=3),
                  beat=16, double_buffer=True)
    project = render_hls(f, d, VU9P, "conv")
    k = project.kernel
    for directive in ("#pragma HLS DATAFLOW", "#pragma HLS PIPELINE II=1", "#pragma HLS UNROLL",
                      f"cyclic factor={d.partition[1]}", "INTERFACE m_axi port=x", "INTERFACE s_axilite port=return",
                      "hls::stream<beat_a_t>"):
        assert directive in k, directive
    assert "set_part xcvu9p" in project.files["run_hls.tcl"] and "int main()" in project.files["tb_conv.cpp"]
    kernel = HLSKernel(f, d, VU9P, name="conv")
    out = kernel.export(tmp_path / "prj")
    assert sorted(p.name for p in out.iterdir()) == ["conv.cpp", "conv.h", "run_hls.tcl", "tb_conv.cpp", "tw_hls.h"]
    # the project's own testbench, built as a vendor tool's csim would, passes on the reference's output
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-128, 128, t.shape).astype("int8") for t in args[:2])
    kernel.export(out, data=(a, b, tw.reference.evaluate(args[-1], {args[0]: a, args[1]: b})))
    subprocess.run(["g++", "-O1", "-std=c++14", "conv.cpp", "tb_conv.cpp", "-o", "tb"], cwd=out, check=True)
    run = subprocess.run(["./tb"], cwd=out, capture_output=True, text=True)
    assert run.returncode == 0 and "0 of 800 outputs differ" in run.stdout


def test_bad_arrays_and_compiler_failures(rng, monkeypatch, tmp_path):
    args = _conv("float32")
    f = hls_form(args[-1])
    kernel = HLSKernel(f, default_design(f, VU9P), VU9P)
    x = np.zeros((1, 6, 10, 10), "float32")
    with pytest.raises(ShapeError, match=r"'w' must be a float32 array of shape \[8, 6, 3, 3\]"):
        kernel(x, np.zeros((8, 6, 3), "float32"), np.zeros((1, 8, 10, 10), "float32"))
    monkeypatch.setenv("TILEWRIGHT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEWRIGHT_CXX", "false")
    with pytest.raises(BuildError, match="compiling the generated project failed"):
        HLSKernel(f, design_of(f, dict(n=1, o=2, h=1, w=10, rc=1, rh=1, rw=1), dict(n=1, o=1, h=1, w=1, rc=1, rh=1,
                                                                                  rw=1)), VU9P)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_tiles_overhanging_their_axes(dtype, rng):
    args = _conv(dtype)
    f = hls_form(args[-1])
    d = design_of(f, dict(n=1, o=3, h=4, w=10, rc=4, rh=2, rw=3), dict(n=1, o=3, h=1, w=2, rc=4, rh=1, rw=1), beat=4)
    _, got, ref = _run(args, d, rng)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
