"""OpenCL kernels run on PoCL's CPU device (CI) against NumPy references: hand-built GPU IR (shared tiles,
barriers, guards, several kernels with a global intermediate), timing by profiling events, export and
loading in another process, and the error paths."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_programs import PROGRAMS, SCHEDULES, has_bind

from tilewright.build.opencl import opencl_available
from tilewright.codegen.opencl import generate_opencl
from tilewright.errors import BuildError, MeasureError

WHY = opencl_available()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"no OpenCL: {WHY}")


def _kernel(name):
    from tilewright.runtime.opencl import OpenCLKernel

    func, inputs, ref = PROGRAMS[name]()
    return OpenCLKernel(generate_opencl(func)), inputs, ref


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_reference(name, rng):
    kernel, inputs, ref = _kernel(name)
    arrays = inputs(rng)
    kernel(*arrays)
    for got, want in zip(arrays, ref(*[a.copy() for a in arrays])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_time_and_source(rng):
    kernel, inputs, _ = _kernel("tiled_matmul")
    t = kernel.time(*inputs(rng), number=2, repeat=3)
    assert 0 < t.min <= t.median <= t.max < 1 and len(t.samples) == 3
    assert "__kernel void matmul" in kernel.source and "launch matmul<<<grid=(4, 4, 1)" in kernel.source


def test_device_buffers_are_used_in_place(rng):
    import pyopencl.array as cla

    kernel, inputs, ref = _kernel("guarded_threads")
    x, y = inputs(rng)
    dx, dy = cla.to_device(kernel.queue, x), cla.to_device(kernel.queue, y)
    kernel(dx, dy)
    np.testing.assert_allclose(dy.get(), ref(x, y)[1], rtol=1e-6)


def test_export_and_load_in_another_process(tmp_path, rng):
    kernel, inputs, ref = _kernel("elementwise_two_kernels")
    kernel.export(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel.cl", "launch.json"]
    a, b, d = inputs(rng)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    script = textwrap.dedent(f"""
        import numpy as np
        from tilewright.runtime.opencl import load_exported
        k = load_exported({str(tmp_path)!r})
        a, b = np.load({str(tmp_path / 'a.npy')!r}), np.load({str(tmp_path / 'b.npy')!r})
        d = np.zeros_like(a)
        k(a, b, d)
        np.save({str(tmp_path / 'd.npy')!r}, d)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "d.npy"), ref(a, b, d)[2], rtol=1e-5, atol=1e-6)


def test_wrong_arguments_are_measure_errors(rng):
    kernel, inputs, _ = _kernel("guarded_threads")
    x, y = inputs(rng)
    with pytest.raises(MeasureError, match="takes 2 arrays"):
        kernel(x)
    with pytest.raises(MeasureError, match="dtype float32"):
        kernel(x.astype("float64"), y)
    with pytest.raises(MeasureError, match="shape"):
        kernel(x[:4], y)


def test_build_failure_carries_the_log():
    from dataclasses import replace

    from tilewright.runtime.opencl import OpenCLKernel

    func, _, _ = PROGRAMS["guarded_threads"]()
    module = generate_opencl(func)
    broken = replace(module, source=module.source.replace("barrier(", "no_such_function("))
    with pytest.raises(BuildError, match="no_such_function"):
        OpenCLKernel(broken)


@pytest.mark.skipif(not has_bind(), reason="the bind schedule primitive is not there yet")
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_scheduled_program_matches_evaluate(name, rng):
    import tilewright as tw
    from tilewright.runtime.opencl import OpenCLKernel

    s, args = SCHEDULES[name]()
    kernel = OpenCLKernel(generate_opencl(tw.lower(s, args)))
    inputs = [rng.standard_normal(tuple(t.shape)).astype("float32") for t in args[:-1]]
    out = np.zeros(tuple(args[-1].shape), "float32")
    kernel(*inputs, out)
    want = tw.evaluate(args[-1], {t.name: a for t, a in zip(args[:-1], inputs)})
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
