"""`tilewright bench models`: a reduced BERT layer compiled with a few trials,
checked against PyTorch eager on a held-out input and timed beside labelled
eager and ONNX Runtime variants, through the command line as a user runs it.
The faster tests stand a small fake in for tw.compile (eager PyTorch, or a
module that memorised its compile input) to test the driver's bookkeeping:
the held-out check, --no-winograd, variant labels, failures kept as notes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tilewright.bench import models as bench_models
from tilewright.cli import main


def test_models_driver_end_to_end(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "results"
    rc = main(["bench", "models", "--models", "bert_layer", "--reduced", "--trials", "4", "--threads", "1",
               "--baselines", "eager,ort", "--rounds", "1", "--records", str(tmp_path / "records.db"),
               "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "models.json").read_text())
    assert doc["failures"] == [] and doc["reduced_sizes"] is True
    assert doc["provenance"]["commit"] and doc["provenance"]["versions"]["onnxruntime"]
    (row,) = doc["models"]
    assert row["model"] == "bert_layer" and row["ours_s"] > 0 and row["max_rel_error"] < row["tolerance"]
    assert row["check_seed"] != row["compile_seed"] and row["winograd_convs"] == 0
    ort = {"onnxruntime torchscript opset17", "onnxruntime dynamo opset18"}
    optimized = {f"{n} bert-optimizer" for n in ort}
    assert set(row["variants"]) == {"eager NCHW", "eager channels_last"} | ort | optimized
    assert "4-d" in row["notes"]["eager channels_last"]  # asked for, not run, and why
    for name in optimized:  # the optimizer ran, or the reason it could not is recorded
        v = row["variants"][name]
        assert v["seconds"] or v["note"]
        if v["seconds"]:
            assert "Attention" in v["note"] and set(v["extra"]["fused_ops"]) >= {"Attention", "SkipLayerNormalization"}
    timed = {n: v for n, v in row["variants"].items() if v["seconds"]}
    assert "eager NCHW" in timed and all(v["setup_s"] is not None and v["max_rel_error"] < 1e-3 for v in timed.values())
    assert row["fastest"] == min(timed, key=lambda n: timed[n]["seconds"])
    assert row["speedup"] == pytest.approx(timed[row["fastest"]]["seconds"] / row["ours_s"])
    assert set(row["speedup_by_family"]) == {"eager", "torch.compile", "onnxruntime"}
    assert row["speedup_by_family"]["torch.compile"] is None  # not asked for
    assert row["peak_bytes"] > 0 and row["torch_peak_bytes"] > 0 and row["tasks"] >= 5
    md = (out / "models.md").read_text()
    assert "| bert_layer | 1x16x64 |" in md and "Geomean against the fastest baseline" in md
    assert "onnxruntime ms (variant)" in md and "| bert_layer | onnxruntime dynamo opset18 |" in md
    assert "Commit `" in md and "held-out input" in md


def test_a_wrong_output_is_an_error_not_a_time():
    want = np.ones((2, 3), np.float32)
    assert bench_models.check_output("x", want + 1e-6, want) < 1e-5
    with pytest.raises(AssertionError, match="differs from PyTorch eager"):
        bench_models.check_output("x", want * 1.1, want)
    with pytest.raises(AssertionError, match="tolerance 0.0001"):
        bench_models.check_output("x", want * (1 + 5e-4), want, tol=1e-4)
    assert bench_models.relative_error(want * 2, want) == pytest.approx(1.0)


class FakeModule:
    """Stands in for tw.compile's Module: eager PyTorch, or the output it memorised."""

    def __init__(self, model, memorised=None):
        self.model, self.memorised = model, memorised
        self.layout, self.tasks, self.tuning = "NCHW", [], {"trials": 0, "reused": 0}
        self.graph = SimpleNamespace(nodes=())
        self.constants, self.peak_bytes = {}, 0

    def __call__(self, x):
        import torch

        if self.memorised is not None:
            return self.memorised
        with torch.inference_mode():
            return self.model(torch.from_numpy(x)).numpy()


@pytest.fixture
def fake_compile(monkeypatch):
    """tw.compile replaced; returns the list of keyword arguments each call got. Set `.memorise`
    to make the module return its compile input's output whatever it is given."""
    torch = pytest.importorskip("torch")
    calls = _Calls()

    def compile(model, example_inputs, **kw):  # noqa: A001 (as tw.compile)
        calls.append(kw)
        memorised = None
        if calls.memorise:
            with torch.inference_mode():
                memorised = model(example_inputs[0]).numpy()
        return FakeModule(model, memorised)
    monkeypatch.setattr("tilewright.graph.compile.compile", compile)
    return calls


class _Calls(list):
    memorise = False


def _bench(tmp_path, *flags) -> dict:
    out = tmp_path / "results"
    rc = main(["bench", "models", "--reduced", "--trials", "0", "--threads", "1", "--rounds", "1",
               "--records", str(tmp_path / "records.db"), "--out", str(out), *flags])
    doc = json.loads((out / "models.json").read_text())
    doc["rc"] = rc
    return doc


def test_held_out_input_catches_a_module_that_memorised_its_compile_input(tmp_path, fake_compile):
    fake_compile.memorise = True
    doc = _bench(tmp_path, "--models", "resnet18", "--baselines", "")
    assert doc["rc"] == 1 and doc["models"] == []
    (failure,) = doc["failures"]
    assert "differs from PyTorch eager" in failure["error"]


