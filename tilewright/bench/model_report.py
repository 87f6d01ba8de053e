"""The whole-model benchmark's report: JSON with every variant's time, setup
time and error, and the run's provenance; Markdown with one column per
baseline family (its winning variant named), a second table of every variant,
and the notes; a PNG of each family's best against ours."""

from __future__ import annotations

import json
from pathlib import Path

from .baseline import FAMILIES
from .provenance import provenance, provenance_line
from .report import geomean, pyplot


def _ms(s) -> str:
    return f"{s * 1e3:.2f}" if s else "n/a"


def _mib(b) -> str:
    return f"{b / 2**20:.1f}" if b is not None else "n/a"


def _short(name: str, family: str) -> str:
    """The variant's label without its family's name: "torch.compile frozen" -> "frozen"."""
    return name[len(family):].strip() if name.startswith(family) else name


def _rel(r) -> str:
    if r.max_rel_error is None:
        return "n/a"
    return f"{r.max_rel_error:.1e}" + (f" (incl. Winograd, {r.winograd_convs} convs)" if r.winograd_convs else "")


def _footprint(r) -> str:
    cells = []
    for key in ("ours", *FAMILIES):
        f = r.footprint.get(key)
        cells.append("n/a" if not f or "error" in f else _mib(f["run_bytes"]))
    return " / ".join(cells)


def table(rows, memory: bool = False) -> list[str]:
    """The headline table: ours, then each family's fastest variant, then the speedups."""
    fam = " | ".join(f"{f} ms (variant)" for f in FAMILIES)
    head = (f"| model | input | layout | tilewright ms | {fam} | vs fastest | vs eager / compile / ORT | "
            "max rel err ours vs eager | compile s (tasks, new trials) | peak activations MiB ours / eager | "
            "weights MiB ours / PyTorch |")
    lines = [head + (" footprint MiB ours / eager / compile / ORT |" if memory else ""),
             "|---" * (10 + len(FAMILIES) + memory) + "|"]
    for r in rows:
        cells = []
        for f in FAMILIES:
            best = r.best_of(f)
            cells.append(f"{_ms(best[1])} ({_short(best[0], f)})" if best else "n/a")
        speed = f"{r.speedup:.2f}x ({r.fastest[0]})" if r.speedup else "n/a"
        by = " / ".join(f"{v:.2f}x" if v else "n/a" for v in r.speedup_by_family.values())
        line = (f"| {r.model} | {'x'.join(map(str, r.input_shape))} | {r.layout} | {_ms(r.ours_s)} | "
                + " | ".join(cells)
                + f" | {speed} | {by} | {_rel(r)} | {r.tune_s:.0f} ({r.tasks}, {r.new_trials}) | "
                f"{_mib(r.peak_bytes)} / {_mib(r.torch_peak_bytes)} | "
                f"{_mib(r.constant_bytes)} / {_mib(r.torch_weight_bytes)} |")
        lines.append(line + (f" {_footprint(r)} |" if memory else ""))
    g = geomean([r.speedup for r in rows if r.speedup])
    if g:
        per = ", ".join(f"{f} {gf:.2f}x" for f in FAMILIES
                        if (gf := geomean([s for r in rows if (s := r.speedup_by_family[f])])))
        lines += ["", f"Geomean against the fastest baseline of each model: **{g:.2f}x** (against each family's "
                      f"best: {per})."]
    return lines


def variant_table(rows) -> list[str]:
    """Every variant of every model: time, setup time, held-out error, note."""
    lines = ["| model | variant | ms | setup s | max rel err vs eager | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} | tilewright | {_ms(r.ours_s)} | {r.tune_s:.1f} | {_rel(r)} | |")
        for n in r.families:
            err = r.errors.get(n)
            setup = r.setup_s.get(n)
            lines.append(f"| {r.model} | {n} | {_ms(r.baselines.get(n)) if n in r.baselines else 'not timed'} | "
                         f"{f'{setup:.1f}' if setup is not None else 'n/a'} | "
                         f"{f'{err:.1e}' if err is not None else 'n/a'} | {r.notes.get(n, '')} |")
    return lines


