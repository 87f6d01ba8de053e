"""A model bench (`int8_model`, `pt2e_model`: one JSON with an "ms" table per side) run in N separate
processes one after another, each side's time over the first side's as the median with its min-max.

The same discard rule as `bench/spread.py`: nothing is discarded; a process that fails is listed and
its run counts as missing.

    python -m tilewright.bench.repeat --processes 3 --out DIR -- int8_model --model resnet50
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def summarize(docs: list[dict]) -> str:
    """The Markdown table: per side its median ms and its speedup vs the first side (median, min-max)."""
    sides = list(docs[0]["ms"])
    ours = sides[0]
    lines = [f"{len(docs)} processes; {docs[0]['provenance']['commit']}", "",
             f"| side | median ms | {ours} faster by: median | min-max |", "|---|---:|---:|---|"]
    for side in sides:
        ratios = [d["ms"][side] / d["ms"][ours] for d in docs if side in d["ms"]]
        ms = statistics.median(d["ms"][side] for d in docs if side in d["ms"])
        lines.append(f"| {side} | {ms:.2f} | {statistics.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="-- <module under tilewright.bench> <its arguments>")
    a = ap.parse_args(argv)
    cmd = a.bench[1:] if a.bench[:1] == ["--"] else a.bench
    if not cmd:
        ap.error("give the bench after --, e.g. -- int8_model --model resnet50")
    docs, failed = [], []
    for i in range(a.processes):
        out = a.out / f"run{i}"
        proc = subprocess.run([sys.executable, "-m", f"tilewright.bench.{cmd[0]}", *cmd[1:], "--out", str(out)])
        found = sorted(out.glob("*.json"))
        if proc.returncode or not found:
            failed.append(f"run{i}: exit {proc.returncode}")
            continue
        docs.append(json.loads(found[0].read_text()))
    if not docs:
        print("every process failed: " + "; ".join(failed))
        return 1
    text = summarize(docs) + ("\n\nFailed: " + "; ".join(failed) if failed else "")
    (a.out / "repeat.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
