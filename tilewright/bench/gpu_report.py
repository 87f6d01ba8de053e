"""Tables, plot and files of a GPU suite run (`run_gpu_suite`): per-case rows
against the vendor library (cuDNN / cuBLAS / PyTorch's native kernels) with
TF32 off, a second column with PyTorch's TF32 default, per-operator geomeans
against issue 16's goals, the whole-suite geomean, the sums over YOLO-v1's
(and, were they in the suite, OverFeat's) convolution layers, and tuning wall
time per case. Slices of one suite run into the same `out`/`name` merge: a
case's new row replaces its old one, the other rows stay (`merge`)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..errors import TilewrightError
from ..workloads import suite
from . import report
from .report import DEFAULT_WITHIN, geomean

# issue 16: per-operator geomean of (library time / ours), TF32 off on both sides
GPU_GOALS = {"C2D": 1.0, "DIL": 1.2, "GRP": 1.5, "DEP": 2.0, "T2D": 0.9, "T3D": 0.9, "C3D": 0.9, "GEMM": 0.8,
             "GEMV": 0.9}
SUITE_GOAL = 1.2
NETWORKS = {"YOLO-v1": "C2D"}  # network -> the suite operator holding its conv layers


@dataclass
class GpuCaseResult:
    op: str
    case: str
    flops: int
    tilewright_s: float
    max_rel_error: float
    tuned_trials: int
    tune_wall_s: float
    default_s: float | None = None  # the untuned default, re-timed in the same rounds
    torch_s: float | None = None  # the library with TF32 off, fastest variant
    torch_variant: str | None = None
    torch_tf32_s: float | None = None  # PyTorch's TF32 default, fastest variant
    torch_tf32_variant: str | None = None
    errors: dict = field(default_factory=dict)
    count: int = 1  # occurrences in its network when the suite says, else 1

    @property
    def speedup(self) -> float | None:
        return self.torch_s / self.tilewright_s if self.torch_s else None

    @property
    def speedup_tf32(self) -> float | None:
        return self.torch_tf32_s / self.tilewright_s if self.torch_tf32_s else None

    @classmethod
    def from_json(cls, doc: dict) -> GpuCaseResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


def _order(op: str, case: str) -> tuple[int, int]:
    data = suite()
    ops = list(data)
    names = [c["name"] for c in data.get(op, {}).get("cases", [])]
    return (ops.index(op) if op in ops else len(ops), names.index(case) if case in names else len(names))


def merge(path: Path, target_key: str, rows: list[GpuCaseResult], failures: list[dict]):
    """(rows, failures) of the JSON at `path` (if any) with this run's: a case measured now replaces its
    old row or failure, every other case stays. Refuses a file measured on another target."""
    if not path.exists():
        return rows, failures
    doc = json.loads(path.read_text())
    if doc.get("target_key") != target_key:
        raise TilewrightError(f"{path} holds results for another device ({doc.get('target_key')}), not "
                              f"{target_key}; write this run to another --out directory")
    now = {(r.op, r.case) for r in rows} | {(f["op"], f["case"]) for f in failures}
    old = [GpuCaseResult.from_json(c) for c in doc.get("cases", []) if (c["op"], c["case"]) not in now]
    old_fail = [f for f in doc.get("failures", []) if (f["op"], f["case"]) not in now]
    merged = sorted(old + rows, key=lambda r: _order(r.op, r.case))
    return merged, sorted(old_fail + failures, key=lambda f: _order(f["op"], f["case"]))


def _ms(s: float | None) -> str:
    return f"{s * 1e3:.4f}" if s else "n/a"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "n/a"


def _verdict(gm: float | None, goal: float | None) -> str:
    if gm is None or goal is None:
        return ""
    return "met" if gm >= goal else "NOT met"


def network_rows(rows: list[GpuCaseResult]) -> list[str]:
    """Markdown lines: per network, the count-weighted sums of ours and the library over its layers measured
    so far (n of the suite's), and a line for OverFeat, whose layers the suite may not hold."""
    data = suite()
    lines = ["| network | layers measured | weighting | tilewright ms | library ms (TF32 off) | speedup |",
             "|---|---|---|---|---|---|"]
    for net, op in NETWORKS.items():
        mine = [r for r in rows if r.op == op]
        total = len(data[op]["cases"])
        weighting = ("count-weighted" if any(r.count != 1 for r in mine)
                     else "each unique layer once (the suite gives no repeat counts)")
        if not mine or any(not r.torch_s for r in mine):
            lines.append(f"| {net} ({op}) | {len(mine)}/{total} | {weighting} | | n/a | n/a |")
            continue
        ours = sum(r.tilewright_s * r.count for r in mine)
        lib = sum(r.torch_s * r.count for r in mine)
        lines.append(f"| {net} ({op}) | {len(mine)}/{total} | {weighting} | {ours * 1e3:.4f} | {lib * 1e3:.4f} "
                     f"| {lib / ours:.2f}x |")
    if not any("overfeat" in json.dumps(v).lower() for v in data.values()):
        lines.append("| OverFeat | 0/0 | not in the suite: flextensor_suite.json has no OverFeat layers | | | |")
    return lines


def summary(rows: list[GpuCaseResult]) -> list[str]:
    lines = ["| operator | cases | geomean vs library (TF32 off) | goal | | geomean vs PyTorch TF32 default "
             f"| defaults within {DEFAULT_WITHIN}x of tuned | tuning s (max) |", "|---|---|---|---|---|---|---|---|"]
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        gm = geomean([r.speedup for r in mine])
        goal = GPU_GOALS.get(op)
        held = [r.default_s / r.tilewright_s <= DEFAULT_WITHIN for r in mine if r.default_s]
        lines.append(f"| {op} | {len(mine)} | {_x(gm)} | {f'>= {goal}' if goal else ''} | {_verdict(gm, goal)} "
                     f"| {_x(geomean([r.speedup_tf32 for r in mine]))} | {sum(held)}/{len(held)} "
                     f"| {max(r.tune_wall_s for r in mine):.0f} |")
    gm = geomean([r.speedup for r in rows])
    lines.append(f"| whole suite (every case) | {len(rows)} | {_x(gm)} | >= {SUITE_GOAL} | {_verdict(gm, SUITE_GOAL)} "
                 f"| {_x(geomean([r.speedup_tf32 for r in rows]))} | | |")
    return lines


def tables(rows: list[GpuCaseResult]) -> list[str]:
    lines = []
    for op in dict.fromkeys(r.op for r in rows):
        lines += [f"### {op}: {suite()[op]['full_name']}", "",
                  "| case | tilewright ms | GFLOP/s | default ms (x tuned) | library ms (variant), TF32 off | speedup "
                  "| PyTorch TF32 default ms | speedup | trials | tuning s |", "|---" * 10 + "|"]
        for r in (r for r in rows if r.op == op):
            dflt = f"{_ms(r.default_s)} ({r.default_s / r.tilewright_s:.2f}x)" if r.default_s else "n/a"
            lib = f"{_ms(r.torch_s)} ({r.torch_variant})" if r.torch_s else "n/a"
            lines.append(f"| {r.case} | {_ms(r.tilewright_s)} | {r.flops / r.tilewright_s / 1e9:.1f} | {dflt} "
                         f"| {lib} | {_x(r.speedup)} | {_ms(r.torch_tf32_s)} | {_x(r.speedup_tf32)} "
                         f"| {r.tuned_trials} | {r.tune_wall_s:.0f} |")
        lines.append("")
    return lines


def plot(rows: list[GpuCaseResult], path: Path, title: str) -> bool:
    return report.plot(rows, path, title, ylabel="speedup over the library (fp32, TF32 off)")


def _tuning(header: dict) -> str:
    if not header["trials"]:
        return "untuned defaults only (--trials 0: 'tilewright' is the default schedule)"
    return f"<= {header['trials']} trials per case ({header['method']})"


def write(out: Path, name: str, header: dict, rows: list[GpuCaseResult], failures: list[dict]) -> tuple:
    """Merge this run into `name`.json under `out` and write .json, .md and .png; returns (rows, failures)
    of the merged table. `header` holds the device facts and settings (see run_gpu_suite)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    rows, failures = merge(path, header["target_key"], rows, failures)
    doc = {**header, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cases": [asdict(r) for r in rows],
           "failures": failures}
    path.write_text(json.dumps(doc, indent=2, default=str))
    head = [f"FlexTensor suite on {header['device']} ({header['arch']}; driver {header['driver']}, "
            f"{header['compiler']}), fp32, {_tuning(header)}.",
            f"Baseline: PyTorch {header['torch']} on {header['baseline_device'] or 'nothing (no baseline)'}; "
            f"'library' columns: {header['tf32_off']}; second column: {header['tf32_default']}.",
            f"Times: medians of {header['rounds']} alternating rounds (tuned kernel, untuned default, each PyTorch "
            "variant), device-side timing (events) with inputs already on the device; every kernel checked "
            "against the NumPy reference first.", ""]
    text = head + summary(rows) + ["", "#### networks (sums over their conv layers)", ""] + network_rows(rows)
    text += [""] + tables(rows)
    if failures:
        text += ["### failures", ""] + [f"- {f['op']} {f['case']}: {f['error']}" for f in failures]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    plot(rows, out / f"{name}.png", f"tilewright vs PyTorch on {header['device']}")
    return rows, failures


__all__ = ["GPU_GOALS", "SUITE_GOAL", "GpuCaseResult", "merge", "network_rows", "summary", "tables", "write"]
