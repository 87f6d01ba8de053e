"""Bolt's light profiler: measure the few tens of tiles the rules propose for a problem, each
checked against the NumPy reference before its time counts, and keep every measurement in the
records under the problem's class, so a later workload of the same class tries the class's
winners first and a workload seen before is not measured again.

A build that fails or a kernel that computes a wrong result is recorded with its error kind and
the search goes on."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import __version__
from ..errors import TilewrightError
from ..records.store import Record, Records
from ..runtime.aligned import aligned_copy
from ..targets import Target
from .b2b import B2BKernel, B2BProblem, b2b_tiles, check_residency
from .cpu_tiles import CpuTile, check_layout, check_tile, problem_tiles
from .epilogue import Epilogue
from .isolated import TemplateRunner
from .problem import ConvProblem, GemmProblem
from .template_kernel import TemplateKernel

TEMPLATE_VERSION = 4  # in every workload key: a change to the templates' code must not reuse older measurements
FINALISTS, FINAL_REPEAT, FINAL_MS = 3, 5, 50.0  # the fastest candidates, timed again for the pick
TOLERANCE = 2e-3  # of max(1, |reference|): fp32 sums in another order, vector transcendentals (<= 4 ulp)


@dataclass(frozen=True)
class Trial:
    tile: CpuTile
    seconds: float  # inf unless error_kind is "none"
    error_kind: str = "none"
    error_msg: str = ""


@dataclass
class ProfileResult:
    problem: object
    target: Target
    best: CpuTile
    best_seconds: float
    trials: list[Trial] = field(default_factory=list)
    wall_seconds: float = 0.0
    reused: bool = False

    @property
    def gflops(self) -> float:
        return self.problem.flops / self.best_seconds / 1e9

    def report(self) -> str:
        ok = [t for t in self.trials if t.error_kind == "none"]
        bad = len(self.trials) - len(ok)
        head = (f"{self.problem.name}: best {self.best} {self.best_seconds * 1e3:.3f} ms ({self.gflops:.1f} GFLOPS); "
                + ("from the records, nothing measured" if self.reused else
                   f"{len(ok)} tiles measured, {bad} failed, {self.wall_seconds:.1f} s"))
        return head


def problem_class(problem) -> str:
    """Shapes that share winning tiles: the kind and each dimension's power-of-two bucket."""
    def b(v: int) -> int:
        return int(math.log2(max(1, v)))
    if isinstance(problem, B2BProblem):
        return f"b2b-{problem_class(problem.first)}-n{b(problem.second.N)}"
    kind = "conv" if isinstance(problem, ConvProblem) else "gemm"
    blocked = f"-c{problem.out_block}" if getattr(problem, "out_block", 0) else ""
    return f"{kind}-m{b(problem.M)}-n{b(problem.N)}-k{b(problem.K)}{blocked}"


def workload_key(problem, epilogue: Epilogue) -> str:
    return f"template{TEMPLATE_VERSION}:{problem_class(problem)}:{problem.name}:{epilogue.name}"


