"""Smoke test of `tilewright bench flextensor`: two tiny suite cases end to end
(tune a few trials, check against the reference, time beside PyTorch and NumPy's
BLAS, write JSON/Markdown), through the command line as a user runs it; and the
harness's fairness: our headline is the Python call, the C loop and every side's
empty call beside it, NumPy's OpenBLAS in a clean environment, provenance."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tilewright.bench import timing
from tilewright.bench.flextensor import CaseResult, run_case
from tilewright.bench.numpy_blas import numpy_call
from tilewright.bench.report import (
    _tuning,
    call_dominated,
    geomean,
    network_row,
    summary,
    tables,
    tuning_spread,
    write,
)
from tilewright.cli import main
from tilewright.records import Records
from tilewright.runtime.kernel import Kernel
from tilewright.runtime.timing import TimingResult


def test_driver_end_to_end(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(timing, "SETTLE_S", 0.0)  # a smoke test: no settling between sides
    out = tmp_path / "results"
    rc = main(["bench", "flextensor", "--ops", "GEMM,GEMV", "--cases", "gemm_32,gemv_128", "--trials", "4",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "flextensor.json").read_text())
    assert [(c["op"], c["case"]) for c in doc["cases"]] == [("GEMM", "gemm_32"), ("GEMV", "gemv_128")]
    for c in doc["cases"]:
        assert c["max_rel_error"] <= 1e-4 and c["tilewright_s"] > 0 and c["torch_s"] > 0 and c["numpy_s"] > 0
        assert c["tuned_trials"] == 4 and c["cloop_s"] > 0 and set(c["overhead_s"]) == {"ours", "torch", "numpy"}
        assert c["speedup"] == pytest.approx(min(c["baselines"].values()) / c["tilewright_s"])
    assert doc["failures"] == [] and doc["provenance"]["threads"] == doc["threads"]
    md = (out / "flextensor.md").read_text()
    assert "| GEMM | 1 |" in md and "geometric-mean speedup over the fastest baseline" in md

    # a second run reuses the records instead of tuning again
    rc = main(["bench", "flextensor", "--ops", "GEMM", "--cases", "gemm_32", "--trials", "4", "--reuse",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    assert json.loads((out / "flextensor.json").read_text())["cases"][0]["tuned_trials"] == 0


def test_unknown_operator_is_a_clear_error(tmp_path, capsys):
    rc = main(["bench", "flextensor", "--ops", "CONV9", "--out", str(tmp_path)])
    assert rc == 2
    assert "unknown suite operator 'CONV9'" in capsys.readouterr().err


def row(op="DEP", case="mbv2_dw_0", ours=1e-3, baseline=1.5e-3, **kw) -> CaseResult:
    fields = dict(torch_s=baseline, torch_layout="NCHW", default_s=1.2e-3, direct_s=ours, cloop_s=0.9 * ours,
                  baselines={"torch:NCHW": baseline}, baseline="PyTorch (NCHW)", baseline_s=baseline,
                  tuning_s=95.4, overhead_s={"ours": 2e-6, "torch": 4e-6})
    fields.update(kw)
    err = fields.pop("max_rel_error", 1e-6)
    return CaseResult(op, case, 2_000_000_000, 1_000_000, ours, err, 100, **fields)


def test_geomean_and_table_goals():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([]) is None
    text = "\n".join(tables([row()], peak=100.0))
    assert "1.50x" in text and "goal >= 2.0: NOT met" in text
    assert "within 1.3x of the tuned kernel: 1/1" in text
    assert text.splitlines()[4].endswith("| 1.50x | 1.50x | 2.0 / 4.0 | 95 |")  # direct only, empty calls, tuning s


def test_winograd_rows_state_the_direct_kernel_and_both_geomeans():
    wino = row(case="c2d", ours=1e-3, method="winograd", direct_s=2e-3, winograd_s=1e-3, max_rel_error=2e-6,
               direct_max_rel_error=3e-7, winograd_max_rel_error=2e-6)
    text = "\n".join(tables([wino], peak=100.0))
    assert "c2d (Winograd; direct 2.000)" in text and "| 2.0e-06 |" in text
    assert "fastest baseline: 1.50x (goal >= 2.0: NOT met); direct kernels only (Winograd off): 0.75x" in text
    assert "| DEP | 1 | 1.50x | 0.75x |" in "\n".join(summary([wino]))


def test_small_cases_show_the_c_loop_and_where_the_call_dominates():
    small = row(op="GEMM", case="gemm_32", ours=10e-6, baseline=8e-6, cloop_s=3e-6,
                overhead_s={"ours": 4e-6, "torch": 1e-6})
    big = row(op="GEMM", case="gemm_1024")
    text = "\n".join(tables([small, big], peak=100.0))
    assert "| 0.01 (C loop 0.003) |" in text and "| 1.000 |" in text  # the C loop only under 100 us
    assert call_dominated([small, big]) == ["- GEMM gemm_32: ours: 4.0 us of 10.0 us (40%)"]


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


def test_network_row_weights_layers_by_their_count():
    rows = [row("R50", "a", 1e-3, 2e-3, count=3, default_s=1.1e-3), row("R50", "b", 4e-3, 2e-3, default_s=8e-3)]
    ours, base = network_row(rows)
    assert ours == pytest.approx(7e-3) and base == pytest.approx(8e-3)
    text = "\n".join(summary(rows))
    assert "| R50 | 2 | 1.00x | 1.00x | >= 1.1 | 1.14x | 1/2 |" in text
    assert "| 8.000 | 1.14x | 1.14x | | |" in "\n".join(tables(rows, peak=100.0))  # as reported, direct only
    assert network_row([row("R50", "a", 1e-3, 2e-3)]) is None  # not a network: every count 1


def test_resnet50_driver_runs_one_layer(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(timing, "SETTLE_S", 0.0)
    out = tmp_path / "results"
    rc = main(["bench", "resnet50", "--cases", "l4_expand", "--trials", "2",
               "--records", str(tmp_path / "records.db"), "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "resnet50.json").read_text())
    (case,) = doc["cases"]
    assert case["op"] == "R50" and case["case"] == "l4_expand" and case["count"] == 3
    assert case["default_s"] > 0 and case["torch_s"] > 0 and doc["rounds"] >= 3
    assert "ResNet-50" in (out / "resnet50.md").read_text()


SENTINEL_S = 1000.0  # what the C loop "takes" here: a headline taken from it would show


@pytest.fixture(scope="module")
def gemm_row(tmp_path_factory):
    """GEMM gemm_32, untuned, with the C loop patched to a sentinel, every Python call of a kernel
    counted, no settling, and OPENBLAS_CORETYPE forced in this process's environment."""
    pytest.importorskip("torch")
    calls = []
    real_call = Kernel.__call__

    def counted(self, *arrays):
        calls.append(self.func.name)
        return real_call(self, *arrays)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timing, "SETTLE_S", 0.0)
        mp.setenv("OPENBLAS_CORETYPE", "Prescott")
        mp.setattr(Kernel, "__call__", counted)
        mp.setattr(Kernel, "time", lambda self, *a, **kw: TimingResult.of([SENTINEL_S], 1))
        r = run_case("GEMM", "gemm_32", 0, 1, Records(tmp_path_factory.mktemp("r") / "r.db"))
    return r, calls


