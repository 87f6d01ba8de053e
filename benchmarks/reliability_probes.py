"""Hostile probes of tilewright (issue 13), each run in its own subprocess and classified.

    .venv/bin/python benchmarks/reliability_probes.py [--only CLASS[,CLASS]] [--name SUBSTR] [--json out.json]

A probe is a small Python snippet (benchmarks/reliability_probe_list.py) with an expectation
taken from the documented contract (README, docstrings, issue 13's "What to build"):
`ok` (it must succeed; the snippet compares any result with NumPy / `tw.evaluate`),
`error` (a TilewrightError whose message contains the probe's substring) or `either`.
Each runs in a fresh interpreter with its own TILEWRIGHT_CACHE_DIR under a temporary
directory, one at a time, with a timeout, so a SIGSEGV/SIGFPE or a hang is observed, not
suffered. Outcomes:

  ok               correct behaviour (an expected success, equal to the reference)
  clear_error      an expected TilewrightError whose message names the thing at fault
  unclear_error    a TilewrightError whose message lacks the expected name
  false_error      a TilewrightError where the contract promises success
  no_error         an illegal request accepted silently (no error, nothing observably wrong)
  raw_traceback    any other exception (KeyError, TypeError, sqlite3.*, OSError, MemoryError, ...)
  crash            the subprocess died by a signal, exited without a report, or hung past the timeout
  wrong_result     output differing from the reference without an error
  record_lost      a measurement that should be in the records database is not

The table counts class x outcome; every probe that is not ok/clear_error is listed with the
first line of its message. The report's "clear errors" column of issue 13 is clear_error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

OUTCOMES = ["ok", "clear_error", "unclear_error", "false_error", "no_error", "raw_traceback", "crash",
            "wrong_result", "record_lost"]
GOOD = {"ok", "clear_error"}


@dataclass(frozen=True)
class Probe:
    name: str
    cls: str
    code: str
    expect: str = "ok"  # ok | error | either
    match: str | None = None  # substring the error message must contain
    timeout: float = 60.0
    env: dict = field(default_factory=dict)  # extra environment ("" removes a variable)


@dataclass
class Outcome:
    name: str
    cls: str
    outcome: str
    message: str
    seconds: float
    expect: str
    match: str | None
    returncode: int | None = None
    exc_type: str | None = None
    stderr_tail: str = ""


# Runs inside the probe's subprocess: the helpers a snippet may use, then the snippet, then one
# JSON report to the file PROBE_RESULT (stdout/stderr stay free for whatever the library prints).
PRELUDE = r'''
import json, os, subprocess, sys, time, traceback
from pathlib import Path
import numpy as np
import tilewright as tw
TMP = Path(os.environ["PROBE_TMP"]); PY = sys.executable; ROOT = Path(os.environ["PROBE_ROOT"])
class WrongResult(Exception): pass
class RecordLost(Exception): pass
class Accepted(Exception): pass
def rand(shape, dtype="float32", lo=-4, hi=4, seed=0):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype); return r.integers(max(lo, info.min), min(hi, info.max) + 1, size=shape).astype(dtype)
    return r.uniform(lo, hi, size=shape).astype(dtype)
def same(got, want, what="output"):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise WrongResult(f"{what}: shape {got.shape}, reference {want.shape}")
    if want.dtype.kind == "f":
        bad = ~np.isclose(got.astype("float64"), want.astype("float64"), rtol=1e-4, atol=1e-5, equal_nan=True)
    else:
        bad = got != want
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise WrongResult(f"{what}: {int(bad.sum())} of {bad.size} elements differ from the reference "
                          f"(at {list(i)}: got {got[i]!r}, want {want[i]!r})")
def run_vs_ref(s, args, ins, name="kernel", target="cpu"):
    """Build `s`, run it on the input arrays `ins` (outputs zeroed), compare every output with tw.evaluate."""
    k = tw.build(s, args, target=target, name=name)
    outs = [np.zeros([int(d) for d in t.shape], t.dtype.name if hasattr(t.dtype, "name") else str(t.dtype))
            for t in args[len(ins):]]
    k(*ins, *outs)
    want = tw.evaluate(list(args[len(ins):]), dict(zip(args[:len(ins)], ins)))
    want = want if isinstance(want, (list, tuple)) else [want]
    for t, g, w in zip(args[len(ins):], outs, want):
        same(g, w, f"output {t.name!r}")
    return k
def accepted(what):
    raise Accepted(what)
def _report(**kw):
    Path(os.environ["PROBE_RESULT"]).write_text(json.dumps(kw))
'''

WRAPPER = PRELUDE + r'''
_code = Path(os.environ["PROBE_CODE"]).read_text()
try:
    exec(compile(_code, "<probe>", "exec"), dict(globals()))
except tw.TilewrightError as e:
    _report(status="tw_error", type=type(e).__name__, message=str(e))
except WrongResult as e:
    _report(status="wrong_result", type="WrongResult", message=str(e))
except RecordLost as e:
    _report(status="record_lost", type="RecordLost", message=str(e))
except Accepted as e:
    _report(status="accepted", type="Accepted", message=str(e))
except BaseException as e:
    tb = traceback.format_exc()
    _report(status="exception", type=type(e).__module__ + "." + type(e).__qualname__, message=str(e), tb=tb[-3000:])
else:
    _report(status="passed", type=None, message="")
'''


def _first_line(text: str, n: int = 160) -> str:
    line = next((x for x in str(text).splitlines() if x.strip()), "")
    return line[:n]


def classify(probe: Probe, report: dict | None, returncode: int | None, timed_out: bool) -> tuple[str, str]:
    """The outcome of one probe from its report (None when the subprocess left none)."""
    if timed_out:
        return "crash", f"hung past the {probe.timeout:.0f} s timeout"
    if report is None:
        if returncode is not None and returncode < 0:
            try:
                sig = signal.Signals(-returncode).name
            except ValueError:
                sig = str(-returncode)
            return "crash", f"killed by {sig}"
        return "crash", f"exited with code {returncode} without a report"
    status, msg = report.get("status"), report.get("message") or ""
    typ = report.get("type")
    if status == "passed":
        if probe.expect == "error":
            return "no_error", f"expected an error naming {probe.match!r}, got none"
        return "ok", ""
    if status == "tw_error":
        line = f"{typ}: {msg}"
        if probe.expect == "ok":
            return "false_error", line
        if probe.match is None or probe.match.lower() in msg.lower():
            return "clear_error", line
        return "unclear_error", f"{line}  [lacks {probe.match!r}]"
    if status == "wrong_result":
        return "wrong_result", msg
    if status == "record_lost":
        return "record_lost", msg
    if status == "accepted":
        return "no_error", msg
    return "raw_traceback", f"{typ}: {msg}"


def run_probe(probe: Probe, workdir: Path | None = None) -> Outcome:
    """Run one probe in a fresh interpreter and classify it."""
    own = workdir is None
    base = Path(tempfile.mkdtemp(prefix="twprobe-")) if own else workdir
    tmp = base / probe.name.replace("/", "_")
    tmp.mkdir(parents=True, exist_ok=True)
    code, result = tmp / "probe_code.py", tmp / "probe_result.json"
    code.write_text(probe.code)
    env = {**os.environ, "TILEWRIGHT_CACHE_DIR": str(tmp / "cache"), "PROBE_TMP": str(tmp),
           "PROBE_CODE": str(code), "PROBE_RESULT": str(result), "PROBE_ROOT": str(ROOT),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for k, v in probe.env.items():
        if v == "":
            env.pop(k, None)
        else:
            env[k] = v
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER], cwd=tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=probe.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # the probe's own session: its children go too
        _, err = proc.communicate()
    seconds = time.perf_counter() - start
    report = None
    if result.exists():
        try:
            report = json.loads(result.read_text())
        except ValueError:
            report = None
    outcome, msg = classify(probe, report, proc.returncode, timed_out)
    return Outcome(probe.name, probe.cls, outcome, msg, round(seconds, 2), probe.expect, probe.match,
                   proc.returncode, (report or {}).get("type"), (err or "")[-2000:])


def table(results: list[Outcome]) -> str:
    classes = list(dict.fromkeys(r.cls for r in results))
    short = {"ok": "ok", "clear_error": "clear", "unclear_error": "unclear", "false_error": "false_err",
             "no_error": "no_err", "raw_traceback": "raw_tb", "crash": "crash", "wrong_result": "wrong",
             "record_lost": "lost"}
    head = f"{'class':<10} {'probes':>6} " + " ".join(f"{short[o]:>9}" for o in OUTCOMES)
    lines = [head, "-" * len(head)]
    for c in classes + ["total"]:
        rs = [r for r in results if c in ("total", r.cls)]
        counts = [sum(r.outcome == o for r in rs) for o in OUTCOMES]
        lines.append(f"{c:<10} {len(rs):>6} " + " ".join(f"{n:>9}" for n in counts))
    return "\n".join(lines)


def failures(results: list[Outcome]) -> str:
    bad = [r for r in results if r.outcome not in GOOD]
    return "\n".join(f"  {r.name:<34} {r.outcome:<14} {_first_line(r.message)}" for r in bad) or "  (none)"


def main(argv=None) -> int:
    from reliability_probe_list import CLASSES, PROBES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help=f"comma-separated classes: {','.join(CLASSES)}")
    ap.add_argument("--name", help="only probes whose name contains this")
    ap.add_argument("--json", help="write every probe's outcome to this file")
    ap.add_argument("--list", action="store_true", help="list the probes and exit")
    args = ap.parse_args(argv)
    probes = PROBES
    if args.only:
        want = set(args.only.split(","))
        unknown = want - set(CLASSES)
        if unknown:
            ap.error(f"unknown classes {sorted(unknown)}; valid: {', '.join(CLASSES)}")
        probes = [p for p in probes if p.cls in want]
    if args.name:
        probes = [p for p in probes if args.name in p.name]
    if args.list:
        for p in probes:
            print(f"{p.cls:<10} {p.name:<34} expect {p.expect} {p.match or ''}")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="twprobes-") as work:
        for i, p in enumerate(probes):  # one at a time: the machine is shared
            r = run_probe(p, Path(work))
            results.append(r)
            print(f"[{i + 1}/{len(probes)}] {p.name:<34} {r.outcome:<14} {r.seconds:6.1f}s "
                  f"{_first_line(r.message, 90)}", file=sys.stderr, flush=True)
    print(f"\n{len(results)} probes, each in its own subprocess (TILEWRIGHT_CACHE_DIR in a temporary directory)\n")
    print(table(results))
    print("\nnot ok / clear_error:")
    print(failures(results))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "counts": {c: {o: sum(r.outcome == o and r.cls == c for r in results) for o in OUTCOMES}
                       for c in dict.fromkeys(r.cls for r in results)},
            "probes": [asdict(r) for r in results],
            "sources": {p.name: {"code": p.code, "env": p.env} for p in probes},
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
