"""Smoke test of `tilewright bench flextensor`: two tiny suite cases end to end
(tune a few trials, check against the reference, time beside PyTorch, write
JSON/Markdown), through the command line as a user runs it."""

from __future__ import annotations

import json

import pytest

from tilewright.bench.flextensor import geomean, tables
from tilewright.cli import main


def test_driver_end_to_end(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "results"
    rc = main(["bench", "flextensor", "--ops", "GEMM,GEMV", "--cases", "gemm_32,gemv_128", "--trials", "4",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "flextensor.json").read_text())
    assert [(c["op"], c["case"]) for c in doc["cases"]] == [("GEMM", "gemm_32"), ("GEMV", "gemv_128")]
    for c in doc["cases"]:
        assert c["max_rel_error"] <= 1e-4 and c["tilewright_s"] > 0 and c["torch_s"] > 0 and c["numpy_s"] > 0
        assert c["tuned_trials"] == 4
    assert doc["failures"] == []
    md = (out / "flextensor.md").read_text()
    assert "| GEMM | 1 |" in md and "geometric-mean speedup over PyTorch" in md

    # a second run reuses the records instead of tuning again
    rc = main(["bench", "flextensor", "--ops", "GEMM", "--cases", "gemm_32", "--trials", "4", "--reuse",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    assert json.loads((out / "flextensor.json").read_text())["cases"][0]["tuned_trials"] == 0


def test_unknown_operator_is_a_clear_error(tmp_path, capsys):
    rc = main(["bench", "flextensor", "--ops", "CONV9", "--out", str(tmp_path)])
    assert rc == 2
    assert "unknown suite operator 'CONV9'" in capsys.readouterr().err


def test_geomean_and_table_goals():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([]) is None

    class Row:
        op, case, flops, bytes, tilewright_s, torch_s, torch_layout = "DEP", "mbv2_dw_0", 2e9, 1e6, 1e-3, 1.5e-3, "NCHW"
        speedup = 1.5

    text = "\n".join(tables([Row()], peak=100.0))
    assert "1.50x" in text and "goal >= 2.0: NOT met" in text
