"""Does the learned cost model (issue 14) help? Two measurements on FlexTensor C2D cases.

(a) Held-out rank correlation: records of several workloads (the training
    cases below, tuned first with the Q-method); for each workload, a model
    trained on the *other* workloads' records ranks this one's measured
    schedules; Spearman correlation with the measured times, per workload.
    Beside it, the same model family trained on half of the workload's own
    records and tested on the other half (what the model can reach with
    in-workload data).
(b) Trials to 90%: each test case is tuned with the model (trained on the
    training cases' records: transfer, the test case itself is new) and
    without it, same seeds, three seeds per case, from scratch (no heuristic
    default seeding, no early stop, Q-method). Reported: the first trial whose
    best-so-far reaches 90% of the best that *any* run of the case found
    (a common bar), of the run's own final best, and the best at the end.

All records go to a work directory (never the user's records): the
training store is built once (`collect`), and each (b) run with the model
gets its own copy of it, so seeds and cases do not see each other.

    python benchmarks/cost_model_eval.py                      # everything
    python benchmarks/cost_model_eval.py --phase collect heldout
    python benchmarks/cost_model_eval.py --phase trials --trials 60 --test yolo_conv2 yolo_conv8

Results: benchmarks/results/cost_model_eval.{json,md} (merged per phase)."""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tilewright as tw
import tilewright.search.prescreen as prescreen
from tilewright.analysis import workload_key
from tilewright.backends import backend_for
from tilewright.records import Records
from tilewright.search.cost_model import RankModel, spearman
from tilewright.search.feature_store import FeatureStore, features_path
from tilewright.search.features import N_FEATURES, loop_nest_features
from tilewright.search.prescreen import TrainingSet
from tilewright.space import Point
from tilewright.workloads.builders import suite_program

TRAIN = ["yolo_conv3", "yolo_conv4", "yolo_conv7", "yolo_conv15", "yolo_conv17", "yolo_conv22", "yolo_conv23"]
TEST = ["yolo_conv2", "yolo_conv5", "yolo_conv8", "yolo_conv18"]
RESULTS = Path(__file__).parent / "results"


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _save(out: dict, path: Path) -> None:
    path.write_text(json.dumps(out, indent=1))
    (RESULTS / "cost_model_eval.md").write_text(markdown(out))


# ---- collect: the training store ------------------------------------------------------------------
def collect(workdir: Path, cases: list[str], trials: int) -> dict:
    store_path = workdir / "train.sqlite"
    done = {w for w, *_ in Records(store_path).workloads()}
    prescreen.MIN_RECORDS = 10 ** 9  # keep features of what is measured, never pre-screen: plain Q-method data
    out = {}
    try:
        for case in cases:
            tensors = suite_program("C2D", case)
            if workload_key([tensors[-1]]) in done:
                print(f"collect {case}: already in {store_path}", flush=True)
                continue
            start = time.perf_counter()
            r = tw.tune(tensors, trials=trials, method="q", seed=0, records=store_path, progress=False)
            out[case] = {"trials": len(r.history), "best_s": r.best_cost, "wall_s": time.perf_counter() - start}
            print(f"collect {case}: {len(r.history)} trials, best {r.best_cost * 1e3:.3f} ms, "
                  f"{out[case]['wall_s']:.0f} s", flush=True)
    finally:
        prescreen.MIN_RECORDS = 48
    featurise(store_path, cases)
    return out


def featurise(store_path: Path, cases: list[str]) -> int:
    """Give every record of `cases` in the store features of today's FEATURE_VERSION (records outlive
    feature changes: the programs are known here, so the vectors can be computed again)."""
    target = tw.as_target("cpu")
    backend = backend_for(target)
    fstore = FeatureStore(features_path(store_path))
    have = fstore.for_target(target.key)
    rows = Records(store_path).measurements(target.key)
    new = []
    for case in cases:
        tensors = suite_program("C2D", case)
        outputs = [tensors[-1]]
        wkey = workload_key(outputs)
        space, plan = backend.space(outputs, target)
        for text in dict.fromkeys(p for w, p, _, kind in rows if w == wkey and kind != "instantiate"):
            if (wkey, text) in have:
                continue
            try:
                p = Point.from_json(text)
                func = backend.lower(backend.apply(outputs, plan, p), tensors, "kernel", target)
            except (ValueError, tw.TilewrightError):
                continue
            new.append((wkey, target.key, text, loop_nest_features(func, target)))
    fstore.put_many(new)
    fstore.close()
    print(f"featurised {len(new)} records", flush=True)
    return len(new)


