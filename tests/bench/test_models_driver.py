"""Smoke test of `tilewright bench models`: a reduced BERT layer compiled with a
few trials, checked against PyTorch eager and timed beside eager and ONNX
Runtime, through the command line as a user runs it; a wrong module is a
failure row, never a time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilewright.bench import models as bench_models
from tilewright.cli import main


def test_models_driver_end_to_end(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "results"
    rc = main(["bench", "models", "--models", "bert_layer", "--reduced", "--trials", "4", "--threads", "1",
               "--baselines", "eager,ort", "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "models.json").read_text())
    assert doc["failures"] == [] and doc["reduced_sizes"] is True
    (row,) = doc["models"]
    assert row["model"] == "bert_layer" and row["ours_s"] > 0 and row["max_abs_error"] < 1e-3
    assert set(row["baselines"]) == {"eager NCHW", "onnxruntime"}
    assert row["peak_bytes"] > 0 and row["torch_peak_bytes"] > 0 and row["tasks"] >= 5
    md = (out / "models.md").read_text()
    assert "| bert_layer | 1x16x64 |" in md and "Geomean against the fastest baseline" in md


def test_a_wrong_output_is_an_error_not_a_time():
    want = np.ones((2, 3), np.float32)
    assert bench_models.check_output("x", want + 1e-6, want) < 1e-5
    with pytest.raises(AssertionError, match="differs from PyTorch eager"):
        bench_models.check_output("x", want * 1.1, want)
