"""Whole models against every baseline at its best (`tilewright bench models`):
each model of `tilewright.models` compiled with `tw.compile` (tuned over a trial
budget spread across its tasks) on one input, then ours and every baseline
variant (model_baselines.py: eager, torch.compile, ONNX Runtime, each in several
labelled configurations) checked against PyTorch eager on a second, held-out
input, then timed in alternating rounds in the same process, with the same
input and thread count. The fastest variant of all is the one ours is compared
with. Optionally (`memory=True`) each side's total footprint is measured in a
fresh process (footprint.py). Reports go out through model_report.py."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..records import Records
from ..runtime.aligned import aligned_copy
from .baseline import FAMILIES
from .flextensor import bench_target
from .model_baselines import Choice, baseline_variants, torch_peak_activation_bytes, torch_weight_bytes
from .model_report import table, write
from .timing import ROUNDS, alternating_medians, median_seconds

__all__ = ["ModelResult", "check_output", "relative_error", "run_model", "run_models", "table"]

REPEAT = 3  # timings per round of each side
TOL = 1e-3  # max|got - eager| / max|eager| allowed for the baselines and for ours with Winograd
TOL_DIRECT = 1e-4  # for ours when no convolution runs as Winograd
CHECK_SEED_OFFSET = 1  # the held-out input's seed: the compile seed plus this


@dataclass
class ModelResult:
    model: str
    input_shape: tuple
    layout: str = "NCHW"  # which convolutions ran packed (compile's layout; "auto" resolved)
    winograd: bool = True  # what compile was asked for
    winograd_convs: int = 0  # convolutions the compiled module runs as Winograd
    ours_s: float | None = None
    tune_s: float = 0.0
    tasks: int = 0
    trials: int = 0  # the budget asked for
    new_trials: int = 0  # measured in this run (the rest of the budget came from the records)
    reused_records: int = 0
    compile_seed: int = 0  # the input compile, tuning and timing used
    check_seed: int = 1  # the held-out input every output is checked on
    tolerance: float = TOL  # ours' bound on max_rel_error
    max_abs_error: float | None = None  # ours against eager, held-out input
    max_rel_error: float | None = None  # the same over max|eager|; Winograd's error included when winograd_convs
    peak_bytes: int | None = None  # ours: activations (module.peak_bytes)
    torch_peak_bytes: int | None = None  # eager: activations (profiler)
    constant_bytes: int | None = None  # ours: weights as the module holds them, packed/transformed copies included
    torch_weight_bytes: int | None = None
    baselines: dict = field(default_factory=dict)  # timed variant -> seconds
    setup_s: dict = field(default_factory=dict)  # variant -> compile/export/session seconds
    families: dict = field(default_factory=dict)  # variant -> eager / torch.compile / onnxruntime
    errors: dict = field(default_factory=dict)  # variant -> max rel error against eager, held-out input
    notes: dict = field(default_factory=dict)  # variant -> why it is not timed, or what to know about it
    extra: dict = field(default_factory=dict)  # variant -> details (e.g. the ORT optimizer's fused ops)
    footprint: dict = field(default_factory=dict)  # "ours" or a family -> footprint.measure's result + variant
    error: str = ""

    @property
    def fastest(self) -> tuple[str, float] | None:
        if not self.baselines:
            return None
        name = min(self.baselines, key=self.baselines.get)
        return name, self.baselines[name]

    @property
    def speedup(self) -> float | None:
        best = self.fastest
        return best[1] / self.ours_s if best and self.ours_s else None

    def best_of(self, family: str) -> tuple[str, float] | None:
        timed = {n: s for n, s in self.baselines.items() if self.families.get(n) == family}
        if not timed:
            return None
        name = min(timed, key=timed.get)
        return name, timed[name]

    @property
    def speedup_by_family(self) -> dict[str, float | None]:
        out = {}
        for f in FAMILIES:
            best = self.best_of(f)
            out[f] = best[1] / self.ours_s if best and self.ours_s else None
        return out

    def as_json(self) -> dict:
        variants = {n: {"family": self.families.get(n), "seconds": self.baselines.get(n),
                        "setup_s": self.setup_s.get(n), "max_rel_error": self.errors.get(n),
                        "note": self.notes.get(n, ""), **({"extra": self.extra[n]} if n in self.extra else {})}
                    for n in self.families}
        best = {f: (b[0] if (b := self.best_of(f)) else None) for f in FAMILIES}
        return dict(self.__dict__, speedup=self.speedup, speedup_by_family=self.speedup_by_family,
                    fastest=self.fastest[0] if self.fastest else None, best_by_family=best, variants=variants)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max|got - want| / max|want| (the absolute error where `want` is all zeros)."""
    if not want.size:
        return 0.0
    err = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    return err / scale if scale > 0 else err