def test_an_honest_module_passes_the_held_out_check(tmp_path, fake_compile):
    doc = _bench(tmp_path, "--models", "resnet18", "--baselines", "eager")
    assert doc["rc"] == 0
    (row,) = doc["models"]
    assert (row["compile_seed"], row["check_seed"]) == (0, 1) and row["max_rel_error"] == 0
    assert set(row["baselines"]) == {"eager NCHW", "eager channels_last"}
    assert row["speedup_by_family"]["eager"] == pytest.approx(row["speedup"])


def test_no_winograd_reaches_compile(tmp_path, fake_compile):
    doc = _bench(tmp_path, "--models", "resnet18", "--baselines", "", "--no-winograd")
    assert fake_compile[-1]["winograd"] is False
    assert doc["winograd"] is False and doc["models"][0]["winograd"] is False
    assert doc["models"][0]["tolerance"] == bench_models.TOL_DIRECT  # no Winograd conv: the tighter bound
    _bench(tmp_path, "--models", "resnet18", "--baselines", "")
    assert fake_compile[-1]["winograd"] is True


def test_unknown_variant_names_are_refused_before_compiling(tmp_path, fake_compile, capsys):
    out = tmp_path / "results"
    assert main(["bench", "models", "--compile-variants", "frozen,fastest", "--out", str(out)]) == 2
    assert "fastest" in capsys.readouterr().err and fake_compile == []


def test_a_failing_compile_variant_is_kept_with_its_reason(tmp_path, fake_compile, monkeypatch):
    torch = pytest.importorskip("torch")

    def broken(*args, **kw):
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(torch, "compile", broken)
    doc = _bench(tmp_path, "--models", "bert_layer", "--baselines", "compile",
                 "--compile-variants", "default,max-autotune")
    (row,) = doc["models"]
    assert doc["baselines"]["compile_modes"] == ["default", "max-autotune"]
    assert set(row["variants"]) == {"torch.compile default", "torch.compile default channels_last",
                                    "torch.compile max-autotune frozen",
                                    "torch.compile max-autotune frozen channels_last"}
    assert "no C++ compiler" in row["notes"]["torch.compile max-autotune frozen"]
    assert "4-d" in row["notes"]["torch.compile default channels_last"]
    assert row["baselines"] == {} and row["speedup"] is None
    md = (tmp_path / "results" / "models.md").read_text()
    assert "| bert_layer | torch.compile default | not timed |" in md


def test_compile_variants_are_labelled_and_timed(tmp_path, fake_compile):
    pytest.importorskip("torch")
    doc = _bench(tmp_path, "--models", "resnet18", "--baselines", "compile", "--compile-variants", "frozen",
                 "--compile-layouts", "channels_last")  # one compile: inductor is slow on a small host
    assert doc["rc"] == 0, doc["failures"]
    assert doc["baselines"]["compile_modes"] == ["frozen"] and doc["baselines"]["compile_layouts"] == ["channels_last"]
    (row,) = doc["models"]
    names = {"torch.compile frozen channels_last"}
    assert set(row["variants"]) == names
    for n in names:
        v = row["variants"][n]
        if not v["seconds"]:  # no C++ toolchain here: the reason is recorded instead
            assert v["note"].startswith("failed")
            continue
        assert v["family"] == "torch.compile" and v["setup_s"] > 0 and v["max_rel_error"] < 1e-4
    md = (tmp_path / "results" / "models.md").read_text()
    assert "torch.compile ms (variant)" in md


def test_frozen_variant_really_freezes_the_weights():
    """Dynamo reads inductor's `freezing` while tracing, outside torch.compile's per-compile options:
    a variant given the option alone compiles unfrozen. Frozen weights are folded into constants,
    so changing the model's weights afterwards must not change the frozen variant's output."""
    torch = pytest.importorskip("torch")
    from tilewright.bench.inductor_variants import compiling, options

    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    outputs = {}
    for mode in ("default", "frozen"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
        compiled = torch.compile(model, options=options(mode))
        try:
            with compiling(mode):
                before = compiled(x).clone()
        except Exception as exc:  # no C++ toolchain for inductor here
            pytest.skip(f"inductor cannot compile here: {exc}")
        with torch.no_grad():
            model[0].weight.mul_(2)
        with torch.inference_mode():
            outputs[mode] = torch.equal(before, compiled(x))
    assert outputs == {"default": False, "frozen": True}
    assert torch._inductor.config.freezing is False  # the patch was restored


def test_footprint_of_a_side_in_a_fresh_process():
    pytest.importorskip("torch")
    from tilewright.bench import footprint

    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("no /proc/self/clear_refs: VmHWM cannot be reset here")
    footprint.reset_peak()  # raises where the kernel ignores the reset
    common = {"model": "bert_layer", "reduced": True, "seed": 0, "threads": 1}
    got = footprint.measure({**common, "side": "eager", "layout": "NCHW"})
    assert "error" not in got, got
    assert 0 < got["run_bytes"] <= got["build_bytes"] and got["base_bytes"] > got["run_bytes"]
    assert "unknown side" in footprint.measure({**common, "side": "tensorflow"})["error"]
