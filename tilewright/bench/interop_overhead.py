"""What torch tensors cost a `Module` call over NumPy arrays: one small compiled model (two inputs, one
elementwise kernel, so the call path dominates) called with NumPy arrays, with CPU torch tensors (read
through `.numpy()` without a copy, returned through `torch.from_numpy`) and with DLPack capsules'
owners, in alternating rounds, median of each; the difference is the interop's cost per call.

    python -m tilewright.bench.interop_overhead [--size 4096] [--rounds 7] [--out DIR]"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np

from .timing import median_seconds


def _module(size: int):
    from ..graph.compile import compile as compile_model
    from ..graph.ir import Graph, Node, TensorType
    from ..records import Records

    t = TensorType((size,), "float32")
    graph = Graph([Node("add", ("a", "b"), ("y",), name="y")], ["a", "b"], ["y"], {"a": t, "b": t, "y": t}, {},
                  "interop")
    a = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        module = compile_model(graph, [a, a], trials=0, records=Records(Path(tmp) / "r.db"), progress=False)
    return module, a


def measure(size: int = 4096, rounds: int = 7) -> dict:
    import torch

    module, a = _module(size)
    b = a.copy()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    got = module(ta, tb)
    if not isinstance(got, torch.Tensor) or not np.array_equal(got.numpy(), a + b):
        raise AssertionError("the torch call did not return the sum as a tensor")
    sides = {"numpy": lambda: module(a, b), "torch": lambda: module(ta, tb)}
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            times[name].append(median_seconds(fn, repeat=5))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"size": size, "rounds": rounds, "median_us": {k: v * 1e6 for k, v in med.items()},
            "torch_over_numpy_us": (med["torch"] - med["numpy"]) * 1e6,
            "per_round_us": {k: [t * 1e6 for t in v] for k, v in times.items()}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from .provenance import provenance

    result = {**measure(args.size, args.rounds), "provenance": provenance(threads=2)}
    print(f"numpy {result['median_us']['numpy']:.2f} us, torch {result['median_us']['torch']:.2f} us per call: "
          f"torch tensors add {result['torch_over_numpy_us']:.2f} us")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "interop_overhead.json").write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
