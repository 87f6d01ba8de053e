"""tw.tune / tw.build on target aie: the search over Vyasa's space against the cycle model, records
that a later build replays, and the errors of what the target does not take."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import TilewrightError
from tilewright.workloads.vyasa import TABLE_VI, random_inputs


def test_tune_then_build_from_records(tmp_path):
    inp, wgt, out = TABLE_VI[1].build(16)
    res = tw.tune([inp, wgt, out], target="aie", trials=20, records=tmp_path / "r.db")
    assert res.cycles < res.default_cycles and "simulated" in res.report()
    with tw.records(tmp_path / "r.db"):
        kernel = tw.build([inp, wgt, out], target="aie")
    assert kernel.program.schedule == res.schedule
    a, b, got = random_inputs([inp, wgt, out], seed=3)
    kernel(a, b, got)
    ref = tw.reference.evaluate([out], {inp: a, wgt: b})
    np.testing.assert_array_equal(got, ref[0] if isinstance(ref, (list, tuple)) else ref)


def test_ablation_is_timed_not_recorded(tmp_path):
    inp, wgt, out = TABLE_VI[0].build(16)
    full = tw.tune([inp, wgt, out], target="aie", trials=12, records=tmp_path / "r.db")
    unfused = tw.tune([inp, wgt, out], target="aie", trials=12, records=tmp_path / "r.db",
                      passes={"fuse_columns": False})
    assert unfused.cycles > 1.5 * full.cycles
    with pytest.raises(TilewrightError, match="timed by the cycle model only"):
        unfused.build()


def test_aie_takes_operators_not_schedules():
    inp, wgt, out = TABLE_VI[0].build(32)
    with pytest.raises(TilewrightError, match="whole operators"):
        tw.build(tw.create_schedule(out), [inp, wgt, out], target="aie")
    with pytest.raises(TilewrightError, match="pass exactly those inputs"):
        tw.build([wgt, out], target="aie")
    assert "simulated" in str(tw.Target("aie"))


def test_lesson_6_runs(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location(
        "aie_lesson", Path(__file__).resolve().parents[2] / "examples" / "06_filter_on_aie.py")
    lesson = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lesson)
    monkeypatch.setattr(sys, "argv", ["06_filter_on_aie.py", "--k", "3", "--trials", "8"])
    lesson.main()
    assert "bit-exact" in capsys.readouterr().out
