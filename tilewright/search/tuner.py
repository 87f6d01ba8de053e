"""`run_tuning`, behind `tw.tune`: one `TuningTask` (search/task.py) tuned for a number of trials, its
finalists re-timed, its result returned. It knows no target kind: the backend record (backends.py) passed
in supplies the space, the point -> schedule implementation and the build pipeline."""

from __future__ import annotations

from ..runtime.measure import ErrorKind, Measurer
from .finalists import FINAL_PASSES, FINAL_ROUNDS, FINALISTS
from .options import TuneOptions, check_count
from .result import Trial, TuneResult
from .task import TuningTask


def run_tuning(backend, tensors, tgt, trials: int = 200, records=None, constants=(), retime: bool = True,
               options: TuneOptions | None = None, executor=None, **kwargs) -> TuneResult:
    """Search `trials` schedules of the program whose arguments are `tensors` (inputs and outputs, in
    kernel order) on target `tgt` through `backend`; `options` (or the keyword arguments that make one,
    see TuneOptions) say how.

    The heuristic default point is measured first, with the next best register-tile shapes of the model,
    and the search starts from them; `from_default=False` leaves them out (to compare search methods from
    scratch, as FlexTensor's Figure 7 does). `cost_model`: "auto" (default) pre-screens proposals with the
    learned cost model once the target has enough measured schedules (of any workload) to train it, "on"
    as soon as one can be fitted, "off" never (search/prescreen.py). `flush_cache`: each measurement times
    single calls after evicting the caches, as Ansor does for networks. `constants`: input tensors that
    never change between calls (a model's weights): a candidate's packs of them are made once, outside the
    timed kernel, as the compiled model makes them (graph/const_packs.py). `retime`: time the best few
    points of the records again at the end. `executor`: a RayExecutor builds and runs the candidates on its
    cluster (None: this machine)."""
    check_count("trials", trials)
    opts = TuneOptions.of(options, **kwargs)
    with TuningTask(tensors, tgt, backend, opts, records, constants, budget=trials,
                    executor=executor) as task:
        task.tune(trials)
        if retime:
            task.retime()
    return task.result


__all__ = ["FINAL_PASSES", "FINAL_ROUNDS", "FINALISTS", "ErrorKind", "Measurer", "Trial", "TuneResult",
           "TuningTask", "run_tuning"]
