"""ONNX's backend node tests (every case the pinned onnx generates) through from_onnx + tw.compile:
no case may give a wrong result or a raw exception (an op we do not take is a named refusal), and
the passing count may only grow (docs/onnx_coverage.md has the table)."""

import collections
import tempfile
from pathlib import Path

import pytest
from synthetic_targets import AVX2, host_runs

pytest.importorskip("onnx")

from tilewright.bench import onnx_node_tests  # noqa: E402
from tilewright.records import Records  # noqa: E402

PASSING_AT_LEAST = 1497  # on the synthetic AVX2 target; docs/onnx_coverage.md has the host's run


def test_no_wrong_result_no_raw_exception():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    outcomes, bad = collections.Counter(), []
    with tempfile.TemporaryDirectory() as tmp:
        records = Records(Path(tmp) / "r.db")
        for case in onnx_node_tests.cases():
            outcome, detail = onnx_node_tests.run_case(case, records, AVX2)
            outcomes[outcome] += 1
            if outcome in ("wrong", "raw"):
                bad.append(f"{case.name}: {outcome}: {detail}")
    assert not bad, "\n".join(bad)
    assert outcomes["pass"] >= PASSING_AT_LEAST, outcomes
