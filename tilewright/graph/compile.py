"""`compile`: a model in, a runnable Module out. A torch.nn.Module goes through
the PyTorch frontend first; then the graph is typed, optimized and fused, its
groups lowered to te programs, identical programs merged into tasks, the tasks
tuned when `trials` > 0 (one budget for the model, records reused), and one
kernel built per task from the best record or the default schedule. For a GPU
target (CUDA, OpenCL) the same pipeline ends in a GpuModule
(graph/device_build.py, graph/device_module.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ir import Graph
from .kernel_graph import kernel_graph
from .layout import narrow_block
from .module import Module, build_module
from .tasks import extract_tasks, lower_partition

if TYPE_CHECKING:
    from .device_module import GpuModule
    from .dynamic import DynamicModule


def compile(model, example_inputs=None, target="cpu", trials: int = 0, records=None,  # noqa: A001 (as torch.compile)
            progress: bool = True, name: str | None = None, layout: str = "auto", winograd: bool = True,
            dtype: str = "float32", calibration=None, kernels: str = "search", fuse_b2b: bool = True, executor=None,
            dynamic=None, **tune_options) -> Module | GpuModule | DynamicModule:
    """Compile a Graph, a torch.nn.Module (with `example_inputs`), a torch ExportedProgram, an ONNX ModelProto or
    the path of a .onnx file for `target`: a Module on a CPU,
    a GpuModule on "cuda" / "opencl" (NCHW, no Winograd; see graph/device_module.py).
    `trials`: the model's total tuning budget (0: default schedules, no measuring).
    `layout`: "NCHW" (every convolution on the caller's layout), "NCHWc" (every
    convolution that can, on NCHW{b}c data with b the target's fp32 vector lanes, or half of
    them where that block does not split a conv's channels and half vectors run as fast),
    "depthwise" (only depthwise convolutions packed; see `graph/layout.py`), or "auto":
    the faster of NCHW and NCHWc, measured on the whole model built from the records
    as they stand (default schedules where there are none), before any tuning.
    `winograd`: packed 3x3 stride-1 convolutions with enough channels run as Winograd F(4x4, 3x3)
    (input transform, batched GEMM, output transform; see `graph/winograd.py`); False keeps every
    convolution direct.
    `dtype`: "float32", or on GPU targets "float16": weights and activations stored as float16, every
    sum (convolution, dense, pooling, softmax, normalisation) accumulated in float32; the inputs and
    outputs are float16 (graph/half_precision.py); on CPU targets "bfloat16": convolutions (groups 1) and
    dense layers multiply bfloat16 operands and accumulate in float32 (AVX-512 BF16 `vdpbf16ps` where the
    target has it), activations between them stored bfloat16, the rest float32; inputs and outputs stay
    float32 (graph/bfloat16.py).
    `name`: the model's name in progress lines and summaries (default: its class name).
    On target "vta" the float model is quantized with power-of-two scales fixed on `calibration`
    (default: the example inputs) and its convolutions offloaded (graph/vta_offload.py).
    `kernels` (CPU): "search" (every kernel from FlexTensor's space), "templates" (a dense layer and its
    fused tail on a hardware-native template wherever one fits, profiled by the light profiler) or
    "auto" (both built after tuning, the faster in the model kept per task; `module.templates` says
    what was chosen and why).
    `fuse_b2b` (with templates, i.e. kernels "templates" or "auto"): a dense layer whose only reader is
    another dense layer runs fused with it in one kernel (Bolt's back-to-back fusion); "auto" keeps a
    pair fused only where it runs faster in the model. `module.b2b` lists every pair and why.
    `dynamic`: {input (index, or name for ONNX): {axis: tw.Dim(name, low, high, sizes=) or (low, high)}}
    declares axes whose size varies from call to call; the result is a DynamicModule of static
    specializations (a batch run in slices on a few compiled sizes; see graph/dynamic.py). An
    ExportedProgram with dynamic dims (`torch.export.Dim`) gets them as its `dynamic` by default.
    `records`: a record store or path (default: the store of an enclosing `with tw.records(...)`, else
    the user cache); tuning writes to it
    and the build reads from it. `tune_options`: how each task searches (search/options.py TuneOptions: seed, timeout,
    cost_model, method, ...)."""
    from ..records import open_records
    from ..search.options import TuneOptions, check_count
    from ..targets import as_target
    from .fusion import fuse
    from .infer import infer_types
    from .optimize import optimize
    from .template_choice import check_choice

    check_choice(kernels)
    check_count("trials", trials, lowest=0)
    options = TuneOptions.of(**tune_options)  # a misspelled or bad option fails here, whether or not it tunes
    tgt = as_target(target)
    if dynamic is None and not isinstance(model, Graph):
        from .dynamic_sources import exported_dims

        dynamic = exported_dims(model)  # an ExportedProgram's own dynamic dims
    if dynamic is not None:
        from .dynamic import compile_dynamic

        def compile_static(graph, n):
            return compile(graph, target=tgt, trials=n, records=records, progress=progress, layout=layout,
                           winograd=winograd, dtype=dtype, calibration=calibration, kernels=kernels,
                           fuse_b2b=fuse_b2b, executor=executor, **tune_options)

        return compile_dynamic(model, example_inputs, dynamic, name, compile_static, trials, progress)
    if tgt.is_gpu:
        from .device_build import check_dtype

        check_dtype(dtype, tgt)  # before the frontend's work
    elif dtype not in ("float32", "bfloat16"):
        from ..errors import ShapeError

        raise ShapeError(f"compile: dtype {dtype!r} is for GPU targets ('cuda', 'opencl'); CPU models run "
                         f"'float32' or 'bfloat16'")
    graph = model if isinstance(model, Graph) else _as_graph(model, example_inputs, name)
    guards = getattr(graph, "value_guards", {})  # inputs whose example value fixed a shape
    graph = optimize(infer_types(graph))
    if dtype == "bfloat16" and not tgt.is_gpu:
        from .bfloat16 import to_bfloat16, warn_without_bf16_dot

        warn_without_bf16_dot(tgt)
        graph = to_bfloat16(graph)
    if tgt.kind == "vta":
        from .vta_offload import compile_for_vta

        cal = calibration if calibration is not None else example_inputs
        if cal is None:
            from ..errors import ShapeError

            raise ShapeError("compile for target 'vta': pass calibration inputs (calibration=[array, ...]); the "
                             "quantization's power-of-two scales are fixed on them")
        cal = [c.numpy() if hasattr(c, "numpy") else c for c in (cal if isinstance(cal, (list, tuple)) else [cal])]
        return compile_for_vta(graph, tgt, cal)
    store = open_records(records)
    if tgt.is_gpu:
        from .device_build import compile_for_device

        if guards:
            from ..errors import ShapeError

            raise ShapeError(f"compile for {tgt.kind}: inputs {sorted(guards)} fix shapes through their values, "
                             "which GPU modules do not check yet; make them constants of the model")

        return compile_for_device(graph, tgt, store, trials, progress, layout, dtype, options=options,
                                  executor=executor)
    built = None  # the module `auto` measured: the result itself when nothing is tuned
    if layout == "auto":
        from .layout_choice import choose_layout

        layout, built = choose_layout(graph, tgt, store, progress=progress, winograd=winograd)
    tuning = {"trials": 0, "reused": 0, "seconds": 0.0}
    if built is not None and trials <= 0 and kernels == "search":
        module = built
    else:
        graph = kernel_graph(graph, layout, tgt.vector_lanes(4), winograd, narrow_block(tgt))
        partition = fuse(graph)
        programs = lower_partition(partition)
        tasks = extract_tasks(partition, programs)
        if trials > 0:
            from .scheduler import tune_tasks

            tuning = tune_tasks(tasks, tgt, trials, records=store, progress=progress, model=graph.name,
                                options=options, executor=executor)
        with store:
            module = build_module(partition, tgt, programs, tasks, kernels_choice=kernels, store=store,
                                  fuse_b2b=fuse_b2b)
    module.value_guards = guards
    module.tuning = tuning  # new trials measured, records reused, seconds: what this compile cost
    module.layout = layout
    return module


def _as_graph(model, example_inputs, name: str | None) -> Graph:
    """The graph of a torch.nn.Module (with `example_inputs`), a torch ExportedProgram, an ONNX
    ModelProto or the path of a .onnx file."""
    import os

    from ..errors import ShapeError

    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not path.endswith(".onnx"):
            raise ShapeError(f"compile: a model path must name an ONNX file (*.onnx), got {path!r}")
        if not os.path.isfile(path):
            raise ShapeError(f"compile: no ONNX file at {path!r}")
        return _from_onnx(path, name, example_inputs)
    if type(model).__module__.startswith("onnx") and type(model).__name__ == "ModelProto":
        return _from_onnx(model, name, example_inputs)
    try:
        import torch
    except ImportError:
        torch = None
    exported = torch is not None and isinstance(model, torch.export.ExportedProgram)
    if torch is None or not (exported or isinstance(model, torch.nn.Module)):
        raise ShapeError(f"compile: expected a tilewright Graph, a torch.nn.Module, a torch ExportedProgram, an ONNX "
                         f"ModelProto or a path to a .onnx file, got {type(model).__name__}")
    if example_inputs is None and not exported:
        raise ShapeError("compile: a torch.nn.Module needs example_inputs (a tuple of tensors) to fix its shapes")
    from .frontend import from_torch

    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = () if example_inputs is None else (example_inputs,)
    return from_torch(model, tuple(example_inputs), name=name)


def _from_onnx(model, name: str | None, example_inputs=None) -> Graph:
    """An ONNX model's graph; inputs among `example_inputs` that fix a shape take their value."""
    from ..errors import ShapeError
    from .frontend import from_onnx
    from .frontend.onnx_inputs import example_values

    if isinstance(model, str):
        import onnx

        try:
            model = onnx.load(model)
        except Exception as e:  # noqa: BLE001 - a truncated or foreign file: protobuf's DecodeError, OSError, ...
            raise ShapeError(f"compile: could not read the ONNX model {model!r}: {type(e).__name__}: {e}") from e
    return from_onnx(model, name=name, input_values=example_values(model, example_inputs))
