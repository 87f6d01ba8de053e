"""The isolated runner for device kernels (`python -m tilewright.runtime.device_runner`):
the protocol of runner.py (a JSON config line, then one request line per
artefact, one JSON answer each), for artefacts that a backend's loader module
(config "loader", e.g. tilewright.runtime.opencl) opens with
`load_exported(directory)`. A kernel that faults takes only this process, and
its device context, down: the measurer starts a fresh one."""

from __future__ import annotations

import importlib
import json
import sys

import numpy as np

from .runner import check, load_data, timed_reply


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
    return timed_reply(lambda number: kernel.time(*arrays, number=number, repeat=1).median, req)


def serve(stdin, stdout) -> None:
    config = json.loads(stdin.readline())
    arrays, expected = load_data(config)
    loader = importlib.import_module(config["loader"]).load_exported
    for line in stdin:
        req = json.loads(line)
        reply = _answer(loader, req["library"], arrays, arrays[config["n_inputs"]:], expected, config, req)
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
        if reply["status"] == "runtime":  # a faulted kernel may leave the device context unusable
            return


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
