"""`compile` for a GPU target (CUDA or OpenCL): the optimized graph on NCHW
data (the CPU's packed layouts and Winograd are not used: the GPU space
schedules direct convolutions), fused, its groups lowered to te programs
(rewritten to store float16 for `dtype="float16"`, graph/half_precision.py),
identical programs merged into tasks, tuned when asked, one kernel built per
task through the target's backend record (best record or the GPU space's
default), and a GpuModule around them. A group whose kernel does not build
is named, with its ops, in a BuildError saying what to do instead."""

from __future__ import annotations

from ..errors import BuildError, ShapeError, TilewrightError
from .device_module import GpuModule, memory_for
from .device_plan import build_device_plan, pack_weights
from .half_precision import half_partition, half_program
from .memory_plan import plan_memory
from .tasks import Task, extract_tasks, lower_partition

DTYPES = ("float32", "float16")


def compile_for_device(graph, target, store, trials: int, progress: bool, layout: str, dtype: str,
                       **tune_options) -> GpuModule:
    """The GpuModule of the optimized `graph` on GPU `target` (see graph/compile.py)."""
    from .fusion import fuse
    from .kernel_graph import kernel_graph

    if layout not in ("auto", "NCHW"):
        raise ShapeError(f"compile: layout {layout!r} is for CPUs (vector-blocked channels); {target.kind} targets "
                         f"run NCHW: pass layout='NCHW' or 'auto'")
    check_dtype(dtype, target)
    partition = fuse(kernel_graph(graph, "NCHW", 1, winograd=False))
    programs = lower_partition(partition)
    if dtype == "float16":
        programs = {g: half_program(p) for g, p in programs.items()}
        partition = half_partition(partition)
    tasks = extract_tasks(partition, programs)
    tuning = {"trials": 0, "reused": 0, "seconds": 0.0}
    if trials > 0:
        from .scheduler import tune_tasks

        tuning = tune_tasks(tasks, target, trials, records=store, progress=progress, model=graph.name, **tune_options)
    with store:
        module = build_gpu_module(partition, target, programs, tasks, dtype)
    module.tuning = tuning
    return module


def check_dtype(dtype: str, target) -> None:
    """A ShapeError for a dtype models are not compiled in."""
    if dtype not in DTYPES:
        raise ShapeError(f"compile: dtype {dtype!r} is not supported for models; valid: {', '.join(DTYPES)}")


def build_gpu_module(partition, target, programs, tasks: list[Task], dtype: str = "float32") -> GpuModule:
    """One kernel per task (and per group whose arguments do not map onto its task's kernel), the
    memory plan and the device plan, and the module."""
    graph = partition.graph
    task_of = {g: t for t in tasks for g in t.groups}
    jobs: dict[str, tuple] = {}  # kernel key -> (args, name, groups)
    for t in tasks:
        jobs[t.key] = (t.args, t.name, t.groups)
        for g in t.groups[1:]:
            if t.arg_order(programs[g]) is None:
                jobs[g] = (list(programs[g].args), programs[g].name, [g])
    kernels = _build_kernels(jobs, target, partition)
    bindings = []
    for g in partition.groups:
        if g.is_view:
            continue
        task, prog = task_of[g.name], programs[g.name]
        values = prog.input_values + prog.output_values
        key = g.name if g.name in kernels else task.key
        if key != g.name:
            values = tuple(values[i] for i in task.arg_order(prog))
        bindings.append((g.name, "+".join(n.op for n in g.nodes), key, f"{task.name} (x{task.weight})", task.flops,
                         tuple(values), frozenset(prog.output_values)))
    first = next(iter(kernels.values()))
    align = memory_for(first).align if hasattr(first, "pack") else 16
    plan = build_device_plan(partition, plan_memory(partition), bindings, align, dtype)
    constants = {v: graph.constants[v] for v in plan.weights}
    module = GpuModule(plan, kernels, target, pack_weights(plan, _typed(graph, constants)))
    module.graph, module.partition, module.tasks = graph, partition, tasks
    return module


def _typed(graph, constants: dict) -> dict:
    import numpy as np

    return {v: np.asarray(c, dtype=graph.type_of(v).dtype) for v, c in constants.items()}


def _build_kernels(jobs: dict[str, tuple], target, partition) -> dict[str, object]:
    """Each job's kernel (the best record's schedule, else the default): every one lowered and rendered
    first, then all compiled at once (CUDA: nvcc runs as one subprocess per kernel, on the usable cores
    or TILEWRIGHT_BUILD_CPUS), then loaded. A failure names the group it belongs to."""
    from concurrent.futures import ThreadPoolExecutor

    from ..backends import backend_for
    from ..config import build_cpus, pin_this_thread, usable_cores
    from ..search.best import best_schedule

    backend = backend_for(target)
    rendered = {}
    for key, (args, name, groups) in jobs.items():
        try:
            func = backend.lower(best_schedule(backend, args, target), args, name, target)
            rendered[key] = (func, backend.render(func, target))
        except Exception as exc:  # noqa: BLE001 - any failure is this group's, named with the way out
            _fail(exc, groups, target, partition)

    def compile_one(key: str):
        try:
            return backend.compile(rendered[key][1], target)
        except Exception as exc:  # noqa: BLE001 - reported below, naming the group
            return exc

    # OpenCL builds in the driver, in this process: one at a time
    workers = (len(build_cpus() or ()) or usable_cores()) if target.kind == "cuda" else 1
    with ThreadPoolExecutor(workers, initializer=pin_this_thread, initargs=(build_cpus(),)) as pool:
        artefacts = dict(zip(rendered, pool.map(compile_one, rendered)))
    kernels = {}
    for key, (func, module) in rendered.items():
        try:
            if isinstance(artefacts[key], Exception):
                raise artefacts[key]
            kernels[key] = backend.load(func, module, artefacts[key], target)
        except Exception as exc:  # noqa: BLE001
            _fail(exc, jobs[key][2], target, partition)
    return kernels


def _fail(exc: Exception, groups, target, partition):
    """Raise the BuildError that names the groups whose kernel failed, their ops, and the way out."""
    by_name = {g.name: g for g in partition.groups}
    ops = sorted({n.op for g in groups for n in by_name[g].nodes})
    what = "does not build" if isinstance(exc, TilewrightError) else "failed to build (a tilewright bug)"
    raise BuildError(f"model '{partition.graph.name}': the kernel of group{'s' if len(groups) > 1 else ''} "
                     f"{', '.join(repr(g) for g in groups)} (ops: {', '.join(ops)}) {what} for {target.kind} "
                     f"({type(exc).__name__}: {str(exc)[:1500]}). Compile this model for the CPU "
                     f"(target='cpu'), or replace these ops in the model") from exc


__all__ = ["DTYPES", "build_gpu_module", "check_dtype", "compile_for_device"]
