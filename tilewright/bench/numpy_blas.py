"""NumPy's BLAS (its bundled OpenBLAS) as a baseline for GEMM, GEMV and BIL, timed in a process of its own.

Why a process: OpenBLAS reads OPENBLAS_NUM_THREADS, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE once, when it
loads. A shell that forces a core type or cache size would run NumPy on kernels chosen for another CPU,
and the benchmark's own process loaded NumPy long before. The worker starts with the bench's thread
count and without those two overrides, so OpenBLAS picks its kernels for this CPU, and it reports the
kernel set it chose (`openblas_get_corename`) and its build (`openblas_get_config`).

The worker regenerates the case's inputs from the same seed (`seeded_inputs`, also what the benchmark
uses), runs the operator once into a preallocated output saved for the caller to check, then answers
requests on stdin, one JSON line each on stdout: "time" (a `median_seconds` of the call, the harness
used for every side) and "empty" (the same call on 1-element arrays: NumPy's own per-call cost)."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import TilewrightError
from ..runtime.aligned import aligned_copy, aligned_zeros

NUMPY_OPS = ("GEMM", "GEMV", "BIL")
REMOVED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # overrides of OpenBLAS's own choice for the CPU
START_TIMEOUT_S = 120.0


def seeded_inputs(shapes, dtypes, seed: int) -> list[np.ndarray]:
    """The case's inputs: standard normal values from `seed`, on 64-byte boundaries (as PyTorch's are)."""
    rng = np.random.default_rng(seed)
    return [aligned_copy(rng.standard_normal(tuple(s)).astype(d)) for s, d in zip(shapes, dtypes)]


def numpy_call(op: str, arrays: list[np.ndarray], out: np.ndarray):
    """A no-argument callable computing `op` on `arrays` into `out` through NumPy's BLAS calls."""
    if op in ("GEMM", "GEMV"):
        a, b = arrays
        return lambda: np.matmul(a, b, out=out)
    if op == "BIL":
        # y[b, o] = sum_ij x1[b, i] w[o, i, j] x2[b, j]: one GEMM against the weight as stored (a transposed
        # view, no copy), then a batched matrix-vector product; the intermediate is preallocated too
        x1, x2, w = arrays
        o, i, j = w.shape
        w2 = w.reshape(o * i, j).T
        tmp = aligned_zeros((x1.shape[0], o * i), out.dtype)
        tmp3, x1v, out3 = tmp.reshape(x1.shape[0], o, i), x1[:, :, None], out[:, :, None]

        def bilinear():
            np.matmul(x2, w2, out=tmp)
            return np.matmul(tmp3, x1v, out=out3)
        return bilinear
    raise TilewrightError(f"no NumPy baseline for suite operator {op!r} (it has {', '.join(NUMPY_OPS)})")


def _empty_arrays(op: str) -> tuple[list[np.ndarray], np.ndarray]:
    """1-element inputs and output of `op`: the smallest valid call."""
    one = np.ones((1, 1), np.float32)
    if op == "GEMM":
        return [one, one.copy()], np.zeros((1, 1), np.float32)
    if op == "GEMV":
        return [one, np.ones(1, np.float32)], np.zeros(1, np.float32)
    return [one, one.copy(), np.ones((1, 1, 1), np.float32)], np.zeros((1, 1), np.float32)