def check_output(name: str, got, want: np.ndarray, tol: float = TOL) -> float:
    """The largest absolute error of `got` against PyTorch eager's `want`; AssertionError when
    the error relative to max|want| is above `tol`."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: output shape {list(got.shape)} differs from PyTorch eager's {list(want.shape)}")
    if not np.all(np.isfinite(got)):
        raise AssertionError(f"{name}: output differs from PyTorch eager (it holds NaN or inf)")
    rel = relative_error(got, want)
    if rel > tol:
        raise AssertionError(f"{name}: output differs from PyTorch eager (max error {rel:.3g} of max|eager|, "
                             f"tolerance {tol:g})")
    return float(np.max(np.abs(got - want))) if want.size else 0.0


def winograd_convs(module) -> int:
    """How many convolutions the compiled module runs as Winograd (graph/winograd.py gives each
    one input-transform node)."""
    return sum(1 for n in module.graph.nodes if n.op == "winograd_input")


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def run_model(name: str, trials: int, threads: int, records: Records, reduced: bool = False,
              baselines=("eager", "compile", "ort"), progress: bool = True, seed: int = 0,
              layout: str = "auto", winograd: bool = True, choice: Choice | None = None,
              rounds: int = ROUNDS, memory: bool = False, executor=None) -> ModelResult:
    """One model: compile, check on a held-out input, time beside every baseline variant.
    `choice` picks the variants (default: every variant of the families in `baselines`)."""
    import torch

    from ..graph.compile import compile as compile_model
    from ..models import MODELS

    choice = choice or Choice(families=tuple(baselines))
    spec = MODELS[name]
    model = spec.build(reduced=reduced).eval()
    shape = spec.reduced_shape if reduced else spec.input_shape
    check_seed = seed + CHECK_SEED_OFFSET
    x = aligned_copy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    x_check = aligned_copy(np.random.default_rng(check_seed).standard_normal(shape).astype(np.float32))
    row = ModelResult(name, tuple(shape), layout=layout, winograd=winograd, trials=trials, compile_seed=seed,
                      check_seed=check_seed)
    torch.set_num_threads(threads)
    with torch.inference_mode():
        want = model(torch.from_numpy(x_check)).numpy()
    start = time.perf_counter()
    module = compile_model(model, [torch.from_numpy(x)], target=bench_target(threads), trials=trials,
                           records=records, progress=progress, seed=seed, name=name, layout=layout,
                           winograd=winograd, executor=executor)
    row.tune_s = time.perf_counter() - start
    row.layout = module.layout
    row.tasks = len(module.tasks)
    row.new_trials, row.reused_records = module.tuning["trials"], module.tuning["reused"]
    row.winograd_convs = winograd_convs(module)
    row.tolerance = TOL if row.winograd_convs else TOL_DIRECT
    out = module(x_check)
    out = out[0] if isinstance(out, list) else out
    row.max_abs_error = check_output(f"tilewright {name}", out, want, row.tolerance)
    row.max_rel_error = relative_error(np.asarray(out), want)
    row.peak_bytes = module.peak_bytes
    row.constant_bytes = int(sum(a.nbytes for a in module.constants.values()))
    row.torch_peak_bytes = torch_peak_activation_bytes(model, x)
    row.torch_weight_bytes = torch_weight_bytes(model)
    sides = {"ours": lambda: median_seconds(lambda: module(x), repeat=REPEAT)}
    with tempfile.TemporaryDirectory(prefix="tw_bench_") as workdir:
        def say(b):
            _say(progress, f"  {name}: {b.name}: " + (f"ready in {b.setup_s:.1f} s" if b.run else b.note))

        variants = baseline_variants(model, x, x_check, threads, Path(workdir), choice, say)
        rebuild = {}
        for b in variants:
            row.families[b.name] = b.family
            if b.note:
                row.notes[b.name] = b.note
            if b.extra:
                row.extra[b.name] = b.extra
            if b.run is None:
                continue
            row.setup_s[b.name] = b.setup_s
            row.errors[b.name] = relative_error(b.check, want) if b.check.shape == want.shape else None
            try:
                check_output(b.name, b.check, want, TOL)
            except AssertionError as exc:
                row.notes[b.name] = f"not timed: {exc}"
                continue
            rebuild[b.name] = b.rebuild
            sides[b.name] = lambda fn=b.run: median_seconds(fn, repeat=REPEAT)
        times = alternating_medians(sides, rounds)
        row.ours_s = times.pop("ours")
        row.baselines = times
        if memory:
            measure_footprints(row, rebuild, records, reduced, threads, progress)
    return row


def measure_footprints(row: ModelResult, rebuild: dict, records: Records, reduced: bool, threads: int,
                       progress: bool) -> None:
    """footprint.measure for ours and the fastest variant of each family, one process each."""
    from .footprint import measure

    common = {"model": row.model, "reduced": reduced, "seed": row.compile_seed, "threads": threads}
    jobs = {"ours": ("tilewright", {"side": "ours", "records": str(records.path), "layout": row.layout,
                                    "winograd": row.winograd})}
    for f in FAMILIES:
        best = row.best_of(f)
        if best and rebuild.get(best[0]):
            jobs[f] = (best[0], rebuild[best[0]])
    for key, (variant, spec) in jobs.items():
        _say(progress, f"  {row.model}: memory footprint of {variant}")
        row.footprint[key] = {"variant": variant, **measure({**common, **spec})}


def run_models(models=None, trials: int = 200, threads: int | None = None, out: Path | str = "results",
               records=None, reduced: bool = False, baselines=("eager", "compile", "ort"),
               progress: bool = True, name: str = "models", layout: str = "auto", winograd: bool = True,
               choice: Choice | None = None, rounds: int = ROUNDS, memory: bool = False, executor=None) -> dict:
    from ..models import MODELS

    choice = choice or Choice(families=tuple(baselines))
    target = bench_target(threads)
    threads = threads or target.cores
    store = records if isinstance(records, Records) else Records(records)
    rows, failures = [], []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"trials": trials, "reduced": reduced, "winograd": winograd, "choice": choice, "rounds": rounds,
                "repeat": REPEAT, "memory": memory, "tolerance": TOL, "tolerance_direct": TOL_DIRECT}
    for m in models or list(MODELS):
        try:
            rows.append(run_model(m, trials, threads, store, reduced, progress=progress, layout=layout,
                                  winograd=winograd, choice=choice, rounds=rounds, memory=memory,
                                  executor=executor))
        except Exception as exc:  # one model's failure is reported, the others still run
            failures.append({"model": m, "error": f"{type(exc).__name__}: {exc}"})
        write(out, name, target, rows, failures, threads, settings)  # per model: a long run keeps its rows
    return {"rows": rows, "failures": failures}
