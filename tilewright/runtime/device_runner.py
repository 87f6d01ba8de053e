"""The isolated runner for device kernels (`python -m tilewright.runtime.device_runner`):
the protocol of runner.py (a JSON config line, then one request line per
artefact, one JSON answer each), for artefacts that a backend's loader module
(config "loader", e.g. tilewright.runtime.opencl) opens with
`load_exported(directory)`.

A candidate that fails to load or launch (too many registers, a refused
binary, a bad launch shape) is answered as `runtime` and the runner goes on.
Only an error that poisons the device context (an illegal address, a
launch failure: `sticky` on the exception) ends the process; the answer
then says `"exit": true`, so the measurer starts a fresh runner for the next
candidate instead of writing to a dying one."""

from __future__ import annotations

import importlib
import json
import sys
import traceback

import numpy as np

from .runner import check_outputs, load_data, timed_reply


def _failure(exc: BaseException, stage: str) -> dict:
    reply = {"status": "runtime", "message": f"{stage}: {type(exc).__name__}: {exc}"[:2000]}
    if getattr(exc, "sticky", False) or not isinstance(exc, Exception):
        reply["exit"] = True
    traceback.print_exc(file=sys.stderr)  # kept where TILEWRIGHT_RUNNER_STDERR says
    return reply


def _answer(loader, path: str, arrays: list, outs: list, expected: list, config: dict, req: dict) -> dict:
    try:
        kernel = loader(path)
    except Exception as exc:  # noqa: BLE001 - a candidate's failure is its result, never the runner's end
        return _failure(exc, "load")
    try:
        for o in outs:
            o.fill(np.nan if o.dtype.kind == "f" else 0)
        kernel(*arrays)
    except Exception as exc:  # noqa: BLE001
        return _failure(exc, "run")
    bad = check_outputs(outs, expected, config["tolerances"], config.get("dtypes"))
    if bad:
        return {"status": "wrong_result", "message": bad}
    try:
        return timed_reply(lambda number: kernel.time(*arrays, number=number, repeat=1).median, req)
    except Exception as exc:  # noqa: BLE001
        return _failure(exc, "timing")


def serve(stdin, stdout) -> None:
    config = json.loads(stdin.readline())
    arrays, expected = load_data(config)
    loader = importlib.import_module(config["loader"]).load_exported
    for line in stdin:
        req = json.loads(line)
        reply = _answer(loader, req["library"], arrays, arrays[config["n_inputs"]:], expected, config, req)
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
        if reply.get("exit"):
            return


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