def _inputs(problem, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    first = problem.first if isinstance(problem, B2BProblem) else problem
    v = {"x": aligned_copy(rng.standard_normal(first.input_shape, dtype=np.float32))}
    v["w0"] = rng.standard_normal(first.weight_shape, dtype=np.float32) / np.float32(math.sqrt(first.K))
    v["b0"] = rng.standard_normal(first.N, dtype=np.float32)
    if isinstance(problem, B2BProblem):
        v["w1"] = rng.standard_normal(problem.second.weight_shape, dtype=np.float32) / np.float32(
            math.sqrt(first.N))
        v["b1"] = rng.standard_normal(problem.second.N, dtype=np.float32)
    v["res"] = rng.standard_normal(problem.output_shape if not isinstance(problem, B2BProblem)
                                   else problem.output_shape, dtype=np.float32)
    return v


def _kernel(problem, target, tile, epilogue, v, load: bool = True):
    if isinstance(problem, B2BProblem):
        return B2BKernel(problem, target, tile, v["w0"], v["w1"], v["b0"], v["b1"], load=load)
    return TemplateKernel(problem, target, tile, epilogue, v["w0"], v["b0"], load=load)


def _reference(problem, epilogue, v) -> np.ndarray:
    if isinstance(problem, B2BProblem):
        return problem.reference(v["x"], v["w0"], v["w1"], v["b0"], v["b1"], v["res"])
    acc = problem.to_rows(problem.reference(v["x"], v["w0"]))
    return problem.from_rows(epilogue.apply(acc, v["b0"], problem.to_rows(v["res"])))


def _candidates(problem, target: Target, store: Records | None, limit: int) -> list[CpuTile]:
    rules = b2b_tiles(problem, target, limit) if isinstance(problem, B2BProblem) else \
        problem_tiles(problem, target, limit)
    first = []
    if store is not None:
        prefix = f"template{TEMPLATE_VERSION}:{problem_class(problem)}:"
        by_workload: dict[str, list[Record]] = {}
        for r in store.query(target=target.key):
            if r.workload.startswith(prefix) and r.error_kind == "none":
                by_workload.setdefault(r.workload, []).append(r)
        wins = sorted((cost, point) for point, cost in map(_recorded_pick, by_workload.values()))
        for _, point in wins:
            tile = CpuTile.from_dict(json.loads(point))
            try:
                if isinstance(problem, B2BProblem):
                    check_residency(problem, tile, target)
                else:
                    check_tile(tile, target)
                    check_layout(tile, problem)
            except TilewrightError:
                continue
            if tile not in first:
                first.append(tile)
    return (first + [t for t in rules if t not in first])[:limit]


def profile(problem: GemmProblem | ConvProblem | B2BProblem, target: Target | str = "cpu",
            epilogue: Epilogue | tuple = (), records: Records | str | None = None, limit: int = 24,
            seed: int = 0, repeat: int = 3, min_repeat_ms: float = 20.0, isolate: bool = True) -> ProfileResult:
    """Measure up to `limit` tiles (the class's recorded winners first, then the rules' list) and return
    the fastest correct one. With `records`, a workload measured before is answered from them.
    `isolate`: load and time each candidate in the isolated runner process (False: in this one)."""
    target = target if isinstance(target, Target) else Target(target)
    if isinstance(problem, B2BProblem):
        epilogue = problem.epilogues[1]
    epilogue = epilogue if isinstance(epilogue, Epilogue) else Epilogue(tuple(epilogue))
    store = Records(records) if isinstance(records, str) else records
    key = workload_key(problem, epilogue)
    start = time.perf_counter()
    if store is not None:
        seen = [r for r in store.query(workload=key, target=target.key) if r.error_kind == "none"]
        if seen:
            point, cost = _recorded_pick(seen)
            return ProfileResult(problem, target, CpuTile.from_dict(json.loads(point)), cost,
                                 wall_seconds=time.perf_counter() - start, reused=True)
    v = _inputs(problem, seed)
    ref = _reference(problem, epilogue, v)
    scale = max(1.0, float(np.abs(ref).max()))
    run_id = f"template-{int(time.time())}"
    trials, runners = [], {}

    def measure(tile, reps, ms, method="template") -> Trial:
        if isolate:
            trial = _measure_isolated(problem, target, tile, epilogue, v, ref, runners, reps, ms)
        else:
            trial = _measure(problem, target, tile, epilogue, v, ref, scale, reps, ms)
        if store is not None:
            store.add(Record(key, target.key, json.dumps(tile.to_dict()), "", (trial.seconds,)
                             if trial.error_kind == "none" else (), trial.error_kind, trial.error_msg[:2000],
                             method, seed, run_id, __version__, time.time(), str(tile)))
        return trial

    try:
        trials = [measure(tile, repeat, min_repeat_ms) for tile in _candidates(problem, target, store, limit)]
        ok = sorted((t for t in trials if t.error_kind == "none"), key=lambda t: t.seconds)
        if not ok:
            raise TilewrightError(f"{problem.name}: none of the {len(trials)} template tiles built and matched the "
                                  f"reference; first failure: {trials[0].error_kind}: {trials[0].error_msg[:400]}")
        # the few fastest again, longer and interleaved: one short sample on a noisy machine picks by luck
        finals: dict[CpuTile, list[float]] = {t.tile: [] for t in ok[:FINALISTS]}
        for _ in range(2):
            for tile in finals:
                again = measure(tile, FINAL_REPEAT, max(FINAL_MS, min_repeat_ms), "template-final")
                if again.error_kind == "none":
                    finals[tile].append(again.seconds)
    finally:
        for runner in runners.values():
            runner.close()
    scored = {tile: float(np.median(ts)) for tile, ts in finals.items() if ts}
    if not scored:
        return ProfileResult(problem, target, ok[0].tile, ok[0].seconds, trials, time.perf_counter() - start)
    best = min(scored, key=scored.get)
    return ProfileResult(problem, target, best, scored[best], trials, time.perf_counter() - start)


def _recorded_pick(seen: list[Record]) -> tuple[str, float]:
    """The pick `profile` made from these records: the finalists' median re-timed cost (the first pass only when
    no finalist was re-timed), so a reused answer is the measured one and not a lucky single sample."""
    final = [r for r in seen if r.method == "template-final"]
    by_point: dict[str, list[float]] = {}
    for r in final or seen:
        by_point.setdefault(r.point, []).append(r.cost)
    scored = {point: float(np.median(costs)) if final else min(costs) for point, costs in by_point.items()}
    best = min(scored, key=scored.get)
    return best, scored[best]


def _measure(problem, target, tile, epilogue, v, ref, scale, repeat, min_repeat_ms) -> Trial:
    try:
        kernel = _kernel(problem, target, tile, epilogue, v)
    except TilewrightError as exc:
        kind = "compile" if type(exc).__name__ == "BuildError" else "instantiate"
        return Trial(tile, math.inf, kind, str(exc))
    out = np.zeros(problem.output_shape, np.float32)
    res = v["res"] if epilogue.residual else None
    try:
        kernel(v["x"], out, res)
    except (TilewrightError, MemoryError) as exc:
        return Trial(tile, math.inf, "runtime", str(exc))
    err = float(np.abs(out - ref).max()) / scale
    if not err <= TOLERANCE:
        return Trial(tile, math.inf, "wrong_result", f"max error {err:.3g} of the reference's scale {scale:.3g}")
    t = kernel.time(v["x"], out, res, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return Trial(tile, t.median)


def _measure_isolated(problem, target, tile, epilogue, v, ref, runners: dict, repeat, min_repeat_ms) -> Trial:
    try:
        kernel = _kernel(problem, target, tile, epilogue, v, load=False)
    except TilewrightError as exc:
        return Trial(tile, math.inf, "compile" if type(exc).__name__ == "BuildError" else "instantiate", str(exc))
    consts = kernel.constants
    key = tuple(c.shape for c in consts)
    if key not in runners:
        inputs = [v["x"], *consts] + ([v["res"]] if epilogue.residual else [])
        runners[key] = TemplateRunner(inputs, ref, target.cores, TOLERANCE, repeat=repeat, min_repeat_ms=min_repeat_ms)
    r = runners[key].measure_library(str(kernel.build_result.library))
    return Trial(tile, r.cost if r.ok else math.inf, r.error_kind.value, r.error_msg)
