"""The CUDA runtime's host side against the real cuda-bindings and a driver double (tests/fake_cuda:
memory is host memory, kernels are checked but never run). Each case runs in a fresh interpreter whose
LD_LIBRARY_PATH puts the double first, so this process never loads it. What these tests cannot see:
whether a kernel computes the right thing on a GPU (outputs stay as they were: the measurer reads them as
wrong results), and real timings."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_cuda import build_fake_driver, fake_env

from tilewright.build.nvcc import compiler_available

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed (pip install '.[test]')")
pytestmark = pytest.mark.skipif(compiler_available() is None, reason="no CUDA compiler (nvcc / NVRTC)")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> Path:
    return build_fake_driver(tmp_path_factory.mktemp("fake_cuda"))


def run_fake(fake_driver: Path, tmp_path: Path, script: str, prefix: str = "", **env: str) -> tuple[dict, list[str]]:
    """Run `prefix` + `script` under the driver double; it prints one JSON line last. Returns that and the
    double's log."""
    log = tmp_path / "driver.log"
    full = fake_env(fake_driver, log, tmp_path / "cache", (Path(__file__).parent,), **env)
    proc = subprocess.run([sys.executable, "-c", prefix + textwrap.dedent(script)], capture_output=True, text=True,
                          env=full, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    lines = log.read_text().splitlines() if log.exists() else []
    return json.loads(proc.stdout.strip().splitlines()[-1]), lines


MATMUL = """
import json, threading
import numpy as np
import tilewright as tw
A = tw.placeholder((64, 48), "float32", name="A")
B = tw.placeholder((48, 32), "float32", name="B")
C = tw.ops.matmul(A, B)
rng = np.random.default_rng(0)
a, b = rng.random((64, 48), dtype=np.float32), rng.random((48, 32), dtype=np.float32)
"""


def test_detection_reads_the_driver_and_a_broken_driver_is_an_error_not_no_gpu(fake_driver, tmp_path):
    got, _ = run_fake(fake_driver, tmp_path, """
        import json
        from tilewright.targets.gpu import detect_cuda
        f = detect_cuda()
        print(json.dumps({"arch": f.arch, "regs_per_block": f.regs_per_block, "grid": f.max_grid_dims}))
    """)
    assert got == {"arch": "sm_90", "regs_per_block": 65536, "grid": [2**31 - 1, 65535, 65535]}
    script = """
        import json
        from tilewright.targets.gpu import detect_cuda
        try:
            out = {"facts": repr(detect_cuda())}
        except Exception as exc:
            out = {"error": str(exc)}
        print(json.dumps(out))
    """
    assert run_fake(fake_driver, tmp_path, script, TW_FAKE_CUDA_INIT="100")[0] == {"facts": "None"}  # no device
    broken, _ = run_fake(fake_driver, tmp_path, script, TW_FAKE_CUDA_INIT="803")
    assert "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in broken["error"]
    old, _ = run_fake(fake_driver, tmp_path, script, TW_FAKE_CUDA_DRIVER_VERSION="12080")
    assert "supports CUDA 12.8, older than" in old["error"] and "cuda-bindings==12.*" in old["error"]


def test_a_kernel_loads_runs_times_behind_a_spin_kernel_and_unloads(fake_driver, tmp_path):
    got, log = run_fake(fake_driver, tmp_path, prefix=MATMUL, script="""
        k = tw.build([A, B, C], target="cuda")
        out = np.full((64, 32), 7, np.float32)
        k(a, b, out)
        t = k.time(a, b, out, number=20, repeat=2)
        name = k.module.kernels[0].name
        del k
        print(json.dumps({"untouched": bool((out == 7).all()), "name": name, "samples": len(t.samples)}))
    """)
    assert got["untouched"] and got["samples"] == 2  # the double runs no kernel
    timed = log[log.index("launch tw_spin grid=1,1,1 block=1,1,1"):]
    # one timed run: spin, start event, 20 launches, end event (the launches queued behind the spin)
    assert timed[1] == "event-record" and all(x.startswith(f"launch {got['name']} ") for x in timed[2:22])
    assert timed[22] == "event-record"
    assert sum(x == "stream-create flags=0" for x in log) == 1  # one stream, reused
    assert log[-1] == "module-unload"


def test_kernels_run_from_other_threads_and_on_the_device_asked_for(fake_driver, tmp_path):
    got, _ = run_fake(fake_driver, tmp_path, prefix=MATMUL, script="""
        from tilewright.runtime.cuda import load_exported
        k = tw.build([A, B, C], target="cuda -device=1")
        errors = []
        def call():
            try:
                k(a, b, np.zeros((64, 32), np.float32))
            except Exception as exc:
                errors.append(str(exc))
        t = threading.Thread(target=call); t.start(); t.join()
        k.export("exported")
        again = load_exported("exported")
        print(json.dumps({"errors": errors, "device": k.device.ordinal, "reloaded": again.device.ordinal,
                          "desc": json.load(open("exported/launch.json"))["device"]}))
    """, TW_FAKE_CUDA_DEVICES="2")
    assert got == {"errors": [], "device": 1, "reloaded": 1, "desc": 1}


def test_device_arrays_are_checked_for_their_device_gradients_and_stream(fake_driver, tmp_path):
    got, log = run_fake(fake_driver, tmp_path, prefix=MATMUL, script="""
        from tilewright.runtime.cuda_driver import check, cuda_device
        k = tw.build([A, B, C], target="cuda")
        other = cuda_device(1)
        other.make_current()
        ptr = int(check(other.cu, other.cu.cuMemAlloc(64 * 32 * 4), "alloc"))
        class OnDevice1:
            __cuda_array_interface__ = {"shape": (64, 32), "typestr": "<f4", "data": (ptr, False), "version": 3,
                                        "strides": None, "stream": None}
        class NeedsGrad:
            @property
            def __cuda_array_interface__(self):
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
        mine = cuda_device(0)
        mine.make_current()
        ptr0 = int(check(mine.cu, mine.cu.cuMemAlloc(64 * 32 * 4), "alloc"))
        other_stream = check(mine.cu, mine.cu.cuStreamCreate(0), "stream")
        class OnItsOwnStream:
            __cuda_array_interface__ = {"shape": (64, 32), "typestr": "<f4", "data": (ptr0, False), "version": 3,
                                        "strides": None, "stream": int(other_stream)}
        out = {}
        for name, arg in (("device", OnDevice1()), ("grad", NeedsGrad()), ("stream", OnItsOwnStream())):
            try:
                k(a, b, arg)
                out[name] = "ok"
            except tw.MeasureError as exc:
                out[name] = str(exc)
        print(json.dumps(out))
    """, TW_FAKE_CUDA_DEVICES="2")
    assert "lives on CUDA device 1" in got["device"] and ".to('cuda:0')" in got["device"]
    assert "detach()" in got["grad"]
    assert got["stream"] == "ok" and "stream-wait-event" in log  # the array's own stream is waited for


def big_block_and_small_block(target):
    """Two schedules of one matmul: 1024 threads per block, and 32."""
    import tilewright as tw

    A = tw.placeholder((64, 64), "float32", name="A")
    B = tw.placeholder((64, 64), "float32", name="B")
    C = tw.ops.matmul(A, B)
    out = []
    for threads in (1024, 32):
        s = tw.create_schedule(C)
        fused = s[C].fuse(*C.op.axis)
        bo, bi = s[C].split(fused, factor=threads)
        s[C].bind(bo, tw.thread_axis("blockIdx.x"))
        s[C].bind(bi, tw.thread_axis("threadIdx.x"))
        out.append(s)
    return [A, B, C], out


MEASURE = """
import json
import tilewright as tw
from tilewright.backends import backend_for
from tilewright.runtime.measure import Measurer
from test_cuda_fake_driver import big_block_and_small_block
target = tw.Target("cuda")
tensors, (big, small) = big_block_and_small_block(target)
with Measurer(tensors[-1:], tensors, target, backend_for(target), timeout=60) as m:
    results = m.measure([big, small, small])
print(json.dumps([[r.error_kind.value, r.error_msg] for r in results]))
"""


def test_a_block_over_the_register_budget_fails_alone_and_the_next_candidate_is_measured(fake_driver, tmp_path):
    got, _ = run_fake(fake_driver, tmp_path, MEASURE, TW_FAKE_CUDA_REGS="128")
    (kind0, msg0), (kind1, msg1), (kind2, _) = got
    assert kind0 == "runtime" and "128 registers per thread" in msg0 and "at most 512 threads" in msg0
    # the good candidates were loaded, launched and checked (the double runs nothing: their outputs are unwritten)
    assert kind1 == kind2 == "wrong_result" and "unwritten" in msg1


def test_a_faulting_kernel_takes_its_runner_down_and_the_next_candidate_gets_a_fresh_one(fake_driver, tmp_path):
    got, log = run_fake(fake_driver, tmp_path, MEASURE, TW_FAKE_CUDA_FAULT="*:4")  # the 1024-thread grid
    (kind0, msg0), (kind1, _), (kind2, _) = got
    assert kind0 == "runtime" and "CUDA_ERROR_ILLEGAL_ADDRESS" in msg0
    assert kind1 == kind2 == "wrong_result"
    assert sum(x == "stream-create flags=0" for x in log) == 2  # the second runner's context


def test_a_refused_cubin_falls_back_to_the_ptx(fake_driver, tmp_path):
    got, log = run_fake(fake_driver, tmp_path, prefix=MATMUL, script="""
        k = tw.build([A, B, C], target="cuda")
        print(json.dumps({"loaded": type(k).__name__}))
    """, TW_FAKE_CUDA_REFUSE_CUBIN="1")
    assert got == {"loaded": "CudaKernel"} and any(x.startswith("module-load") and x.endswith("ptx") for x in log)


def test_after_a_fault_every_later_call_names_the_first_failure(fake_driver, tmp_path):
    got, _ = run_fake(fake_driver, tmp_path, """
        import json
        import numpy as np
        import tilewright as tw
        from test_cuda_fake_driver import big_block_and_small_block
        (A, B, C), (_, small) = big_block_and_small_block(None)
        k = tw.build(small, [A, B, C], target="cuda")  # 4096 outputs in blocks of 32: a grid of 128
        out = []
        for _ in range(2):
            try:
                k(*[np.ones((64, 64), np.float32) for _ in range(3)])
            except tw.MeasureError as exc:
                out.append(str(exc))
        print(json.dumps(out))
    """, TW_FAKE_CUDA_FAULT="*:128")
    first, second = got
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in first
    assert "unusable in this process since an earlier kernel failed" in second and "ILLEGAL_ADDRESS" in second
