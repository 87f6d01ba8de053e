"""The isolated runner for device kernels (`python -m tilewright.runtime.device_runner`):
the protocol of runner.py (a JSON config line, then one request line per
artefact, one JSON answer each), for artefacts that a backend's loader module
(config "loader", e.g. tilewright.runtime.opencl) opens with
`load_exported(directory)`. A kernel that faults takes only this process, and
its device context, down: the measurer starts a fresh one."""

from __future__ import annotations

import importlib
import json
import os
import sys

import numpy as np

from .runner import check

MIN_COST_S = 1e-7


def _answer(loader, path: str, arrays: list, outs: list, expected: list, config: dict, req: dict) -> dict:
    try:
        kernel = loader(path)
        for o in outs:
            o.fill(np.nan if o.dtype.kind == "f" else 0)
        kernel(*arrays)
    except Exception as exc:  # noqa: BLE001 - any failure of a candidate is its result, never the runner's end
        return {"status": "runtime", "message": f"{type(exc).__name__}: {exc}"[:2000]}
    bad = check(outs, expected, config["tolerances"])
    if bad:
        return {"status": "wrong_result", "message": bad}
    once = max(kernel.time(*arrays, number=1, repeat=1).median, MIN_COST_S)
    if req.get("cutoff") is not None and once > req["cutoff"]:
        return {"status": "ok", "costs": [once]}  # far off the best: one time ranks it
    number = max(1, int(req["min_repeat_ms"] / 1e3 / once))
    return {"status": "ok", "costs": list(kernel.time(*arrays, number=number, repeat=req["repeat"]).samples)}


def serve(stdin, stdout) -> None:
    config = json.loads(stdin.readline())
    d, n_in = config["data_dir"], config["n_inputs"]
    arrays = [np.load(os.path.join(d, f"arg{n}.npy")) for n in range(n_in + len(config["tolerances"]))]
    expected = [np.load(os.path.join(d, f"ref{n}.npy")) for n in range(len(config["tolerances"]))]
    loader = importlib.import_module(config["loader"]).load_exported
    for line in stdin:
        req = json.loads(line)
        reply = _answer(loader, req["library"], arrays, arrays[n_in:], expected, config, req)
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
        if reply["status"] == "runtime":  # a faulted kernel may leave the device context unusable
            return


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