def _openblas_library() -> str | None:
    """The OpenBLAS shared library this process loaded with NumPy (from its memory map), else one
    bundled beside NumPy."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if path.startswith("/") and "openblas" in Path(path).name:
                return path
    except OSError:
        pass
    site = Path(np.__file__).resolve().parents[1]
    for pattern in ("numpy.libs/*openblas*.so*", "scipy_openblas64/lib/*openblas*.so*",
                    "scipy_openblas32/lib/*openblas*.so*"):
        found = sorted(site.glob(pattern))
        if found:
            return str(found[0])
    return None


def _symbol(lib, name: str):
    """OpenBLAS's `openblas_<name>` under the prefix/suffix a wheel's build renames it with
    (scipy_openblas64 exports e.g. scipy_openblas_get_corename64_)."""
    for sym in (f"openblas_{name}", f"scipy_openblas_{name}64_", f"scipy_openblas_{name}", f"openblas_{name}64_"):
        fn = getattr(lib, sym, None)
        if fn is not None:
            return fn
    return None


def openblas_info() -> dict:
    """Which OpenBLAS NumPy runs here: its library, core name (the kernel set chosen at load), build
    configuration and thread count; "unknown" for what the library does not export."""
    path = _openblas_library()
    info = {"library": path or "not found", "corename": "unknown", "config": "unknown", "threads": None}
    if path is None:
        return info
    lib = ctypes.CDLL(path)
    for key, name in (("corename", "get_corename"), ("config", "get_config")):
        fn = _symbol(lib, name)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            info[key] = fn().decode()
    threads = _symbol(lib, "get_num_threads")
    if threads is not None:
        threads.restype = ctypes.c_int
        info["threads"] = int(threads())
    return info


def _worker(spec: dict) -> None:
    from .timing import median_seconds

    op, repeat = spec["op"], spec["repeat"]
    arrays = seeded_inputs(spec["shapes"], spec["dtypes"], spec["seed"])
    out = aligned_zeros(tuple(spec["out_shape"]), spec["out_dtype"])
    call = numpy_call(op, arrays, out)
    call()
    np.save(spec["output"], out)
    small_in, small_out = _empty_arrays(op)
    empty = numpy_call(op, small_in, small_out)
    info = openblas_info()
    info["env_seen"] = {k: os.environ.get(k) for k in (*REMOVED_ENV, "OPENBLAS_NUM_THREADS")}
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        fn = {"time": call, "empty": empty}.get(line.strip())
        if fn is None:
            print(json.dumps({"error": f"unknown request {line.strip()!r}"}), flush=True)
            continue
        print(json.dumps({"s": median_seconds(fn, repeat=repeat)}), flush=True)


class NumpyBaseline:
    """The worker process for one case: `.info` (OpenBLAS and the environment it saw), `.output` (its
    result, to check), `.time()` and `.empty_call()` (seconds); `.close()` ends it."""

    def __init__(self, op: str, shapes, dtypes, out_shape, out_dtype: str, seed: int, threads: int,
                 repeat: int = 3):
        if op not in NUMPY_OPS:
            raise TilewrightError(f"no NumPy baseline for suite operator {op!r} (it has {', '.join(NUMPY_OPS)})")
        self._dir = tempfile.TemporaryDirectory(prefix="tw_numpy_blas_")
        output = Path(self._dir.name) / "out.npy"
        spec = {"op": op, "shapes": [list(s) for s in shapes], "dtypes": list(dtypes), "out_shape": list(out_shape),
                "out_dtype": out_dtype, "seed": seed, "repeat": repeat, "output": str(output)}
        env = {k: v for k, v in os.environ.items() if k not in REMOVED_ENV}
        env["OPENBLAS_NUM_THREADS"] = str(threads)
        self.env_removed = {k: os.environ[k] for k in REMOVED_ENV if k in os.environ}
        self._stderr = open(Path(self._dir.name) / "stderr.txt", "w+")  # a file: a full pipe would block it
        self._proc = subprocess.Popen([sys.executable, "-m", "tilewright.bench.numpy_blas", json.dumps(spec)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, env=env)
        try:
            self.info = self._reply()
            self.info["env_removed"] = self.env_removed
            self.output = np.load(output)
        except BaseException:
            self.close()
            raise

    def _reply(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait(timeout=START_TIMEOUT_S)
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:]
            raise TilewrightError(f"the NumPy baseline process exited with status {self._proc.returncode}: {tail}")
        reply = json.loads(line)
        if "error" in reply:
            raise TilewrightError(f"the NumPy baseline process: {reply['error']}")
        return reply

    def _ask(self, what: str) -> float:
        self._proc.stdin.write(what + "\n")
        self._proc.stdin.flush()
        return float(self._reply()["s"])

    def time(self) -> float:
        return self._ask("time")

    def empty_call(self) -> float:
        return self._ask("empty")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()  # the worker ends at the end of its input
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()
        self._dir.cleanup()

    def label(self) -> str:
        return f"numpy (OpenBLAS {self.info.get('corename', 'unknown')})"


if __name__ == "__main__":
    _worker(json.loads(sys.argv[1]))
