"""The reliability probe harness (benchmarks/reliability_probes.py) classifies what it observes:
one fast probe per class through its runner (each in its own subprocess), plus the classifier
on synthetic outcomes (a signal, a hang, a raw exception, a wrong result, a lost record)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import reliability_probes as rp  # noqa: E402
from reliability_probe_list import PROBES  # noqa: E402

BY_NAME = {p.name: p for p in PROBES}

# one representative probe per class, with the outcome the contract gives it today
REPRESENTATIVE = {
    "bounds/build_minus3": "clear_error",
    "aliasing/transpose_plain_inplace": "ok",
    "division/data0_floordiv_int32": "ok",
    "names/kernel_comment_close": "ok",
    "nan/check_nan_vs_number": "ok",
    "records/best_skips_wrong_result_later": "ok",
    "records/import_seed_1e30": "clear_error",
    "resources/CC_nonexistent": "clear_error",
    "api/split_factor_0": "clear_error",
    "api/target_tpu": "clear_error",
}


def test_there_are_enough_probes_in_every_class():
    counts = {}
    for p in PROBES:
        counts[p.cls] = counts.get(p.cls, 0) + 1
    assert len(PROBES) >= 150 and len(counts) == 8 and min(counts.values()) >= 10, counts


@pytest.mark.parametrize("name", sorted(REPRESENTATIVE))
def test_representative_probe(name, tmp_path):
    out = rp.run_probe(BY_NAME[name], tmp_path)
    assert out.outcome == REPRESENTATIVE[name], (out.outcome, out.message, out.stderr_tail[-1500:])


def _probe(code, expect="ok", match=None, timeout=30.0):
    return rp.Probe("harness/self", "harness", code, expect, match, timeout)


@pytest.mark.parametrize("code, expect, outcome", [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", "ok", "crash"),
    ("import time\ntime.sleep(60)", "ok", "crash"),
    ("{}['missing']", "ok", "raw_traceback"),
    ("same(np.zeros(3), np.ones(3))", "ok", "wrong_result"),
    ("raise RecordLost('1 of 2 stored')", "ok", "record_lost"),
    ("raise tw.ShapeError(\"tensor 'A' is wrong\")", "error", "clear_error"),
    ("raise tw.ShapeError('something is wrong')", "error", "unclear_error"),
    ("raise tw.ShapeError(\"tensor 'A' is wrong\")", "ok", "false_error"),
    ("x = 1", "error", "no_error"),
])
def test_the_classifier(code, expect, outcome, tmp_path):
    probe = _probe(code, expect, "'A'", timeout=3.0 if "sleep" in code else 30.0)
    assert rp.run_probe(probe, tmp_path).outcome == outcome
