"""A model compiled once with dynamic batch and sequence (`tw.compile(..., dynamic=)`) beside a static
compile of each shape it is called with, in one process and one harness; PyTorch eager is timed for
context only (not its best configuration: the goal is set against the static compile).

Hugging Face BERT-base (default config, seeded random weights), batch in [1, 8] run in slices on the
compiled batch sizes 1, 2, 4, 8; sequence lengths 16, 128 and 512 compiled up front, and a length
never declared (100) compiled at its first call, whose time is reported. Every side's output is
checked against PyTorch eager on the same input (largest difference relative to the largest output)
before any time counts.

    python -m tilewright.bench.dynamic_shapes --out benchmarks/results/dynamic_bert
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, publish
from .timing import alternating_medians, median_seconds

SHAPES = [(b, s) for s in (16, 128, 512) for b in (1, 3, 6, 8)] + [(5, 100)]


def run(shapes, threads: int, rounds: int, records: Path | None, layers: int | None) -> dict:
    import torch
    import transformers as T

    import tilewright as tw

    from .transformers_models import last_hidden

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = T.BertConfig() if layers is None else T.BertConfig(num_hidden_layers=layers)
    net = last_hidden(T.BertModel(config))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        store = records or Path(tmp) / "records.sqlite"
        batch, seq = tw.Dim("batch", 1, 8), tw.Dim("seq", 16, 512, sizes=(16, 128, 512))
        start = time.perf_counter()
        dynamic = tw.compile(net, (torch.zeros(2, 16, dtype=torch.int64),), dynamic={0: {0: batch, 1: seq}},
                             records=store, progress=False)
        compile_s = time.perf_counter() - start
        rows = []
        for b, s in shapes:
            x = rng.integers(0, config.vocab_size, (b, s)).astype(np.int64)
            new = (b, s) not in dynamic.modules and all(k[1] != s for k in dynamic.modules)
            start = time.perf_counter()
            got = dynamic(x)
            first_s = time.perf_counter() - start
            start = time.perf_counter()
            static = tw.compile(net, (torch.from_numpy(x),), records=store, progress=False)
            static_s = time.perf_counter() - start
            with torch.inference_mode():
                want = net(torch.from_numpy(x)).numpy()
            largest = float(np.abs(want).max())
            errors = {"dynamic": float(np.abs(got - want).max()) / largest,
                      "static": float(np.abs(static(x) - want).max()) / largest}
            if max(errors.values()) > 1e-3:
                raise AssertionError(f"batch {b}, sequence {s}: output differs from eager by {errors}")
            with torch.inference_mode():
                ms = {k: v * 1e3 for k, v in alternating_medians(_sides(dynamic, static, net, x), rounds).items()}
            rows.append({"batch": b, "seq": s, "ms": ms, "plan": dynamic.plan((b, s)), "first_call_s": first_s,
                         "compiled_at_first_call": new, "static_compile_s": static_s, "rel_error": errors})
            print(f"batch {b} seq {s}: {ms}", flush=True)
    return {"model": "hf-bert-base" if layers is None else f"hf-bert-{layers}-layers", "threads": threads,
            "compile_s": round(compile_s, 1), "specializations": len(dynamic.modules), "rows": rows,
            "split_reason": None if dynamic.split else dynamic.split_reason, "provenance": provenance(threads)}


def _sides(dynamic, static, net, x: np.ndarray) -> dict:
    import torch

    ids = torch.from_numpy(x)
    return {"dynamic": lambda: median_seconds(lambda: dynamic(x), repeat=3),
            "static": lambda: median_seconds(lambda: static(x), repeat=3),
            "PyTorch eager": lambda: median_seconds(lambda: net(ids), repeat=3)}


def markdown(doc: dict) -> str:
    lines = [f"{doc['model']}, dynamic batch [1, 8] x sequence [16, 512], default schedules, {doc['threads']} threads; "
             f"{provenance_line(doc['provenance'])}", "",
             f"One `tw.compile(..., dynamic=)`: {doc['compile_s']} s, "
             f"{doc['specializations']} specializations at the end of the run.", "",
             "| batch | seq | dynamic ms | static ms | dynamic / static | PyTorch eager ms | runs (bucket: real) | "
             "first call s |", "|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in doc["rows"]:
        ms = r["ms"]
        plan = " + ".join(f"{b}:{t}" for b, t in r["plan"])
        first = f"{r['first_call_s']:.1f}" + (" (compiled)" if r["compiled_at_first_call"] else "")
        lines.append(f"| {r['batch']} | {r['seq']} | {ms['dynamic']:.1f} | {ms['static']:.1f} | "
                     f"{ms['dynamic'] / ms['static']:.2f}x | {ms['PyTorch eager']:.1f} | {plan} | {first} |")
    ratios = [r["ms"]["dynamic"] / r["ms"]["static"] for r in doc["rows"]]
    lines += ["", f"dynamic / static: geomean {np.exp(np.mean(np.log(ratios))):.2f}x, worst {max(ratios):.2f}x "
                  "(goal: every shape within 1.2x)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--layers", type=int, help="fewer encoder layers than BERT-base's 12 (a quick run)")
    p.add_argument("--shapes", help="batch x seq pairs, e.g. 1x16,3x128 (default: the table's)")
    p.add_argument("--records", type=Path, help="the tuning records (default: a fresh store per run)")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    shapes = SHAPES if not a.shapes else [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    doc = run(shapes, a.threads, a.rounds, a.records, a.layers)
    return publish(a.out, "dynamic_shapes", doc, markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())
