"""Where a benchmark result comes from: the commit, the host, the thread count,
the versions of every library on either side of a comparison, and the state of
the compiled-kernel cache. Every result file of `tilewright bench` carries it,
so a table can be traced to the code and the machine that produced it."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path

# ISA features a reader of a CPU table needs to know about (the rest of /proc/cpuinfo's flags are noise here)
NOTABLE_FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "neon", "asimd")
PACKAGES = ("numpy", "torch", "onnxruntime", "onnx", "onnxscript")


def commit(repo: Path | None = None) -> str:
    """HEAD's hash, with "+dirty" when tracked files differ from it; "unknown" outside a git checkout."""
    repo = repo or Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["blas"] = numpy_blas()
    return out


def numpy_blas() -> str:
    """The BLAS NumPy was built against, with its version and the kernel set it was configured for."""
    try:
        import numpy as np

        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except Exception:  # older NumPy: no dict form
        return "unknown"
    config = blas.get("openblas configuration", "")
    return " ".join(x for x in (blas.get("name", "?"), blas.get("version", ""), f"({config})" if config else "") if x)


def host(target=None) -> dict:
    """The CPU: model name, vendor/family/model, the notable ISA features present, cores usable here."""
    from ..targets.cpu import cpu_flags, cpu_identity

    ident = cpu_identity()
    flags = cpu_flags()
    out = {"cpu": ident.get("model name") or platform.processor() or platform.machine(),
           "vendor_family_model": "/".join(ident.get(k, "?") for k in ("vendor_id", "cpu family", "model")),
           "isa": [f for f in NOTABLE_FEATURES if f in flags], "machine": platform.machine(),
           "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    if target is not None:
        out["target"] = str(target)
    return out


def kernel_cache() -> dict:
    """The compiled-kernel cache directory and how many kernels it held when asked."""
    from ..config import cache_dir

    try:
        kernels = cache_dir() / "kernels"
        count = sum(1 for _ in kernels.glob("*.so")) if kernels.is_dir() else 0
        return {"dir": str(kernels), "kernels": count}
    except Exception as exc:  # an unwritable cache dir is reported, not fatal to a report
        return {"dir": "unavailable", "error": str(exc)}


def provenance(threads: int, target=None, **extra) -> dict:
    """Everything a result file records about how it was produced; `extra` (e.g. trials, rounds) added."""
    return {"commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": host(target),
            "threads": threads, "versions": versions(), "kernel_cache_at_start": KERNEL_CACHE_AT_IMPORT,
            "kernel_cache_at_end": kernel_cache(), **extra}


def provenance_line(doc: dict) -> str:
    """One Markdown line of a provenance dict for the head of a table."""
    h, v = doc["host"], doc["versions"]
    isa = ", ".join(h["isa"]) or "none notable"
    libs = ", ".join(f"{k} {v[k]}" for k in ("numpy", "torch", "onnxruntime", "onnx") if k in v)
    start, end = doc.get("kernel_cache_at_start", {}), doc.get("kernel_cache_at_end", {})
    cache = f"kernel cache {start.get('kernels', '?')} -> {end.get('kernels', '?')} kernels"
    return (f"Commit `{doc['commit'][:12]}{'+dirty' if doc['commit'].endswith('+dirty') else ''}`, {doc['date']}; "
            f"host {h['cpu']} ({h['vendor_family_model']}; {isa}), {doc['threads']} threads; {libs}; "
            f"BLAS {v.get('blas', '?')}; {cache}.")


KERNEL_CACHE_AT_IMPORT = kernel_cache()

def save_run(out, stem: str, doc: dict, markdown: str) -> None:
    """`<out>/<stem>.json` (the run's document) and `<out>/<stem>.md` (its table)."""
    import json
    from pathlib import Path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    (out / f"{stem}.md").write_text(markdown)


def publish(out, stem: str, doc: dict, markdown: str) -> int:
    """Print a run's table and, with `out`, save it (`save_run`); a driver's exit status (0)."""
    print(markdown)
    if out:
        save_run(out, stem, doc, markdown + "\n")
    return 0
