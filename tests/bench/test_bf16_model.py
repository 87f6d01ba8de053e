"""`python -m tilewright.bench.bf16_model`: a reduced ResNet-18 compiled in bfloat16 and float32, checked
against the reference evaluator of the bfloat16 graph, and timed beside PyTorch's bfloat16 and float32
paths, as a user runs it."""

from __future__ import annotations

import json

import pytest

from tilewright.bench import bf16_model


def test_bf16_model_driver_end_to_end(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    out = tmp_path / "results"
    assert bf16_model.main(["--model", "resnet18", "--reduced", "--rounds", "1", "--threads", "1",
                            "--records", str(tmp_path / "r.sqlite"), "--out", str(out)]) == 0
    doc = json.loads((out / "resnet18.json").read_text())
    assert doc["bf16_layers"] > 0 and doc["fp32_layers"] == 0
    assert {"tilewright bf16", "tilewright fp32", "PyTorch bf16 eager", "PyTorch fp32 eager"} <= set(doc["ms"])
    assert all(v > 0 for v in doc["ms"].values())
    errors, largest = doc["max_abs_vs_fp32"], doc["largest_output"]
    assert 0 < errors["tilewright bf16"] < 0.05 * largest and errors["tilewright fp32"] < 1e-4 * largest
    import torch

    assert torch._inductor.config.freezing is False
    assert "| tilewright bf16 |" in (out / "resnet18.md").read_text()


def test_hf_models_keep_token_ids_integer(tmp_path, monkeypatch):
    """--model hf-<name> takes bench/transformers_models.build's model; token ids reach every side as
    integers (only float inputs are cast to bfloat16). A tiny stand-in keeps the test fast."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    from tilewright.bench import transformers_models

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.proj = torch.nn.Embedding(50, 32), torch.nn.Linear(32, 16)

        def forward(self, ids):
            return self.proj(self.embed(ids))

    torch.manual_seed(0)
    monkeypatch.setattr(transformers_models, "build", lambda name: (
        Tiny().eval(), torch.randint(0, 50, (1, 8)), torch.randint(0, 50, (1, 8))))
    out = tmp_path / "results"
    assert bf16_model.main(["--model", "hf-tiny", "--rounds", "1", "--threads", "1",
                            "--records", str(tmp_path / "r.sqlite"), "--out", str(out)]) == 0
    doc = json.loads((out / "hf-tiny.json").read_text())
    assert doc["bf16_layers"] == 1 and "PyTorch bf16 eager" in doc["ms"]
    assert doc["max_abs_vs_fp32"]["PyTorch bf16 eager"] < 0.05 * doc["largest_output"]