def test_headline_is_the_python_call_and_the_c_loop_is_beside_it(gemm_row):
    r, calls = gemm_row
    assert r.cloop_s == SENTINEL_S and 0 < r.tilewright_s < 1  # the old headline was the C loop
    assert r.direct_s == r.tilewright_s and r.method == "direct"
    assert len(calls) > 100  # timed through kernel(*ins, out)
    assert r.overhead_s["ours"] > 0 and r.overhead_s["torch"] > 0 and r.overhead_s["numpy"] > 0
    assert "empty_call" in calls  # ours: a kernel of the same argument count, called the same way


def test_numpy_blas_is_a_baseline_in_a_clean_environment(gemm_row):
    r, _ = gemm_row
    blas = r.numpy_blas
    assert set(r.baselines) == {"torch:row-major", "numpy"} and r.numpy_s == r.baselines["numpy"] > 0
    assert blas["env_removed"] == {"OPENBLAS_CORETYPE": "Prescott"}
    assert blas["env_seen"]["OPENBLAS_CORETYPE"] is None and blas["env_seen"]["OPENBLAS_NUM_THREADS"] == "1"
    assert blas["corename"] not in ("unknown", "Prescott") and blas["config"].startswith("OpenBLAS")
    assert blas["threads"] == 1
    assert r.baseline_s == min(r.baselines.values()) and r.speedup == pytest.approx(r.baseline_s / r.tilewright_s)
    label = "numpy (OpenBLAS " + blas["corename"] + ")" if r.baseline_s == r.numpy_s else "PyTorch (row-major)"
    assert r.baseline == label


def test_report_records_provenance_speedups_and_overheads(gemm_row, tmp_path):
    from tilewright.bench.flextensor import bench_target

    r, _ = gemm_row
    write(tmp_path, "flextensor", "FlexTensor suite", bench_target(1), [r], [], 100.0, 1, 0, "q", 3)
    doc = json.loads((tmp_path / "flextensor.json").read_text())
    (case,) = doc["cases"]
    assert case["op"] == "GEMM" and case["case"] == "gemm_32" and case["speedup"] == pytest.approx(r.speedup)
    assert case["cloop_s"] == SENTINEL_S and case["numpy_blas"]["corename"] == r.numpy_blas["corename"]
    assert doc["provenance"]["trials"] == 0 and doc["provenance"]["rounds"] == timing.ROUNDS
    assert doc["provenance"]["commit"] and doc["geomeans"]["GEMM"]["reported"] == pytest.approx(r.speedup)
    md = (tmp_path / "flextensor.md").read_text()
    assert "Commit `" in md and "numpy (OpenBLAS " in md and "Where the Python call dominates" in md


def test_numpy_bilinear_is_the_operator():
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal((3, 5), np.float32), rng.standard_normal((3, 4), np.float32)
    w = rng.standard_normal((2, 5, 4), np.float32)
    out = np.zeros((3, 2), np.float32)
    numpy_call("BIL", [x1, x2, w], out)()
    np.testing.assert_allclose(out, np.einsum("bi,oij,bj->bo", x1, w, x2), rtol=1e-5, atol=1e-5)


def test_torch_gemm_writes_a_preallocated_output():
    pytest.importorskip("torch")
    from tilewright.workloads.baselines import torch_empty_call, torch_variants

    a = np.ones((32, 32), np.float32)
    fn = torch_variants("GEMM", "gemm_32", [a, a])["row-major"]
    assert fn().data_ptr() == fn().data_ptr() and float(fn()[0, 0]) == 32.0
    assert tuple(torch_empty_call("GEMM")().shape) == (1, 1) and torch_empty_call("BCM") is None
