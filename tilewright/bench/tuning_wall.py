"""Tuning wall time of a whole model from nothing (`python -m tilewright.bench.tuning_wall`): `tw.compile` of an
in-tree model with a trial budget, empty records and an empty compiled-kernel cache (a fresh cache directory,
so no kernel comes from an earlier run), then the compiled model timed. Prints one JSON line: wall seconds,
trials measured, the model's median latency. Two checkouts run the same command to compare their tuning paths
like with like (same seed, same budget, same host, one after the other)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--trials", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout", default="NCHWc", help="fixed, so both sides tune the same task set")
    ap.add_argument("--ray", action="store_true", help="build and run on a local Ray cluster (tw.RayExecutor)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tw-wall-") as tmp:
        os.environ["TILEWRIGHT_CACHE_DIR"] = tmp  # before any kernel is built: nothing cached
        import numpy as np

        import tilewright as tw
        from tilewright import models
        from tilewright.bench.timing import median_seconds

        spec = models.MODELS[a.model]
        net = spec.build()
        x = spec.example_input(seed=a.seed)
        executor = tw.RayExecutor() if a.ray else None
        start = time.perf_counter()
        try:
            module = tw.compile(net, [x], trials=a.trials, records=os.path.join(tmp, "records.db"), seed=a.seed,
                                layout=a.layout, progress=False, executor=executor)
        finally:
            if executor is not None:
                executor.shutdown()
        wall = time.perf_counter() - start
        xs = [np.ascontiguousarray(x.numpy())]
        latency = median_seconds(lambda: module(*xs), repeat=15)
        print(json.dumps({"model": a.model, "trials": a.trials, "seed": a.seed, "layout": a.layout, "ray": a.ray,
                          "tune_wall_s": round(wall, 2), "new_trials": module.tuning.get("trials"),
                          "phases_s": {k: round(v, 2) for k, v in module.tuning.items()
                                       if k.endswith("_s") and not k.startswith("estimated")}
                          | {"tune_tasks": round(module.tuning.get("seconds", 0.0), 2)},
                          "latency_ms": round(latency * 1e3, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