def head(target, threads: int, s: dict) -> list[str]:
    """What the tables mean: every method, tolerance and setting, in words."""
    c = s["choice"]
    memory = ("Total footprint (--memory): each side rebuilt in a fresh process (ours: tw.compile from the same "
              "records, layout and Winograd setting; the fastest variant of each family as it was built here); "
              "after importing the libraries of every side (the same list in every process) and making the input, "
              "VmRSS is the base and VmHWM is reset (/proc/self/clear_refs); after the build VmHWM is reset "
              "again and one inference run; footprint = VmHWM - base: weights, packed/transformed weight "
              "copies, code and allocator caches resident after the build, plus the inference's peak (the "
              "JSON's build_bytes also counts the build's transients). " if s["memory"] else
              "Total footprint not measured (pass --memory). ")
    return [
        f"Whole models, batch 1, fp32, on {target}, {threads} threads; {s['trials']} tuning trials per model spread "
        f"over its tasks{' (reduced sizes)' if s['reduced'] else ''}; Winograd {'on' if s['winograd'] else 'off'} "
        f"(tw.compile winograd={s['winograd']}). Times are medians of {s['rounds']} alternating rounds of "
        f"{s['repeat']} timings each, in one process, same input and threads for every side. "
        "The fastest baseline and the speedups are taken over every variant below.",
        "",
        "Baselines: PyTorch eager under inference_mode, NCHW and channels_last (input conversion timed); "
        f"torch.compile (inductor) variants {', '.join(c.compile_modes) or 'none'} (frozen: inductor freezing; "
        "max-autotune: that mode's options plus freezing), layouts "
        f"{', '.join(c.compile_layouts) or 'none'} (channels_last for 4-d inputs, input conversion timed), "
        "compile times with inductor's on-disk caches as they stand; ONNX Runtime (CPU provider, all graph "
        f"optimizations, {threads} intra-op threads, 1 inter-op) on the exports of "
        f"{', '.join(c.exporters) or 'no exporter'} (TorchScript at opset 17, dynamo at opset 18), and for a "
        "transformer each also through onnxruntime.transformers' BERT optimizer. Families run: "
        f"{', '.join(c.families) or 'none'}.",
        "",
        f"Correctness: the model is compiled, tuned and timed on the input of seed s; every side's output is "
        f"checked against PyTorch eager on a held-out input (seed s+1) as max|out - eager| / max|eager|: at most "
        f"{s['tolerance']:g} for every baseline and for ours with Winograd, {s['tolerance_direct']:g} for ours "
        "without; ours' error is labelled when it includes Winograd F(4x4, 3x3)'s. Weights are random (seeded).",
        "",
        "Memory: peak activations where the side can tell them (ours: the memory plan's arena with the kernels' "
        "temporaries, the output and the most a kernel allocates while it runs; eager: its profiler's allocation "
        "events; torch.compile and ONNX Runtime do not expose theirs). Weights: ours as the module holds them "
        f"(packed and Winograd-transformed copies included), PyTorch's parameters and buffers. {memory}",
    ]


def plot(rows, path: Path, title: str) -> bool:
    plt = pyplot()
    if plt is None or not rows:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows)), 4))
    width = 0.8 / (len(FAMILIES) + 1)
    for k, n in enumerate(["tilewright", *FAMILIES]):
        vals = [r.ours_s if n == "tilewright" else (b[1] if (b := r.best_of(n)) else 0) for r in rows]
        ref = [r.ours_s or 1 for r in rows]
        ax.bar([i + k * width for i in range(len(rows))], [v / f if v else 0 for v, f in zip(vals, ref)], width,
               label=n if n == "tilewright" else f"{n} (best variant)")
    ax.set_xticks([i + 0.4 for i in range(len(rows))], [r.model for r in rows])
    ax.set_ylabel("latency relative to tilewright (lower is faster)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(out: Path, name: str, target, rows, failures, threads: int, settings: dict) -> None:
    """<out>/<name>.json, .md and .png. `settings`: trials, reduced, winograd, choice (model_baselines.Choice),
    rounds, repeat, memory, tolerance, tolerance_direct."""
    s = settings
    prov = provenance(threads, target, trials=s["trials"], rounds=s["rounds"], timings_per_round=s["repeat"],
                      reduced_sizes=s["reduced"], winograd=s["winograd"], memory=s["memory"])
    doc = {"target_key": target.key, "threads": threads, "trials_per_model": s["trials"],
           "reduced_sizes": s["reduced"], "winograd": s["winograd"], "rounds": s["rounds"],
           "timings_per_round": s["repeat"], "baselines": s["choice"].as_dict(), "memory": s["memory"],
           "tolerance": {"baselines": s["tolerance"], "ours_winograd": s["tolerance"],
                         "ours_direct": s["tolerance_direct"]},
           "provenance": prov, "models": [r.as_json() for r in rows], "failures": failures}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=2, default=str))
    text = head(target, threads, s) + ["", provenance_line(prov), ""] + table(rows, s["memory"])
    text += ["", "### every variant", ""] + variant_table(rows)
    notes = [f"- {r.model}: {n}: {why}" for r in rows for n, why in r.notes.items()]
    notes += [f"- {r.model}: footprint of {f['variant']}: {f['error']}" for r in rows for f in r.footprint.values()
              if "error" in f]
    if notes:
        text += ["", "### notes (variants not timed, and what to know about the others)", ""] + notes
    if failures:
        text += ["", "### failures", ""] + [f"- {f['model']}: {f['error']}" for f in failures]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    plot(rows, out / f"{name}.png", "tilewright vs the best of eager / torch.compile / ONNX Runtime")
