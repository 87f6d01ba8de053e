"""`python -m tilewright.bench.int8_model`: a reduced ResNet-18, exported, quantized by ONNX Runtime,
compiled from its QDQ file, checked bit-exact against our reference and timed beside ONNX Runtime
int8 / fp32 and our fp32 build, as a user runs it."""

from __future__ import annotations

import json

import pytest

from tilewright.bench import int8_model


def test_int8_model_driver_end_to_end(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "results"
    assert int8_model.main(["--model", "resnet18", "--reduced", "--rounds", "1", "--threads", "1",
                            "--records", str(tmp_path / "r.sqlite"), "--out", str(out)]) == 0
    doc = json.loads((out / "resnet18.json").read_text())
    assert doc["qconv2d"] > 0 and doc["conv_left_float"] == 0 and doc["reduce_range"]
    assert set(doc["ms"]) == {"tilewright int8", "ORT int8 (QDQ)", "ORT fp32", "tilewright fp32 (defaults)"}
    assert all(v > 0 for v in doc["ms"].values())
    assert doc["within_one_step_of_ort"] >= 0.999
    assert "| tilewright int8 |" in (out / "resnet18.md").read_text()