def training_set(store_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    target = tw.as_target("cpu")
    data = TrainingSet()
    for w, p, costs, kind in Records(store_path).measurements(target.key):
        data.add(w, p, costs, kind)
    data.vectors.update(FeatureStore(features_path(store_path)).for_target(target.key))
    return data.arrays()


# ---- (a) held-out rank correlation ----------------------------------------------------------------
def heldout(workdir: Path, cases: list[str], seed: int = 0) -> list[dict]:
    X, costs, groups = training_set(workdir / "train.sqlite")
    names = {workload_key([suite_program("C2D", c)[-1]]): c for c in cases}
    rows = []
    for w in sorted(set(groups), key=lambda g: names.get(g, g)):
        test = (groups == w) & np.isfinite(costs)
        train = groups != w
        model = RankModel(N_FEATURES, seed=seed)
        weights = {g: 1.0 for g in set(groups[train])}
        model.fit(X[train], costs[train], groups[train], group_weights=weights)
        score = model.predict(X[test])
        rho = spearman(score, -costs[test])
        # what the model reaches on this workload's own data: train on half, test on the other half
        idx = np.flatnonzero(test)
        half = np.random.default_rng(seed).permutation(idx)
        a, b = half[: len(half) // 2], half[len(half) // 2:]
        own = RankModel(N_FEATURES, seed=seed)
        own.fit(X[a], costs[a], groups[a])
        rho_own = spearman(own.predict(X[b]), -costs[b]) if own.ready else math.nan
        k = max(1, int(round(0.1 * test.sum())))
        top_pred = np.argsort(-score)[:k]
        best_of_top = costs[test][top_pred].min() / costs[test].min()
        rows.append({"case": names.get(w, w), "workload": w, "records": int(test.sum()),
                     "train_records": int(train.sum()), "spearman": rho, "spearman_own_half": rho_own,
                     "best_of_model_top10pct_vs_best": float(best_of_top)})
        print(f"heldout {rows[-1]['case']}: n={rows[-1]['records']} spearman {rho:.3f} "
              f"(own half {rho_own:.3f}); best of the model's top 10% is {best_of_top:.2f}x the best", flush=True)
    return rows


# ---- (b) trials to 90% ----------------------------------------------------------------------------
def tune_run(case: str, seed: int, trials: int, with_model: bool, train_store: Path) -> dict:
    tensors = suite_program("C2D", case)
    with tempfile.TemporaryDirectory(prefix="cm-eval-") as tmp:
        path = Path(tmp) / "records.sqlite"
        if with_model:
            shutil.copy(train_store, path)
            shutil.copy(features_path(train_store), features_path(path))
        start = time.perf_counter()
        r = tw.tune(tensors, trials=trials, method="q", seed=seed, records=path, early_stop=trials, progress=False,
                    from_default=False, cost_model="auto" if with_model else "off")
        wall = time.perf_counter() - start
    return {"case": case, "seed": seed, "model": with_model, "best_so_far_s": [t.best_cost for t in r.history],
            "elapsed_s": [t.elapsed_s for t in r.history], "wall_s": wall, "cost_model": r.cost_model,
            "errors": r.errors}


def first_reaching(curve: list[float], bar: float, fraction: float = 0.9) -> int | None:
    for n, c in enumerate(curve, 1):
        if math.isfinite(c) and bar / c >= fraction:
            return n
    return None


def summarise(runs: list[dict]) -> list[dict]:
    """Per case and mode: trials to 90% of the case's best over all runs (a common bar), of the run's own
    final best, and of the *plain* run's final best with the same seed (how soon each reaches what the
    search without the model ends with); best-so-far at a few trial counts."""
    rows = []
    for case in dict.fromkeys(r["case"] for r in runs):
        mine = [r for r in runs if r["case"] == case]
        bar = min(min(r["best_so_far_s"]) for r in mine)
        plain_final = {r["seed"]: r["best_so_far_s"][-1] for r in mine if not r["model"]}
        for r in mine:
            r["to90_common"] = first_reaching(r["best_so_far_s"], bar)
            r["to90_own"] = first_reaching(r["best_so_far_s"], r["best_so_far_s"][-1])
            r["to90_plain"] = first_reaching(r["best_so_far_s"], plain_final.get(r["seed"], math.inf))
            r["final_best_s"] = r["best_so_far_s"][-1]
        for model in (False, True):
            rs = [r for r in mine if r["model"] is model]
            if not rs:
                continue
            trials = len(rs[0]["best_so_far_s"])
            common = [r["to90_common"] if r["to90_common"] is not None else trials + 1 for r in rs]
            checkpoints = [n for n in (15, 30, trials) if n <= trials]
            rows.append({"case": case, "model": model, "seeds": [r["seed"] for r in rs],
                         "to90_common": [r["to90_common"] for r in rs], "to90_common_median": float(np.median(common)),
                         "to90_own": [r["to90_own"] for r in rs], "to90_plain": [r["to90_plain"] for r in rs],
                         "best_ms_at": {n: [r["best_so_far_s"][n - 1] * 1e3 for r in rs] for n in checkpoints},
                         "final_best_ms": [r["final_best_s"] * 1e3 for r in rs], "bar_ms": bar * 1e3,
                         "wall_s": [round(r["wall_s"]) for r in rs]})
    return rows


def overall(summary: list[dict]) -> dict:
    """Across cases and seeds: geometric-mean ratio model / plain of the best time at each checkpoint, the
    summed trials to 90% of the plain run's final best (a run that never gets there counts trials + 1),
    and how many seed pairs the model's final best beat the plain one's."""
    out: dict = {"best_ratio_at": {}, "pairs": 0, "model_final_better": 0}
    by = {(r["case"], r["model"]): r for r in summary}
    plain_t, model_t = [], []
    for (case, model), r in by.items():
        if model or (case, True) not in by:
            continue
        m = by[(case, True)]
        trials = max(int(n) for n in r["best_ms_at"])
        k = min(len(m["final_best_ms"]), len(r["final_best_ms"]))  # seeds run both ways so far (same order)
        for n in r["best_ms_at"]:
            out["best_ratio_at"].setdefault(n, []).extend(
                np.log(np.array(m["best_ms_at"][n][:k]) / np.array(r["best_ms_at"][n][:k])).tolist())
        plain_t += [t if t is not None else trials + 1 for t in r["to90_plain"][:k]]
        model_t += [t if t is not None else trials + 1 for t in m["to90_plain"][:k]]
        out["pairs"] += k
        out["model_final_better"] += sum(a < b for a, b in zip(m["final_best_ms"][:k], r["final_best_ms"][:k]))
    out["best_ratio_at"] = {n: float(np.exp(np.mean(v))) for n, v in out["best_ratio_at"].items()}
    out["to90_plain_sum"] = {"plain": int(sum(plain_t)), "model": int(sum(model_t))}
    out["to90_plain_median"] = {"plain": float(np.median(plain_t)) if plain_t else None,
                                "model": float(np.median(model_t)) if model_t else None}
    return out


def trials_phase(workdir: Path, cases: list[str], seeds: list[int], trials: int, out: dict, out_path: Path) -> None:
    runs = out.setdefault("trials", {}).setdefault("runs", [])
    out["trials"].update({"trials": trials, "seeds": seeds, "cases": cases,
                          "command": "python " + " ".join(sys.argv)})
    for case in cases:
        for seed in seeds:
            for with_model in (False, True):
                if any(r["case"] == case and r["seed"] == seed and r["model"] is with_model
                       and len(r["best_so_far_s"]) == trials for r in runs):
                    continue
                r = tune_run(case, seed, trials, with_model, workdir / "train.sqlite")
                runs.append(r)
                print(f"trials {case} seed {seed} {'model' if with_model else 'plain'}: best "
                      f"{min(r['best_so_far_s']) * 1e3:.3f} ms, {r['wall_s']:.0f} s; {r['cost_model']}", flush=True)
                out["trials"]["summary"] = summarise(runs)
                out["trials"]["overall"] = overall(out["trials"]["summary"])
                _save(out, out_path)


# ---- report ---------------------------------------------------------------------------------------
def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def markdown(out: dict) -> str:
    lines = ["# Learned cost model: evaluation (issue 14)", "",
             f"host: {out.get('host', '?')}; {out.get('date', '')}", ""]
    if "collect" in out:
        lines += ["Training records: " + ", ".join(f"{c} ({v['trials']} trials)" for c, v in out["collect"].items())
                  + " (Q-method, seed 0, model off).", ""]
    if "heldout" in out:
        lines += ["## (a) Held-out rank correlation (train on the other workloads, test on one)", "",
                  "| case | records | Spearman (transfer) | Spearman (own half) | best of model's top 10% / best |",
                  "|---|---|---|---|---|"]
        for r in out["heldout"]:
            lines.append(f"| {r['case']} | {r['records']} | {_fmt(r['spearman'])} | {_fmt(r['spearman_own_half'])} "
                         f"| {r['best_of_model_top10pct_vs_best']:.2f}x |")
        rhos = [r["spearman"] for r in out["heldout"] if r["spearman"] == r["spearman"]]
        if rhos:
            lines += ["", f"mean held-out Spearman: {np.mean(rhos):.3f}"]
        lines.append("")
    if out.get("trials", {}).get("summary"):
        t = out["trials"]
        lines += [f"## (b) Trials to 90% ({t['trials']} trials, Q-method from scratch, seeds {t['seeds']})", "",
                  f"`{t.get('command', '')}`", "",
                  "Trials until the best-so-far is within 90% of: the best any run of the case found (common), "
                  "the run's own final best (own), the final best of the run *without* the model with the same "
                  "seed (plain). `-`: not within the budget.", "",
                  "| case | model | to 90%: common | own | plain | best ms at trial " +
                  "; ".join(map(str, t["summary"][0]["best_ms_at"])) + " (each: seeds in order) | wall s |",
                  "|---|---|---|---|---|---|---|"]
        for r in t["summary"]:
            at = "; ".join(", ".join(f"{v:.2f}" for v in vs) for vs in r["best_ms_at"].values())
            lines.append(f"| {r['case']} | {'on' if r['model'] else 'off'} | {', '.join(map(_fmt, r['to90_common']))} "
                         f"| {', '.join(map(_fmt, r['to90_own']))} | {', '.join(map(_fmt, r['to90_plain']))} | {at} "
                         f"| {', '.join(map(str, r['wall_s']))} |")
        o = t.get("overall")
        if o and o["pairs"]:  # none until a case has both runs of a seed
            ratios = ", ".join(f"trial {n}: {v:.2f}" for n, v in o["best_ratio_at"].items())
            lines += ["", f"Model on / off, geometric mean of the best time so far over cases and seeds: {ratios} "
                      f"(< 1: the model's runs are ahead). Trials to 90% of the plain run's final best, summed over "
                      f"{o['pairs']} seed pairs (never = trials + 1): off {o['to90_plain_sum']['plain']}, on "
                      f"{o['to90_plain_sum']['model']}; median off {o['to90_plain_median']['plain']:.0f}, on "
                      f"{o['to90_plain_median']['model']:.0f}. The model's final best beat the plain run's in "
                      f"{o['model_final_better']} of {o['pairs']} pairs."]
        lines.append("")
    lines += [f"- {n}" for n in out.get("notes", [])]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phase", nargs="+", default=["collect", "heldout", "trials"],
                    choices=["collect", "featurise", "heldout", "trials", "report"])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tilewright-cost-model-eval")
    ap.add_argument("--train", nargs="+", default=TRAIN)
    ap.add_argument("--test", nargs="+", default=TEST)
    ap.add_argument("--train-trials", type=int, default=100)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(exist_ok=True)
    out_path = RESULTS / "cost_model_eval.json"
    out = _load(out_path)
    out.update({"host": f"{tw.as_target('cpu')} ({platform.node()})", "date": time.strftime("%Y-%m-%d %H:%M")})
    if "collect" in args.phase:
        out["collect"] = {**out.get("collect", {}), **collect(args.workdir, args.train, args.train_trials)}
        _save(out, out_path)
    if "featurise" in args.phase:
        featurise(args.workdir / "train.sqlite", args.train)
    if "heldout" in args.phase:
        out["heldout"] = heldout(args.workdir, args.train)
        _save(out, out_path)
    if "trials" in args.phase:
        trials_phase(args.workdir, args.test, args.seeds, args.trials, out, out_path)
    if "report" in args.phase and out.get("trials", {}).get("runs"):  # summaries again from the stored runs
        out["trials"]["summary"] = summarise(out["trials"]["runs"])
        out["trials"]["overall"] = overall(out["trials"]["summary"])
        _save(out, out_path)
    print(markdown(out))


if __name__ == "__main__":
    main()
