"""TuningTask: one program's tuning kept open across calls; TuneOptions: options checked where passed."""

import math

import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.errors import TilewrightError
from tilewright.records import Records
from tilewright.runtime.measure import Measurer
from tilewright.search.options import TuneOptions
from tilewright.search.task import TuningTask
from tilewright.space.knobs import option
from tilewright.targets import as_target


def gemm():
    A = tw.placeholder((32, 24), "float32", name="A")
    B = tw.placeholder((24, 48), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def test_options_are_checked_where_they_are_passed():
    with pytest.raises(TilewrightError, match=r"unknown option trails; valid: .*timeout"):
        TuneOptions.of(trails=100)
    with pytest.raises(TilewrightError, match="timeout must be a positive number"):
        TuneOptions.of(timeout=0)
    with pytest.raises(TilewrightError, match="unknown search method 'annealing'"):
        TuneOptions(method="annealing")
    with pytest.raises(TilewrightError, match="cost_model must be one of"):
        TuneOptions(cost_model="maybe")
    with pytest.raises(TilewrightError, match="batch must be a positive int or None, got 0"):
        TuneOptions(batch=0)
    base = TuneOptions(seed=3)
    assert TuneOptions.of(base, timeout=2.0) == TuneOptions(seed=3, timeout=2.0)


def test_tune_and_compile_refuse_a_misspelled_option(tmp_path):
    with pytest.raises(TilewrightError, match="unknown option trails"):
        tw.tune(gemm(), trials=2, trails=100, records=tmp_path / "r.db")
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(8, 4))
    with pytest.raises(TilewrightError, match="unknown option trails"):  # untuned as well: nothing is ignored
        tw.compile(net, [torch.randn(1, 8)], trails=100, records=tmp_path / "r.db")
    with pytest.raises(TilewrightError, match="trials must be a non-negative int, got -5"):
        tw.compile(net, [torch.randn(1, 8)], trials=-5, records=tmp_path / "r.db")


def test_a_task_is_set_up_once_and_tuned_across_calls(tmp_path, monkeypatch):
    made = []
    real_init = Measurer.__init__

    def counting_init(self, *a, **k):
        made.append(1)
        real_init(self, *a, **k)

    monkeypatch.setattr(Measurer, "__init__", counting_init)
    cpu = as_target("cpu")
    db = Records(tmp_path / "r.db")
    opts = TuneOptions(seed=0, progress=False, cost_model="off", log=str(tmp_path / "t.log"))
    with TuningTask(gemm(), cpu, backend_for(cpu), opts, db, budget=12) as task:
        first = task.tune(4)
        task.pause()  # the runner process ends; the next slice starts a fresh one
        second = task.tune(4)
        assert [t.index for t in first + second] == list(range(8)) and task.trials == 8
        assert math.isfinite(task.best[1]) and task.best[1] <= min(t.cost for t in first + second)
        built = []
        real_build = task.measurer.builder.build
        task.measurer.builder.build = lambda schedules: built.extend(schedules) or real_build(schedules)
        best = task.retime()
    assert built == []  # the finalists were measured by this task: their artefacts run again, unrebuilt
    assert len(made) == 1  # one reference evaluation and input set for all three calls
    assert best == task.result.best_cost and math.isfinite(task.result.default_cost)
    points = [r.point for r in db.query(task.workload, cpu.key) if r.method == "q"]
    assert len(set(points)) >= 8  # no point measured twice by the search itself (finalists are re-timed)
    log = (tmp_path / "t.log").read_text()
    assert log.count("\n") >= 8 and "finalist" in log and "cost model" in log


def test_early_stop_counts_the_task_trials_across_calls(tmp_path):
    cpu = as_target("cpu")
    opts = TuneOptions(seed=0, progress=False, cost_model="off", early_stop=3, from_default=False, batch=1,
                       log=str(tmp_path / "t.log"))
    with TuningTask(gemm(), cpu, backend_for(cpu), opts, Records(tmp_path / "r.db"), budget=40) as task:
        n = 0
        for _ in range(40):  # slices of one trial: each slice alone could never see 3 without a gain
            n += len(task.tune(1))
            if task.stopped:
                break
    assert task.stopped.startswith("early stop") and n < 40


def test_a_misspelled_knob_name_is_an_error_not_a_default():
    from tilewright.space.space import Point

    p = Point((("unroll", 1),))
    assert option(p, "unroll", 0) == 1 and option(p, "vec_reduce", 0) == 0  # declared, absent: the default
    with pytest.raises(TilewrightError, match="no space declares a knob 'unrol'"):
        option(p, "unrol", 0)
