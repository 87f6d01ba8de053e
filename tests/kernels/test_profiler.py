"""The light profiler measures the rules' tiles, keeps every measurement in the records under the
problem's class, answers a workload seen before from them, and tries a class's winners first."""

import pytest
from synthetic_targets import AVX2, host_runs

from tilewright.kernels import GemmProblem, profile
from tilewright.kernels.profiler import problem_class, workload_key
from tilewright.records.store import Records

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="host lacks AVX2")


def test_profile_records_and_reuses(tmp_path):
    db = Records(tmp_path / "t.db")
    p = GemmProblem(70, 48, 40)
    first = profile(p, AVX2, ("bias", "relu"), records=db, limit=5, repeat=1, min_repeat_ms=1)
    assert not first.reused and len(first.trials) == 5
    assert all(t.error_kind == "none" for t in first.trials)
    fastest = sorted(first.trials, key=lambda t: t.seconds)[:3]
    assert first.best in [t.tile for t in fastest]  # the finalists, timed again, decide
    records = db.query(workload=workload_key(p, _ep()), target=AVX2.key)
    assert len(records) == 5 + 2 * 3 and sum(r.method == "template-final" for r in records) == 6
    again = profile(p, AVX2, ("bias", "relu"), records=db, limit=5)
    assert again.reused and again.best == first.best and not again.trials
    sibling = GemmProblem(80, 40, 36)
    assert problem_class(sibling) == problem_class(p)
    other = profile(sibling, AVX2, ("bias", "relu"), records=db, limit=2, repeat=1, min_repeat_ms=1)
    assert other.trials[0].tile == first.best  # the class's winner is tried first
    assert "GFLOPS" in other.report()


def _ep():
    from tilewright.kernels import Epilogue
    return Epilogue(("bias", "relu"))


def test_a_crashing_candidate_costs_one_measurement_not_the_process():
    import numpy as np

    from tilewright.build.cc import build_library
    from tilewright.codegen.c import entry_points
    from tilewright.kernels.isolated import TemplateRunner

    crash = "\n".join(["#include <stdint.h>\n#include <time.h>\n#include <omp.h>",
                       "static int32_t boom(void **a) { volatile int *p = 0; (void)a; return *p; }",
                       *entry_points("boom(tw_args)", "boom(tw_args)")])
    lib = build_library(crash, AVX2).library
    runner = TemplateRunner([np.ones(4, np.float32)], np.ones(4), 1, 1e-3, timeout=30)
    try:
        r = runner.measure_library(str(lib))
        assert r.error_kind.value == "runtime" and "crashed" in r.error_msg
        good = profile(GemmProblem(16, 16, 16), AVX2, limit=2, repeat=1, min_repeat_ms=1)  # the search goes on
        assert all(t.error_kind == "none" for t in good.trials)
    finally:
        runner.close()
