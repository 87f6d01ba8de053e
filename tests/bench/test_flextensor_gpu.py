"""The GPU benchmark driver without a GPU: the PyTorch baseline mapping run on
the host against the NumPy reference (one shrunken case per operator), the
report (geomeans, goals, network rows, merging of slices) on synthetic rows,
and `tilewright bench flextensor --target opencl` end to end on PoCL."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilewright.reference import evaluate
from tilewright.workloads import builders, gpu_baselines, suite_case

# one small case per operator, with the parameters the real cases carry (strides, dilation, groups, ...)
_SMALL = {
    "C2D": dict(batch=1, in_channels=4, height=9, width=9, out_channels=6, kernel=3, stride=2, padding=1,
                dilation=1, groups=1),
    "GRP": dict(batch=1, in_channels=8, height=7, width=7, out_channels=8, kernel=3, stride=1, padding=1,
                dilation=1, groups=4),
    "DIL": dict(batch=1, in_channels=4, height=9, width=9, out_channels=5, kernel=3, stride=1, padding=2,
                dilation=2, groups=1),
    "DEP": dict(batch=1, in_channels=4, height=8, width=8, channel_multiplier=2, kernel=3, stride=2, padding=1,
                dilation=1, out_channels=8),
    "C1D": dict(batch=1, in_channels=4, length=11, out_channels=6, kernel=3, stride=2, padding=1, dilation=1,
                groups=1),
    "T1D": dict(batch=1, in_channels=4, length=6, out_channels=5, kernel=3, stride=2, padding=1, output_padding=1,
                dilation=1, groups=1),
    "C3D": dict(batch=1, in_channels=3, depth=5, height=6, width=6, out_channels=4, kernel=3, stride=2, padding=1,
                dilation=1, groups=1),
    "T2D": dict(batch=1, in_channels=4, height=5, width=5, out_channels=3, kernel=3, stride=2, padding=1,
                output_padding=1, dilation=1, groups=1),
    "T3D": dict(batch=1, in_channels=3, depth=3, height=4, width=4, out_channels=2, kernel=3, stride=2, padding=1,
                output_padding=0, dilation=1, groups=1),
    "GEMM": dict(M=12, K=7, N=9),
    "GEMV": dict(M=12, K=7),
    "BIL": dict(batch=3, in1_features=4, in2_features=5, out_features=6),
}


@pytest.fixture
def small_cases(monkeypatch):
    """suite_case answers the shrunken case for name "small" (the builders and the baselines both ask it)."""
    def lookup(op, name):
        return dict(_SMALL[op], name=name) if name == "small" else suite_case(op, name)

    monkeypatch.setattr(builders, "suite_case", lookup)
    monkeypatch.setattr(gpu_baselines, "suite_case", lookup)


@pytest.mark.parametrize("op", sorted(_SMALL))
def test_torch_mapping_matches_the_reference(op, small_cases):
    torch = pytest.importorskip("torch")
    tensors = builders.suite_program(op, "small")
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal(t.shape).astype(np.float32) for t in tensors[:-1]]
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    for tf32 in (False, True):
        variants = gpu_baselines.torch_gpu_variants(op, "small", ins, device="cpu", tf32=tf32)
        assert variants, f"no PyTorch variant for {op}"
        for name, fn in variants.items():
            got = fn()
            assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"{op} {name}")
    assert torch.backends.cudnn.allow_tf32 is True  # the last variant ran with PyTorch's default


def test_operators_without_torch_have_no_variant():
    pytest.importorskip("torch")
    x = np.zeros((4, 4), np.float32)
    assert gpu_baselines.torch_gpu_variants("BCM", "bcm_1024x40_b8", [x], device="cpu") == {}


def _row(op, case, ours, lib, default=None, lib_tf32=None, count=1):
    from tilewright.bench.gpu_report import GpuCaseResult

    return GpuCaseResult(op, case, flops=2_000_000, tilewright_s=ours, max_rel_error=0.0, tuned_trials=10,
                         tune_wall_s=3.0, default_s=default, torch_s=lib, torch_variant="cudnn:NCHW",
                         torch_tf32_s=lib_tf32, torch_tf32_variant="cudnn:NCHW", count=count)


def test_summary_geomeans_goals_and_whole_suite():
    from tilewright.bench.gpu_report import summary

    rows = [_row("DEP", "mbv2_dw_0", 1e-3, 4e-3, default=1.2e-3), _row("DEP", "mbv2_dw_1", 1e-3, 1e-3),
            _row("GEMM", "gemm_1024", 1e-3, 0.5e-3, lib_tf32=0.25e-3)]
    text = "\n".join(summary(rows))
    assert "| DEP | 2 | 2.00x | >= 2.0 | met |" in text
    assert "| GEMM | 1 | 0.50x | >= 0.8 | NOT met | 0.25x |" in text
    assert "| whole suite (every case) | 3 | 1.26x | >= 1.2 | met |" in text  # (4 * 1 * 0.5) ** (1/3)


def test_network_rows_sum_yolo_layers_and_say_overfeat_is_missing():
    from tilewright.bench.gpu_report import network_rows

    rows = [_row("C2D", "yolo_conv2", 1e-3, 2e-3), _row("C2D", "yolo_conv8", 3e-3, 2e-3),
            _row("GEMM", "gemm_32", 1.0, 9.0)]
    text = "\n".join(network_rows(rows))
    assert "| YOLO-v1 (C2D) | 2/15 | each unique layer once (the suite gives no repeat counts) | 4.0000 | 4.0000 " \
           "| 1.00x |" in text
    assert "OverFeat | 0/0 | not in the suite" in text
    weighted = "\n".join(network_rows([_row("C2D", "yolo_conv2", 1e-3, 2e-3, count=3),
                                       _row("C2D", "yolo_conv8", 1e-3, 1e-3)]))
    assert "| 2/15 | count-weighted | 4.0000 | 7.0000 | 1.75x |" in weighted


def _header(key="opencl-test"):
    return {"target": "t", "target_key": key, "device": "Test GPU", "arch": "sm_90", "driver": "1.0",
            "compiler": "nvcc 13", "trials": 10, "method": "q", "torch": "2", "baseline_device": "cuda",
            "tf32_off": "off", "tf32_default": "default", "rounds": 5, "timings_per_round": 3}


def test_slices_merge_into_one_table(tmp_path):
    from tilewright.bench.gpu_report import write
    from tilewright.errors import TilewrightError

    write(tmp_path, "flextensor_cuda", _header(), [_row("GEMM", "gemm_1024", 1e-3, 1e-3)],
          [{"op": "C2D", "case": "yolo_conv8", "error": "wrong"}])
    rows, failures = write(tmp_path, "flextensor_cuda", _header(),
                           [_row("C2D", "yolo_conv8", 1e-3, 2e-3), _row("C2D", "yolo_conv2", 1e-3, 3e-3)], [])
    # suite order (GEMM comes before C2D in the suite file), the failure replaced by its new row
    assert [(r.op, r.case) for r in rows] == [("GEMM", "gemm_1024"), ("C2D", "yolo_conv2"), ("C2D", "yolo_conv8")]
    assert failures == []
    rows, _ = write(tmp_path, "flextensor_cuda", _header(), [_row("GEMM", "gemm_1024", 2e-3, 1e-3)], [])
    assert len(rows) == 3 and rows[0].tilewright_s == 2e-3
    doc = json.loads((tmp_path / "flextensor_cuda.json").read_text())
    assert len(doc["cases"]) == 3 and doc["device"] == "Test GPU"
    md = (tmp_path / "flextensor_cuda.md").read_text()
    assert "Test GPU (sm_90; driver 1.0, nvcc 13)" in md and "| C2D | 2 | 2.45x | >= 1.0 | met |" in md
    with pytest.raises(TilewrightError, match="another device"):
        write(tmp_path, "flextensor_cuda", _header("cuda-other"), [], [])


def test_cli_gpu_target_only_for_the_flextensor_suite(tmp_path, capsys):
    from tilewright.cli import main

    assert main(["bench", "resnet50", "--target", "cuda", "--out", str(tmp_path)]) == 2
    assert "runs on the CPU only" in capsys.readouterr().err
    if _opencl_available():
        assert main(["bench", "flextensor", "--target", "opencl", "--ops", "GEMM", "--cases", "gemv_128",
                     "--out", str(tmp_path)]) == 2
        assert "no case gemv_128 in GEMM; their cases are gemm_1024" in capsys.readouterr().err


def _opencl_available() -> bool:
    from tilewright.build.opencl import opencl_available

    return opencl_available() is None


def _opencl_or_skip():
    from tilewright.build.opencl import opencl_available

    why = opencl_available()
    if why is not None:
        pytest.skip(f"no OpenCL device: {why}")


def test_opencl_driver_end_to_end_untuned(tmp_path):
    """--trials 0 (the untuned default as ours) runs the whole driver on PoCL whether or not the GPU space
    has landed; the baseline is PyTorch on the host, labelled so."""
    pytest.importorskip("torch")
    _opencl_or_skip()
    from tilewright.bench.flextensor_gpu import run_gpu_suite

    result = run_gpu_suite("opencl", ops=["GEMV"], cases=["gemv_128"], trials=0, out=tmp_path,
                           records=tmp_path / "r.db", baseline_device="cpu", rounds=2, log=lambda _: None)
    assert result["failures"] == []
    (row,) = result["rows"]
    assert row.max_rel_error <= 1e-4 and row.tilewright_s > 0 and row.default_s > 0 and row.tuned_trials == 0
    assert row.torch_s > 0 and row.torch_variant == "torch:row-major" and row.torch_tf32_s > 0
    md = (tmp_path / "flextensor_opencl.md").read_text()
    assert "the host CPU (NOT a GPU baseline)" in md and "untuned defaults only" in md

    # a second slice through the command line merges into the same table (no PyTorch GPU beside OpenCL)
    from tilewright.cli import main

    assert main(["bench", "flextensor", "--target", "opencl", "--ops", "GEMM", "--cases", "gemm_32", "--trials", "0",
                 "--records", str(tmp_path / "r.db"), "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "flextensor_opencl.json").read_text())
    assert [(c["op"], c["case"]) for c in doc["cases"]] == [("GEMV", "gemv_128"), ("GEMM", "gemm_32")]
    assert doc["cases"][1]["torch_s"] is None and doc["baseline_device"] is None


def _gpu_space_landed() -> bool:
    import tilewright as tw
    from tilewright.backends import backend_for

    try:
        return backend_for(tw.Target("opencl")).space is not None
    except Exception:  # no OpenCL device
        return False


@pytest.mark.skipif(not _gpu_space_landed(), reason="the GPU schedule space (issue 16, tilewright/space/gpu*.py) "
                    "has not landed: OpenCL cannot be tuned yet")
def test_cli_opencl_tunes_end_to_end(tmp_path):
    from tilewright.cli import main

    out = tmp_path / "results"
    rc = main(["bench", "flextensor", "--target", "opencl", "--ops", "GEMM", "--cases", "gemm_32", "--trials", "3",
               "--records", str(tmp_path / "gpu.db"), "--out", str(out)])
    assert rc == 0
    (case,) = json.loads((out / "flextensor_opencl.json").read_text())["cases"]
    assert case["tuned_trials"] == 3 and case["max_rel_error"] <= 1e-4 and case["tune_wall_s"] > 0
