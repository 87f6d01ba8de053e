"""The isolated runner process (`python -m tilewright.runtime.runner`): reads a
JSON config line, then one request line per library; loads it, checks its
outputs against the reference, times it, answers one JSON line each. A
kernel that crashes takes only this process down."""

from __future__ import annotations

import ctypes
import json
import os
import sys

import numpy as np

from .aligned import aligned_copy

MIN_COST_S = 1e-7  # a time below the clock's resolution still ranks, and never divides by zero
FLUSHED_SAMPLES = 5  # single calls timed after a cache flush (each is noisier than a back-to-back run)


def as_values(a: np.ndarray, dtype: str | None) -> np.ndarray:
    """The numbers an output holds: bfloat16 travels as its uint16 bits (the top half of a float32)."""
    if dtype == "bfloat16" and a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def check_outputs(outs, expected, tolerances, dtypes=None) -> str | None:
    """Why the outputs differ from the reference, or None. Integers must be equal;
    floats must have NaN and infinities exactly where the reference has them (an
    infinity of the same sign), and finite values within the relative tolerance.
    `dtypes`: the outputs' tilewright dtype names (bfloat16 bits are compared as numbers)."""
    for n, (got, want, tol) in enumerate(zip(outs, expected, tolerances)):
        dtype = dtypes[n] if dtypes else None
        got, want = as_values(got, dtype), as_values(want, dtype)
        if tol is None:
            if not np.array_equal(got, want):
                return f"output {n}: {int(np.sum(got != want))} of {got.size} elements differ from the reference"
            continue
        g, w = np.atleast_1d(got.astype(np.float64)), np.atleast_1d(want.astype(np.float64))  # 0-d: a scalar
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        if (nan_g != nan_w).any():
            first = int(np.flatnonzero(nan_g != nan_w)[0])
            return (f"output {n}: non-finite NaN at {int(np.sum(nan_g & ~nan_w))} element(s) where the reference "
                    f"is a number (unwritten or overflowed) and a number at {int(np.sum(nan_w & ~nan_g))} where it "
                    f"is NaN (first at flat index {first})")
        inf_g, inf_w = np.isinf(g), np.isinf(w)
        if (inf_g != inf_w).any() or (g[inf_w] != w[inf_w]).any():
            bad = int(np.sum((inf_g != inf_w) | (inf_w & (g != w))))
            return f"output {n}: {bad} element(s) differ from the reference in where they are infinite (or its sign)"
        finite = np.isfinite(w)
        if not finite.any():
            continue
        gf, wf = g[finite], w[finite]
        scale = float(np.max(np.abs(wf)))
        err = float(np.max(np.abs(gf - wf)))
        if err > tol * scale + tol:
            return f"output {n}: max abs error {err:.3g} vs max |reference| {scale:.3g} (relative tolerance {tol})"
    return None


def unusable_reference(ref) -> str | None:
    """Why a float reference output checks nothing (no finite element), or None."""
    w = np.asarray(ref)
    if w.dtype.kind != "f" or w.size == 0 or np.isfinite(w).any():
        return None
    return f"all {w.size} of its elements are NaN or infinite ({int(np.isnan(w).sum())} NaN)"


def load_data(config: dict) -> tuple[list, list]:
    """The measurer's arrays (inputs, then outputs; on 64-byte boundaries, as a model's arena places
    them) and reference outputs, from its data directory."""
    d, n_in, n_out = config["data_dir"], config["n_inputs"], len(config["tolerances"])
    arrays = [aligned_copy(np.load(os.path.join(d, f"arg{n}.npy"))) for n in range(n_in + n_out)]
    return arrays, [np.load(os.path.join(d, f"ref{n}.npy")) for n in range(n_out)]


def timed_reply(seconds_per_call, req: dict) -> dict:
    """Time a checked kernel: `seconds_per_call(number)` runs it `number` times back to back. A kernel
    far slower than the best so far (req["cutoff"]) is timed once: that time already ranks it."""
    once = max(seconds_per_call(1), MIN_COST_S)
    if req.get("cutoff") is not None and once > req["cutoff"]:
        return {"status": "ok", "costs": [once]}
    number = max(1, int(req["min_repeat_ms"] / 1e3 / once))
    return {"status": "ok", "costs": [seconds_per_call(number) for _ in range(req["repeat"])]}


def flushed_reply(seconds_per_call, flush, req: dict) -> dict:
    """Time single calls, each after `flush()` has evicted the caches (the state a kernel of a model
    meets: its producer's output, its weights and its temporaries are not all warm)."""
    samples = []
    for _ in range(max(req["repeat"], FLUSHED_SAMPLES)):
        flush()
        samples.append(max(seconds_per_call(1), MIN_COST_S))
    return {"status": "ok", "costs": samples}


def serve(stdin, stdout) -> None:
    config = json.loads(stdin.readline())
    n_in, tolerances = config["n_inputs"], config["tolerances"]
    arrays, expected = load_data(config)
    outs = arrays[n_in:]
    ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    junk = np.empty(config["flush_bytes"] // 8 + 1) if config.get("flush_bytes") else None
    for line in stdin:
        req = json.loads(line)
        try:
            lib = ctypes.CDLL(req["library"])
        except OSError as exc:  # a damaged cache entry: delete it so the next build recompiles it
            try:
                os.unlink(req["library"])
            except OSError:
                pass
            stdout.write(json.dumps({"status": "runtime", "message": f"cannot load {req['library']} ({exc}); "
                                     "deleted from the cache, it is rebuilt when measured again"}) + "\n")
            stdout.flush()
            continue
        lib.tw_call.restype = ctypes.c_int32
        lib.tw_time.restype = ctypes.c_double
        lib.tw_time.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.tw_set_num_threads(ctypes.c_int32(config["threads"]))
        for o in outs:
            o.fill(np.nan if o.dtype.kind == "f" else 0)
        rc = lib.tw_call(ptrs)
        if rc != 0:
            reply = {"status": "runtime", "message": f"kernel returned error code {rc}"}
        else:
            bad = check_outputs(outs, expected, tolerances, config.get("dtypes"))
            if bad:
                reply = {"status": "wrong_result", "message": bad}
            else:
                per_call = lambda number, lib=lib: lib.tw_time(ptrs, number)  # noqa: E731
                reply = timed_reply(per_call, req) if junk is None else flushed_reply(
                    per_call, lambda: junk.fill(1.0), req)
        release = getattr(lib, "tw_release", None)  # the buffers a kernel keeps between calls
        if release is not None:
            release()
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
