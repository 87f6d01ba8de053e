"""The multi-process spread driver: fresh caches per run, per-row median and range, no silent drops."""

import json
import subprocess

import pytest

from tilewright.bench import spread


def _write(run_dir, models=(), cases=()):
    run_dir.mkdir(parents=True, exist_ok=True)
    if models:
        (run_dir / "models.json").write_text(json.dumps({"models": [dict(model=m, speedup=s) for m, s in models]}))
    if cases:
        (run_dir / "flextensor.json").write_text(json.dumps({"cases": [
            dict(op=op, case=c, tilewright_s=ours, torch_s=torch) for op, c, ours, torch in cases]}))


def test_rows_take_the_median_and_range_over_runs(tmp_path):
    for i, s in enumerate((1.1, 0.9, 1.3)):
        _write(tmp_path / f"run{i}", models=[("resnet18", s), ("bert", 1.0)], cases=[("GEMM", "gemm_32", 1.0, s)])
    per_run = [spread.speedups(tmp_path / f"run{i}") for i in range(3)]
    result = spread.summarize(per_run)
    r = result["rows"]["resnet18"]
    assert (r["median"], r["min"], r["max"], r["runs"]) == (1.1, 0.9, 1.3, 3)
    assert result["rows"]["GEMM:gemm_32"]["median"] == pytest.approx(1.1)  # torch_s / tilewright_s
    assert len(result["geomean_per_run"]) == 3
    text = "\n".join(spread.table(result, 3))
    assert "| resnet18 | 1.10x | 0.90x | 1.30x | 3/3 |" in text


def test_a_row_missing_from_a_run_is_counted_not_hidden(tmp_path):
    _write(tmp_path / "run0", models=[("resnet18", 1.2), ("bert", 1.0)])
    _write(tmp_path / "run1", models=[("resnet18", 1.4)])
    result = spread.summarize([spread.speedups(tmp_path / "run0"), spread.speedups(tmp_path / "run1"), {}])
    assert result["rows"]["bert"]["runs"] == 1
    assert "| bert | 1.00x | 1.00x | 1.00x | 1/3 |" in "\n".join(spread.table(result, 3))


def test_each_process_gets_its_own_empty_cache(tmp_path, monkeypatch):
    seen = []

    def fake_run(cmd, env, stdout, stderr):
        seen.append((cmd, env["TILEWRIGHT_CACHE_DIR"]))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(spread.subprocess, "run", fake_run)
    runs = spread.run_processes(["bench", "models", "--trials", "0"], 2, tmp_path)
    assert [r["returncode"] for r in runs] == [0, 0]
    assert seen[0][1] != seen[1][1]
    assert seen[0][0][-2:] == ["--out", str(tmp_path / "run0")]


def test_the_driver_refuses_a_command_that_is_not_a_benchmark(tmp_path):
    with pytest.raises(SystemExit):
        spread.main(["--out", str(tmp_path), "--", "tune", "conv2d"])
    with pytest.raises(SystemExit):
        spread.main(["--out", str(tmp_path), "--", "bench", "models", "--out", "x"])
