"""benchmarks/gpu_smoke.py: every step that is not CUDA-specific passes on OpenCL (PoCL's CPU device), and on
CUDA under the driver double (tests/fake_cuda) every step runs to its end: a step may fail only where it
checks what a kernel computed (the double runs no kernel) or where NVRTC is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fake_cuda import build_fake_driver, fake_env

from tilewright.build.nvcc import compiler_available
from tilewright.build.opencl import opencl_available

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_smoke.py"


@pytest.mark.skipif(opencl_available() is not None, reason=f"no OpenCL: {opencl_available()}")
def test_smoke_passes_on_opencl(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "opencl", "--trials", "3", "--out",
                           str(tmp_path / "smoke.txt")], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    lines = (tmp_path / "smoke.txt").read_text().splitlines()
    assert lines[-1].startswith("smoke on opencl: 9 of 9 steps OK or skipped")
    assert sum(x.startswith("OK ") for x in lines) == 6 and sum(x.startswith("SKIP") for x in lines) == 3


@pytest.mark.skipif(compiler_available() is None, reason="no CUDA compiler (nvcc / NVRTC)")
def test_smoke_runs_every_cuda_step_to_its_end_under_the_driver_double(tmp_path):
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    driver = build_fake_driver(tmp_path)
    env = fake_env(driver, tmp_path / "driver.log", tmp_path / "cache")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "cuda", "--trials", "2"], capture_output=True,
                          text=True, timeout=900, env=env, cwd=tmp_path)
    steps = [x for x in proc.stdout.splitlines() if x[:4] in ("OK  ", "FAIL", "SKIP")]
    assert len(steps) == 9 and steps[0].startswith("OK   device facts"), proc.stdout[-4000:]
    blocks = proc.stdout.split("\nFAIL ")[1:]
    for block in blocks:  # each failure's last traceback line: a check of results, never a crash of the step
        last = [x for x in block.splitlines() if x and not x.startswith(("OK", "SKIP", "     trial", "smoke"))][-1]
        assert last.startswith("AssertionError") or "NVRTC cannot be loaded" in last, block[:3000]
