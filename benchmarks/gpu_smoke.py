"""Exercise the whole GPU path once, step by step, and say OK or FAIL for each (with the traceback),
carrying on after a failure: meant for the first minutes on a lent GPU (under 2 minutes there), and
run in CI on OpenCL (PoCL's CPU device) for every step that is not CUDA-specific.

Run: python benchmarks/gpu_smoke.py [--target cuda|opencl] [--trials 6] [--out smoke.txt]
Exit status: the number of failed steps (0: all OK). Steps that do not apply to the target are SKIP."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.runtime.measure import ErrorKind, Measurer


class Skip(Exception):
    """The step does not apply here (the reason is printed)."""


def _matmul(n=96, m=80, k=64, dtype="float32"):
    A = tw.placeholder((n, k), dtype, name="A")
    B = tw.placeholder((k, m), dtype, name="B")
    return [A, B, tw.ops.matmul(A, B)]


def _conv():
    x = tw.placeholder((1, 16, 14, 14), "float32", name="x")
    w = tw.placeholder((32, 16, 3, 3), "float32", name="w")
    return [x, w, tw.ops.relu(tw.ops.conv2d(x, w, padding=1))]


def _multiply_add(dtype):
    A = tw.placeholder((64, 128), dtype, name="A")
    B = tw.placeholder((64, 128), dtype, name="B")
    return [A, B, tw.compute((64, 128), lambda i, j: A[i, j] * B[i, j] + A[i, j], name="C")]


def _inputs(tensors, rng):
    ins = [rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]
    return ins, np.zeros(tensors[-1].shape, tensors[-1].dtype.name)


def _check(tensors, ins, out, tol=1e-4):
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = float(np.max(np.abs(out.astype(np.float64) - want))) / max(1.0, float(np.max(np.abs(want))))
    if not err <= tol:
        raise AssertionError(f"max relative error {err:.3g} over {tol}")
    return err


class Smoke:
    def __init__(self, target: str, trials: int, out):
        self.kind, self.trials, self.out = target, trials, out
        self.target = None
        self.rng = np.random.default_rng(0)
        self.results: list[tuple[str, str]] = []

    def say(self, text: str) -> None:
        print(text, flush=True)
        if self.out:
            self.out.write(text + "\n")
            self.out.flush()

    def step(self, name: str, fn) -> None:
        start = time.perf_counter()
        try:
            detail = fn()
            status = "OK"
        except Skip as why:
            status, detail = "SKIP", str(why)
        except Exception:  # noqa: BLE001 - every failure is reported and the next step runs
            status, detail = "FAIL", traceback.format_exc()
        self.results.append((name, status))
        self.say(f"{status:4} {name} ({time.perf_counter() - start:.1f} s){': ' + str(detail) if detail else ''}")

    def cuda_only(self) -> None:
        if self.kind != "cuda":
            raise Skip("CUDA only")

    # ---- steps ----
    def facts(self):
        self.target = tw.Target(self.kind)
        g = self.target.gpu
        return (f"{g.name} {g.arch}, {g.sm_count} SMs, {g.max_threads_per_block} threads/block, "
                f"{g.shared_mem_per_block} B shared, regs/block {g.regs_per_block}, driver {g.driver_version}, "
                f"compiler {g.compiler_version}")

    def default_schedules(self):
        lines = []
        for make in (_matmul, _conv):
            tensors = make()
            kernel = tw.build(tensors, target=self.target)
            ins, out = _inputs(tensors, self.rng)
            kernel(*ins, out)
            lines.append(f"{tensors[-1].name} err {_check(tensors, ins, out):.2g}")
            res = getattr(kernel, "resources", None)
            if res:
                lines.append(f"regs {[r['registers'] for r in res]} local {[r['local_bytes'] for r in res]}")
        return "; ".join(lines)

    def _module(self, tensors):
        backend = backend_for(self.target)
        s = backend.default_schedule(tensors[-1:], self.target)
        return backend.render(backend.lower(s, tensors, "smoke", self.target), self.target)

    def ptx_jit(self):
        self.cuda_only()
        from tilewright.build.nvcc import compile_cuda
        from tilewright.runtime.cuda import CudaKernel

        tensors = _matmul()
        module = self._module(tensors)
        other = "sm_80" if self.target.gpu.arch != "sm_80" else "sm_90"
        kernel = CudaKernel(module, compile_cuda(module.source, other), self.target.gpu.device)  # its PTX is JITed
        ins, out = _inputs(tensors, self.rng)
        kernel(*ins, out)
        return f"{other} PTX on {self.target.gpu.arch}: err {_check(tensors, ins, out):.2g}"

    def nvrtc(self):
        self.cuda_only()
        from tilewright.build.nvcc import compile_cuda
        from tilewright.runtime.cuda import CudaKernel

        lines = []
        for dtype, tol in (("float32", 1e-4), ("float16", 2e-2)):
            tensors = _multiply_add(dtype)
            module = self._module(tensors)
            kernel = CudaKernel(module, compile_cuda(module.source, self.target.gpu.arch, compiler="nvrtc"),
                                self.target.gpu.device)
            ins, out = _inputs(tensors, self.rng)
            kernel(*ins, out)
            lines.append(f"{dtype} err {_check(tensors, ins, out, tol):.2g}")
        return "; ".join(lines)

    def timing(self):
        tensors = _matmul(512, 512, 512)
        kernel = tw.build(tensors, target=self.target)
        ins, out = _inputs(tensors, self.rng)
        t = kernel.time(*ins, out, number=10, repeat=3)
        lines = [f"512^3 matmul {t.median * 1e6:.1f} us ({2 * 512**3 / t.median / 1e9:.0f} GFLOP/s, NumPy arrays)"]
        small = [tw.placeholder((4096,), "float32", name="x")]
        small.append(tw.compute((4096,), lambda i: small[0][i] * 2.0, name="y"))
        tiny = tw.build(small, target=self.target)
        x, y = _inputs(small, self.rng)
        alone = tiny.time(x[0], y, number=1, repeat=5).median
        queued = tiny.time(x[0], y, number=200, repeat=5).median
        lines.append(f"4096-element kernel: {alone * 1e6:.2f} us alone, {queued * 1e6:.2f} us per call back to back")
        return "; ".join(lines)

    def torch_tensors(self):
        self.cuda_only()
        try:
            import torch
        except ImportError:
            raise Skip("torch is not installed") from None
        if not torch.cuda.is_available():
            raise Skip("torch sees no CUDA device")
        tensors = _matmul(512, 512, 512)
        kernel = tw.build(tensors, target=self.target)
        ins, out = _inputs(tensors, self.rng)
        dev = [torch.from_numpy(a).cuda() for a in ins] + [torch.zeros(out.shape, device="cuda")]
        kernel(*dev)
        torch.cuda.synchronize()
        err = _check(tensors, ins, dev[-1].cpu().numpy())
        t = kernel.time(*dev, number=10, repeat=3).median
        return f"in place on torch tensors: err {err:.2g}, {t * 1e6:.1f} us"

    def export_roundtrip(self):
        tensors = _conv()
        kernel = tw.build(tensors, target=self.target)
        with tempfile.TemporaryDirectory() as d:
            kernel.export(d)
            loader = __import__(f"tilewright.runtime.{self.kind}", fromlist=["load_exported"]).load_exported
            again = loader(d)
            ins, out = _inputs(tensors, self.rng)
            again(*ins, out)
            return f"{sorted(p.name for p in Path(d).iterdir())}, err {_check(tensors, ins, out):.2g}"

    def runner(self):
        """The tuner's artefacts measured in the isolated runner: a good candidate, a candidate with a launch the
        driver refuses, a kernel that faults, each followed by a good one."""
        tensors = _matmul()
        backend = backend_for(self.target)
        good = backend.default_schedule(tensors[-1:], self.target)

        def rewrite(module):  # a block of 4096 threads: refused at launch, the context stays usable
            k = module.kernels[0]
            return replace(module, kernels=(replace(k, block=(4096, 1, 1)),) + module.kernels[1:])

        def fault(module):  # writes far past the output: an illegal address, the runner must exit
            return replace(module, source=module.source.replace("matmul[", "matmul[2000000000 + ", 1))

        lines = []
        with Measurer(tensors[-1:], tensors, self.target, backend, timeout=60) as m:
            for name, change in (("good", None), ("refused launch", rewrite), ("fault", fault)):
                m.backend = backend if change is None else replace(
                    backend, render=lambda f, t, c=change: c(backend.render(f, t)))
                first, = m.measure([good])
                m.backend = backend
                then, = m.measure([good])
                lines.append(f"{name}: {first.error_kind.value} then {then.error_kind.value}")
                if not then.ok:
                    raise AssertionError(f"a good candidate after a '{name}' one failed: {then.error_msg}")
                if change is not None and first.ok:
                    raise AssertionError(f"the '{name}' candidate was measured as OK")
                if change is None and first.error_kind is not ErrorKind.NONE:
                    raise AssertionError(f"the good candidate failed: {first.error_msg}")
        return "; ".join(lines)

    def tuning(self):
        tensors = _matmul(256, 256, 256)
        with tempfile.TemporaryDirectory() as d:
            best = tw.tune(tensors, target=self.target, trials=self.trials, records=str(Path(d) / "smoke.db"),
                           progress=False)
        for t in best.history:
            cost = f"{t.cost * 1e6:.1f} us" if np.isfinite(t.cost) else t.error_kind
            self.say(f"     trial {t.index}: {cost} {t.error_msg[:160]}")
        if not np.isfinite(best.best_cost):
            raise AssertionError(f"no trial measured: {best.errors}")
        return f"best {best.best_cost * 1e6:.1f} us, default {best.default_cost * 1e6:.1f} us, errors {best.errors}"

    def run(self) -> int:
        self.step("device facts", self.facts)
        if self.target is None:
            return 1
        for name, fn in (("default schedules built, run and checked", self.default_schedules),
                         ("PTX JIT (binary for another arch)", self.ptx_jit),
                         ("NVRTC (fp32, fp16 header)", self.nvrtc),
                         ("timing (NumPy arrays; a short kernel alone and back to back)", self.timing),
                         ("torch CUDA tensors in place", self.torch_tensors),
                         ("export and load round trip", self.export_roundtrip),
                         ("tuner's artefacts through the isolated runner", self.runner),
                         (f"{self.trials} tuning trials", self.tuning)):
            self.step(name, fn)
        failed = [n for n, s in self.results if s == "FAIL"]
        self.say(f"smoke on {self.kind}: {len(self.results) - len(failed)} of {len(self.results)} steps OK or "
                 f"skipped{'; FAILED: ' + ', '.join(failed) if failed else ''}")
        return len(failed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="cuda", choices=("cuda", "opencl"))
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--out", help="also write the lines to this file")
    args = p.parse_args(argv)
    out = open(args.out, "w") if args.out else None  # noqa: SIM115 - closed below
    try:
        return Smoke(args.target, args.trials, out).run()
    finally:
        if out:
            out.close()


if __name__ == "__main__":
    sys.exit(main())
