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
    assert set(doc["ms"]) == {"tilewright int8", "ORT int8 (same file)", "ORT fp32", "tilewright fp32 (defaults)"}
    assert all(v > 0 for v in doc["ms"].values())
    assert doc["within_one_step_of_ort"] >= 0.999
    assert "| tilewright int8 |" in (out / "resnet18.md").read_text()


def test_a_dynamically_quantized_bert_layer(tmp_path):
    """--dynamic: quantize_dynamic's DynamicQuantizeLinear + MatMulInteger file, every matmul in int8."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "results"
    assert int8_model.main(["--model", "bert_layer", "--reduced", "--dynamic", "--rounds", "1", "--threads", "1",
                            "--records", str(tmp_path / "r.sqlite"), "--out", str(out)]) == 0
    doc = json.loads((out / "bert_layer.json").read_text())
    assert doc["scheme"].startswith("dynamic") and doc["integer_kernels"] == 6 and doc["float_left"] == 0
    assert doc["within_one_step_of_ort"] >= 0.999


def test_pt2e_model_driver_end_to_end(tmp_path):
    pytest.importorskip("torchao")
    from tilewright.bench import pt2e_model

    out = tmp_path / "results"
    assert pt2e_model.main(["--model", "resnet18", "--reduced", "--rounds", "1", "--threads", "1",
                            "--records", str(tmp_path / "r.sqlite"), "--out", str(out)]) == 0
    doc = json.loads((out / "resnet18.json").read_text())
    assert doc["kernels"]["qconv2d"] > 0 and doc["kernels"]["conv2d"] == 0
    import torch

    assert torch._inductor.config.freezing is False  # the frozen compile left the global config as it was
    assert set(doc["ms"]) == {"tilewright int8", "PyTorch int8 (torch.compile, frozen)", "PyTorch fp32 eager",
                              "tilewright fp32 (defaults)"}


def test_repeat_reports_median_and_range_of_each_sides_speedup():
    from tilewright.bench.repeat import summarize

    docs = [{"ms": {"ours": 1.0, "theirs": r}, "provenance": {"commit": "abc"}} for r in (1.1, 1.5, 1.2)]
    text = summarize(docs)
    assert "| theirs | 1.20 | 1.20x | 1.10-1.50 |" in text and "3 processes" in text
