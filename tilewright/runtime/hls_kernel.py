"""An HLS design run by C simulation: the generated project compiled with the host C++ compiler
against `tw_hls.h` (our stand-ins for `hls::stream` and `ap_int`) and called on NumPy arrays, as a
vendor tool's csim runs it. Its speed is the model's (`stats()`: estimated cycles, resources and
initiation intervals, no synthesis behind them); a stream read while empty or left holding data is
a fault, reported as an error, never a result."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ..build.cc import discard
from ..codegen.hls import HLSProject, render_hls
from ..config import cache_dir
from ..errors import BuildError, MeasureError, ShapeError
from ..lower.hls_design import HLSDesign
from ..lower.hls_form import HLSForm
from .hls_des import simulate
from .hls_model import estimate

HEADER = Path(__file__).with_name("tw_hls.h")
CXX_FLAGS = ("-O1", "-std=c++14", "-fPIC", "-shared", "-Wall", "-Wno-unused-variable", "-Wno-unknown-pragmas")


def _wrapper(project: HLSProject, form: HLSForm) -> str:
    a, b = (o.name for o in form.operands)
    return "\n".join([f'#include "{project.name}.h"', "long long tw_csim_faults = 0;",
                      f'extern "C" long long tw_csim_run(const data_t *{a}, const data_t *{b}, out_t *y) {{',
                      "  tw_csim_faults = 0;", f"  {project.name}({a}, {b}, y);", "  return tw_csim_faults;", "}", ""])


def compile_csim(project: HLSProject, form: HLSForm, timeout: float = 120.0) -> tuple[Path, float, bool]:
    """(shared library, seconds the compiler took, cached) of the project's kernel plus a C entry point."""
    cxx = os.environ.get("TILEWRIGHT_CXX") or os.environ.get("CXX") or "g++"
    wrapper = _wrapper(project, form)
    header = HEADER.read_text()
    key = hashlib.sha256("\0".join([project.files[f"{project.name}.h"], project.kernel, wrapper, header,
                                    " ".join(CXX_FLAGS), cxx]).encode()).hexdigest()[:32]
    out_dir = cache_dir() / "hls"
    lib = out_dir / f"{key}.so"
    if lib.exists():
        return lib, 0.0, True
    work = Path(tempfile.mkdtemp(prefix="tw_hls_"))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in project.files.items():
            (work / name).write_text(text)
        (work / "tw_hls.h").write_text(header)
        (work / "csim_entry.cpp").write_text(wrapper)
        tmp = work / "kernel.so"
        cmd = [cxx, *CXX_FLAGS, str(work / f"{project.name}.cpp"), str(work / "csim_entry.cpp"), "-o", str(tmp)]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=work)
        except subprocess.TimeoutExpired:
            raise BuildError(f"HLS C simulation: the C++ compiler timed out after {timeout:.0f}s") from None
        except OSError as exc:
            raise BuildError(f"HLS C simulation needs a C++ compiler ({cxx!r}: {exc}); set TILEWRIGHT_CXX or CXX") \
                from None
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise BuildError(f"HLS C simulation: compiling the generated project failed ({' '.join(cmd)}):\n"
                             f"{proc.stderr.strip()[:4000]}")
        os.replace(tmp, lib)
    except OSError as exc:
        raise BuildError(f"HLS C simulation: cannot write {out_dir} ({exc})") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lib, took, False


class HLSKernel:
    """Call with NumPy arrays: the two inputs, then the output (as the te names them)."""

    def __init__(self, form: HLSForm, design: HLSDesign, device, name: str = "kernel"):
        self.form, self.design, self.device, self.name = form, design, device, name
        self.estimate = estimate(form, design, device)
        self.project = render_hls(form, design, device, name)
        self.source = self.project.kernel
        path, self.compile_seconds, self.cached = compile_csim(self.project, form)
        try:
            self._lib = ctypes.CDLL(str(path))
        except OSError as exc:
            discard(path)
            raise BuildError(f"HLS C simulation: cannot load {path} ({exc})") from None
        self._fn = self._lib.tw_csim_run
        self._fn.restype = ctypes.c_longlong
        self.arg_names = [o.name for o in form.operands] + [form.output.name]

    def __call__(self, *arrays):
        if len(arrays) != 3:
            raise ShapeError(f"HLS kernel '{self.name}' takes ({', '.join(self.arg_names)}), got {len(arrays)} arrays")
        tensors = [o.source for o in self.form.operands] + [self.form.output]
        args = []
        for arr, t in zip(arrays, tensors):
            if not isinstance(arr, np.ndarray) or tuple(arr.shape) != tuple(t.shape) or arr.dtype != t.dtype.name:
                got = f"{arr.dtype} {list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise ShapeError(f"HLS kernel '{self.name}': '{t.name}' must be a {t.dtype} array of shape "
                                 f"{list(t.shape)}, got {got}")
            args.append(np.ascontiguousarray(arr))
        out = args[2]
        faults = self._fn(*(ctypes.c_void_p(x.ctypes.data) for x in args))
        if faults:
            raise MeasureError(f"HLS kernel '{self.name}' faulted in C simulation: {faults} stream reads while "
                               f"empty or streams left holding data (design {self.design})")
        if out is not arrays[2]:
            np.copyto(arrays[2], out)
        return arrays[2]

    def stats(self) -> dict:
        """The model's estimates (no synthesis): cycles, GOPS at the device clock, II and what limits it,
        DSP / BRAM36 / LUT use; and the event-level simulation's cycles beside the closed form's."""
        return {"design": str(self.design), "device": self.device.name, **self.estimate.as_dict(),
                "simulated_cycles": simulate(self.form, self.design, self.device),
                "accumulator": self.project.acc_type}

    def export(self, directory, data=None) -> Path:
        """Write the project (kernel, header, testbench, Tcl script, our tw_hls.h) to `directory`; with
        `data` = (a, b, expected output) arrays, also the testbench's a.bin, b.bin and y.bin."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for name, text in self.project.files.items():
            (out / name).write_text(text)
        (out / "tw_hls.h").write_text(HEADER.read_text())
        if data is not None:
            tensors = [o.source for o in self.form.operands] + [self.form.output]
            for fname, arr, t in zip(("a.bin", "b.bin", "y.bin"), data, tensors):
                np.ascontiguousarray(arr, dtype=t.dtype.name).tofile(out / fname)
        return out


__all__ = ["HLSKernel", "compile_csim"]
