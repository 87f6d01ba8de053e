"""A Module called from several threads at once: every call gets its own inputs' result (the shared
arena and kernel pointers take turns), and timing from one thread does not disturb calls of another."""

import threading

import numpy as np
from synthetic_targets import AVX2, host_runs
from test_model_templates import _mlp

from tilewright.graph.compile import compile as compile_graph


def test_calls_from_several_threads_each_get_their_own_result(rng, tmp_path):
    target = AVX2 if host_runs(AVX2) else "cpu"
    m = compile_graph(_mlp(rng, rows=192), target=target, records=tmp_path / "r.db", progress=False)
    inputs = [rng.standard_normal((192, 40)).astype(np.float32) for _ in range(8)]
    want = [m(x) for x in inputs]
    errors, results = [], {}

    def worker(k: int) -> None:
        try:
            for n in range(40):
                i = (k + n) % len(inputs)
                results[(k, n)] = (i, m(inputs[i]))
            if k == 0:
                m.time(inputs[0], number=3, repeat=2)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 160
    for i, got in results.values():
        np.testing.assert_array_equal(got, want[i])
