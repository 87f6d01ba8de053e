"""Smoke test of `tilewright bench flextensor`: two tiny suite cases end to end
(tune a few trials, check against the reference, time beside PyTorch, write
JSON/Markdown), through the command line as a user runs it."""

from __future__ import annotations

import json

import pytest

from tilewright.bench.report import _tuning, geomean, network_row, summary, tables, tuning_spread
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
        speedup, count, default_s, method, direct_s = 1.5, 1, 1.2e-3, "direct", None
        tuning_s, winograd_tuning_s, tuned_trials = 95.4, None, 100

    text = "\n".join(tables([Row()], peak=100.0))
    assert "1.50x" in text and "goal >= 2.0: NOT met" in text
    assert "within 1.3x of the tuned kernel: 1/1" in text
    assert text.splitlines()[4].endswith("| 1.50x | 95 |")  # the case's search seconds


def test_tuning_seconds_add_the_winograd_layers_and_say_when_records_served():
    class Row:
        tuned_trials = 100
        tuning_s, winograd_tuning_s = 60.0, 40.0

    reused = Row()
    reused.tuned_trials, reused.tuning_s, reused.winograd_tuning_s = 0, None, None
    fast = Row()
    fast.tuning_s, fast.winograd_tuning_s = 30.0, None
    assert _tuning(Row()) == "60 (+40)" and _tuning(reused) == "reused"
    assert tuning_spread([Row(), fast, reused]) == "30 / 100"  # the lower median and the max of 100 and 30 s


def _layer(case, ours, torch, count, default):
    class Row:
        op, flops, bytes, torch_layout, method, direct_s = "R50", 1e9, 1e6, "NCHW", "direct", None
        tuning_s, winograd_tuning_s, tuned_trials = None, None, 0
    r = Row()
    r.case, r.tilewright_s, r.torch_s, r.count, r.default_s = case, ours, torch, count, default
    r.speedup = torch / ours
    return r


def test_network_row_weights_layers_by_their_count():
    rows = [_layer("a", 1e-3, 2e-3, 3, 1.1e-3), _layer("b", 4e-3, 2e-3, 1, 8e-3)]
    ours, torch = network_row(rows)
    assert ours == pytest.approx(7e-3) and torch == pytest.approx(8e-3)
    text = "\n".join(summary(rows))
    assert "| R50 | 2 | 1.00x | >= 1.1 | 1.14x | 1/2 |" in text
    assert network_row([_layer("a", 1e-3, 2e-3, 1, None)]) is None  # not a network: every count 1


def test_resnet50_driver_runs_one_layer(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "results"
    rc = main(["bench", "resnet50", "--cases", "l4_expand", "--trials", "2",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "resnet50.json").read_text())
    (case,) = doc["cases"]
    assert case["op"] == "R50" and case["case"] == "l4_expand" and case["count"] == 3
    assert case["default_s"] > 0 and case["torch_s"] > 0 and doc["rounds"] >= 3
    assert "ResNet-50" in (out / "resnet50.md").read_text()
