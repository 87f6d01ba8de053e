"""Exploring a schedule space (FlexTensor 5.1): random sampling, the P-method
and the Q-method (simulated-annealing start points + a NumPy Q-network).
Strategies only propose and observe. Around them, MetaSchedule's interfaces:
- `task.TuningTask`: one (program, target)'s tuning, kept across calls: the space
  generator (`space.generator.SpaceGenerator`, made by the backend record: knobs,
  `apply(point) -> Schedule`, default and heuristic points), the strategy, the
  cost-model screen (prescreen.py), the measurer and the log; `tune(n)`, `retime()`,
  `best`, `result`;
- `options.TuneOptions`: how it searches, checked where it is made;
- builder and runner (Protocols in `interfaces.py`): `runtime.builder.LocalBuilder`
  (candidates -> artefacts or an error kind), `runtime.local_runner.LocalRunner`
  (artefacts -> MeasureResult, with its own timeout), composed by
  `runtime.measure.Measurer`; `ray_executor.RayExecutor` puts the builders on a Ray
  cluster's CPUs and the runner in one actor per device (`ray_runner.py`);
- database (`interfaces.Database`): the SQLite records (`records/`), written by the
  driver only;
- task scheduler: `graph/scheduler.py` spreads a model's budget over its tasks.
`best.best_schedule` (what tw.build and compiled models use) replays a record without
any of the tuning machinery. Imports `space`, `runtime`, `records`. Public names:
RandomSearch, PMethod, QMethod, make_strategy."""

from .pmethod import PMethod
from .qmethod import QMethod
from .random_search import RandomSearch
from .strategy import SearchStrategy

METHODS = {"random": RandomSearch, "p": PMethod, "q": QMethod}


def make_strategy(method: str, space, seed: int = 0) -> SearchStrategy:
    if method not in METHODS:
        from ..errors import TilewrightError

        raise TilewrightError(f"unknown search method {method!r}; valid: {', '.join(METHODS)}")
    return METHODS[method](space, seed=seed)


__all__ = ["METHODS", "PMethod", "QMethod", "RandomSearch", "SearchStrategy", "make_strategy"]
