"""ONNX Runtime in the configurations a CPU user would try: the model exported
by each of torch.onnx's exporters at a pinned opset (the TorchScript exporter
at opset 17, whose graphs ORT's fusion patterns were written against, and the
dynamo exporter at opset 18), each run in its own session (CPU provider, all
graph optimizations, `threads` intra-op threads, one inter-op thread). For a
transformer (a model with `num_heads` and `hidden_size` attributes) each export
also goes through ORT's transformer optimizer (`model_type="bert"`), the
vendor's recommended path for BERT, and the fused op types it produced are
counted, so a table can say whether Attention and SkipLayerNormalization fused."""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from .baseline import Baseline, clone, failure, skipped

# exporter -> torch.onnx.export keywords; the opsets are pinned so a table does not change with torch's default
EXPORTERS = {"torchscript": {"dynamo": False, "opset_version": 17},
             "dynamo": {"dynamo": True, "opset_version": 18}}
# op types of ORT's transformer fusions worth reporting (com.microsoft contrib ops and fused norms)
FUSED_OPS = ("Attention", "MultiHeadAttention", "SkipLayerNormalization", "EmbedLayerNormalization",
             "BiasGelu", "FastGelu", "Gelu", "LayerNormalization")


def label(exporter: str, optimized: bool = False) -> str:
    opset = EXPORTERS[exporter]["opset_version"]
    return f"onnxruntime {exporter} opset{opset}" + (" bert-optimizer" if optimized else "")


def export_onnx(model, x: np.ndarray, path: Path, exporter: str = "dynamo") -> None:
    """`model` on input `x` as an ONNX file, by `exporter` ("torchscript" or "dynamo") at its pinned opset."""
    import torch

    if exporter not in EXPORTERS:
        raise ValueError(f"ONNX exporter {exporter!r}: choose from {', '.join(EXPORTERS)}")
    with _quiet_exporter():
        torch.onnx.export(clone(model), (torch.from_numpy(x),), str(path), verbose=False, **EXPORTERS[exporter])


def ort_session(path: Path, threads: int, profile_prefix: str | None = None):
    """The ONNX Runtime session the benchmark times: CPU provider, all graph optimizations,
    `threads` intra-op threads; with `profile_prefix`, its node profiler on."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def transformer_dims(model) -> tuple[int, int] | None:
    """(num_heads, hidden_size) of a transformer layer that declares them, else None."""
    heads, hidden = getattr(model, "num_heads", None), getattr(model, "hidden_size", None)
    return (int(heads), int(hidden)) if isinstance(heads, int) and isinstance(hidden, int) else None


def bert_optimize(path: Path, out: Path, heads: int, hidden: int) -> dict[str, int]:
    """ORT's transformer optimizer (model_type "bert") on the file at `path`, saved to `out`;
    how many nodes of each FUSED_OPS type the optimized graph holds."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(path), model_type="bert", num_heads=heads, hidden_size=hidden)
    optimized.save_model_to_file(str(out))
    counts = Counter(n.op_type for n in optimized.model.graph.node)
    return {op: counts.get(op, 0) for op in FUSED_OPS}


def fusion_note(counts: dict[str, int]) -> str:
    found = ", ".join(f"{op} {n}" for op, n in counts.items() if n) or "none"
    missing = [op for op in ("Attention", "SkipLayerNormalization") if not counts.get(op)]
    return f"optimized graph holds {found}" + (f"; not fused: {', '.join(missing)}" if missing else "")


def _session_variant(name: str, path: Path, x, x_check, threads: int, before_s: float, **kw) -> Baseline:
    """A timed session on the file at `path`; its setup time is `before_s` (export, optimizer)
    plus session creation and the first run."""
    start = time.perf_counter()
    session = ort_session(path, threads)
    feed_name = session.get_inputs()[0].name
    feed = {feed_name: x}
    session.run(None, feed)
    setup = before_s + time.perf_counter() - start
    check = np.asarray(session.run(None, {feed_name: x_check})[0])
    return Baseline(name, "onnxruntime", lambda: session.run(None, feed), check, setup,
                    rebuild={"side": "ort", "path": str(path)}, **kw)


def ort_variants(model, x: np.ndarray, x_check: np.ndarray, threads: int, workdir: Path,
                 exporters=tuple(EXPORTERS), progress=None) -> list[Baseline]:
    """A session per exporter, and per exporter an optimized one for a transformer. The files stay
    in `workdir` (the memory step loads them again); the caller removes it."""
    try:
        import onnxruntime  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return [skipped(label(e), "onnxruntime", f"not installed ({exc.name})") for e in exporters]
    dims = transformer_dims(model)
    out = []
    for exporter in exporters:
        path = Path(workdir) / f"{exporter}.onnx"
        start = time.perf_counter()
        try:
            export_onnx(model, x, path, exporter)
        except Exception as exc:
            variants = [skipped(label(exporter), "onnxruntime", f"export {failure(exc)}")]
            if dims is not None:
                variants.append(skipped(label(exporter, True), "onnxruntime", f"not run: the {exporter} export failed"))
        else:
            exported = time.perf_counter() - start
            variants = [_guarded(label(exporter), _session_variant, label(exporter), path, x, x_check, threads,
                                 exported)]
            if dims is not None:
                variants.append(_optimized(exporter, path, exported, dims, x, x_check, threads))
        for b in variants:
            if progress:
                progress(b)
        out += variants
    return out


def _guarded(name: str, make, *args, **kw) -> Baseline:
    """`make(*args, **kw)`, or the variant `name` skipped with the reason it failed."""
    try:
        return make(*args, **kw)
    except Exception as exc:  # a session ORT cannot create or run is reported, the others still run
        return skipped(name, "onnxruntime", failure(exc))


def _optimized(exporter: str, path: Path, exported: float, dims, x, x_check, threads: int) -> Baseline:
    name = label(exporter, optimized=True)
    try:
        import onnxruntime.transformers.optimizer  # noqa: F401
    except ImportError as exc:
        return skipped(name, "onnxruntime", f"not run: onnxruntime.transformers is not importable here ({exc})")

    def make():
        start = time.perf_counter()
        opt = path.with_name(f"{exporter}_bert.onnx")
        counts = bert_optimize(path, opt, *dims)
        return _session_variant(name, opt, x, x_check, threads, exported + time.perf_counter() - start,
                                note=fusion_note(counts),
                                extra={"fused_ops": counts, "num_heads": dims[0], "hidden_size": dims[1]})
    return _guarded(name, make)


@contextlib.contextmanager
def _quiet_exporter():
    """The exporters log a warning per torchvision op they skip (torchvision is not installed beside
    this torch), the tracer warns about a deprecated pytree class and the TorchScript exporter about
    its own deprecation: noise between a user and the table."""
    log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec", category=FutureWarning)
            warnings.filterwarnings("ignore", message=r".*legacy TorchScript-based ONNX export",
                                    category=DeprecationWarning)
            yield
    finally:
        log.setLevel(level)
