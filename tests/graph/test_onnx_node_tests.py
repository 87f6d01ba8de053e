"""ONNX's backend node tests (every case the pinned onnx generates) through from_onnx + tw.compile:
no case may give a wrong result or a raw exception (an op we do not take is a named refusal), and
the passing count may only grow (docs/onnx_coverage.md has the table)."""

import collections
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from tilewright.bench import onnx_node_tests  # noqa: E402
from tilewright.records import Records  # noqa: E402

PASSING_AT_LEAST = 311  # docs/onnx_coverage.md at the commit that last raised it


def test_no_wrong_result_no_raw_exception():
    outcomes, bad = collections.Counter(), []
    with tempfile.TemporaryDirectory() as tmp:
        records = Records(Path(tmp) / "r.db")
        for case in onnx_node_tests.cases():
            outcome, detail = onnx_node_tests.run_case(case, records)
            outcomes[outcome] += 1
            if outcome in ("wrong", "raw"):
                bad.append(f"{case.name}: {outcome}: {detail}")
    assert not bad, "\n".join(bad)
    assert outcomes["pass"] >= PASSING_AT_LEAST, outcomes
