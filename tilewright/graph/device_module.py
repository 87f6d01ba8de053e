"""A compiled model on a GPU (CUDA, or OpenCL): one kernel per task (the groups
of a task share it, each with its own launches object holding its pointers),
the weights uploaded once, one arena laid out by the memory plan
(graph/device_plan.py), and a run that queues every launch back to back on one
stream or in-order queue with no host wait between them; on CUDA the run is
captured once as a CUDA graph and replayed (captured again when the caller's
buffers change). `module(*arrays)` takes NumPy arrays (copied in and out) or
device arrays (torch CUDA tensors, pyopencl Arrays: used in place) and returns
outputs of the same kind. Compiled for a CUDA GPU this machine lacks, it can
be read, summarised and exported; calling it says why it cannot run."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import MeasureError, TilewrightWarning
from ..runtime.device_arena import Copy, CudaGraph, CudaMemory, OpenCLMemory, Region
from ..stats import median
from .device_io import CUDA, NUMPY, OPENCL, check_inputs, device_handle, new_outputs
from .device_plan import CopyStep, DevicePlan, Launch

# CUDA graphs kept per module, one per set of caller's pointers: a caller alternating between a few
# input/output tensors replays without capturing again.
GRAPHS_KEPT = 4


@dataclass(eq=False)
class _Bound:
    """One call's buffers: the caller's (or staging) block of each graph input and output, the
    output objects returned, and the run's items per plan step."""
    kind: str
    arrays: list
    blocks: dict
    outputs: list
    steps: list = field(default_factory=list)
    finals: list = field(default_factory=list)
    downloads: list = field(default_factory=list)

    @property
    def items(self) -> list:
        return [it for step in self.steps for it in step]


def memory_for(kernel):
    """The device memory of the device `kernel` runs on (its OpenCL context and queue, or its CudaDevice)."""
    if hasattr(kernel, "queue"):
        return OpenCLMemory(kernel.context, kernel.queue)
    return CudaMemory(kernel.device)


class GpuModule:
    """A compiled model on a device. Not reentrant: one arena and one set of launches serve every call."""

    def __init__(self, plan: DevicePlan, kernels: dict, target, weights: np.ndarray):
        """`kernels`: a built device kernel per key the plan's launches name; `weights`: the bytes of
        the weights block (device_plan.pack_weights)."""
        self.plan, self.kernels, self.target, self.name = plan, kernels, target, plan.name
        self.input_types = [t for _, t in plan.inputs]
        self.output_types = [t for _, t in plan.outputs]
        self.graph = self.partition = None  # set by build_gpu_module (absent on a loaded export)
        self.tasks: list = []
        self.tuning, self.layout = None, "NCHW"
        self.cuda_graph = True  # CUDA: replay a captured graph; False queues the launches from Python
        self.reason = next((k.reason for k in kernels.values() if not hasattr(k, "pack")), None)
        self.weights = weights
        self.memory, self._graphs = None, {}
        if self.reason is None:
            self._load()

    # --- building ---

    def _load(self) -> None:
        kernels = list(self.kernels.values())
        m = self.memory = memory_for(kernels[0])
        for k in kernels[1:]:
            same = (k.context == kernels[0].context and k.queue == kernels[0].queue) if m.kind == OPENCL \
                else k.device is kernels[0].device
            if not same:
                raise MeasureError(f"model '{self.name}': its kernels were loaded on different devices; build the "
                                   f"model in one process for one device")
        self._arena = m.alloc(self.plan.arena_bytes, f"the arena of model '{self.name}'")
        self._weights = m.alloc(self.plan.weights_bytes, f"the weights of model '{self.name}'")
        m.upload(Region(self._weights, 0, self.weights.nbytes), self.weights)
        m.synchronize(f"upload of the weights of model '{self.name}'")
        self._own = {v: m.alloc(n, f"view '{v}'") for v, n in self.plan.own.items()}
        self._staging = None
        self._graphs: dict = {}  # CUDA: the pointers bound into a run -> its captured graph, oldest use first
        self._dynamic = []  # (launches, argument index, slot) bound per call
        self._launches = []  # per plan step: its launches object, or None for a copy
        for step in self.plan.steps:
            if isinstance(step, CopyStep):
                self._launches.append(None)
                continue
            handles = [(0 if m.kind == CUDA else None) if s.dynamic else m.arg(self._region(s, {}))
                       for s in step.args]
            launches = self.kernels[step.kernel].pack(handles)
            self._dynamic += [(launches, i, s) for i, s in enumerate(step.args) if s.dynamic]
            self._launches.append(launches)

    def _region(self, s, blocks) -> Region:
        block = {"arena": getattr(self, "_arena", None), "weights": getattr(self, "_weights", None)}.get(s.where)
        if s.where == "own":
            block = self._own[s.name]
        elif block is None:
            block = blocks[s.name]
        return Region(block, s.offset, s.nbytes)

    # --- running ---

    def _check(self, arrays) -> tuple[str, list]:
        kind, arrays = check_inputs(self.name, self.target.kind, [v for v, _ in self.plan.inputs],
                                    self.input_types, arrays)
        if self.reason is not None:
            raise MeasureError(f"model '{self.name}' was compiled for {self.target} but cannot run here: "
                               f"{self.reason}. Its kernels can be read (module.summary(), module.kernels) and "
                               f"exported (module.export(directory))")
        return kind, arrays

    def _staging_blocks(self) -> dict:
        """Device buffers for NumPy inputs and outputs, allocated on the first such call and kept."""
        if self._staging is None:
            self._staging = {v: self.memory.alloc(t.nbytes, f"input '{v}'") for v, t in self.plan.inputs}
            self._staging.update((v, self.memory.alloc(t.nbytes, f"output '{v}'")) for v, t in self.plan.outputs
                                 if v in self.plan.produced and v not in self._staging)
        return self._staging

    def _bind(self, kind: str, arrays: list) -> _Bound:
        m, plan = self.memory, self.plan
        blocks = {}
        if kind == NUMPY:
            staging = self._staging_blocks()
            for (v, t), a in zip(plan.inputs, arrays):
                blocks[v] = staging[v]
                m.upload(Region(staging[v], 0, t.nbytes), a)
        else:
            for (v, t), a in zip(plan.inputs, arrays):
                blocks[v] = m.wrap(device_handle(self.name, v, a, t, m), t.nbytes)
        outputs = new_outputs(kind, arrays[0] if arrays else None, self.output_types, m)
        bound = _Bound(kind, arrays, blocks, outputs)
        for (v, t), out in zip(plan.outputs, outputs):
            if v not in plan.produced or v in blocks:
                continue
            if kind == NUMPY:
                blocks[v] = self._staging[v]
                bound.downloads.append((out, Region(blocks[v], 0, t.nbytes)))
            else:
                blocks[v] = m.wrap(device_handle(self.name, v, out, t, m), t.nbytes)
        for launches, i, s in self._dynamic:
            launches.set_arg(i, m.arg(self._region(s, blocks)))
        for step, launches in zip(plan.steps, self._launches):
            bound.steps.append([launches] if launches is not None
                               else [Copy(self._region(step.dst, blocks), self._region(step.src, blocks))])
        for i, s in plan.finals:
            t, out = self.output_types[i], outputs[i]
            dst = None if kind == NUMPY else Region(m.wrap(device_handle(self.name, plan.outputs[i][0], out, t, m),
                                                           t.nbytes), 0, t.nbytes)
            bound.finals.append((out, dst, self._region(s, blocks)))
        return bound

    def _queue_run(self, bound: _Bound) -> list:
        """Queue one run (no wait); OpenCL: its events."""
        m = self.memory
        if m.kind == CUDA and self.cuda_graph:
            key = tuple(sorted((v, b.handle) for v, b in bound.blocks.items()))
            graph = self._graphs.pop(key, None)
            if graph is None:  # the least recently used one is captured again (patched in place)
                graph = self._graphs.pop(next(iter(self._graphs))) if len(self._graphs) >= GRAPHS_KEPT \
                    else CudaGraph(m)
            self._graphs[key] = graph  # most recently used last
            try:
                graph.record(lambda: m.run(bound.items), key)
            except MeasureError as exc:
                if getattr(exc, "sticky", False):
                    raise
                warnings.warn(f"model '{self.name}': capturing the run as a CUDA graph failed ({exc}); its launches "
                              f"are queued from Python instead", TilewrightWarning, stacklevel=3)
                self.cuda_graph = False
                return m.run(bound.items)
            graph.launch()
            return []
        return m.run(bound.items)

    def _finish(self, bound: _Bound):
        m = self.memory
        for out, dst, src in bound.finals:
            if dst is None:
                m.download(out, src)
            else:
                m.copy(dst, src)
        for host, r in bound.downloads:
            m.download(host, r)
        if bound.kind == NUMPY:
            m.synchronize(f"run of model '{self.name}'")
        elif m.kind == CUDA and type(bound.arrays[0]).__module__.startswith("torch"):
            import torch

            m.order_before(torch.cuda.current_stream(bound.arrays[0].device).cuda_stream)
        elif m.kind == OPENCL and hasattr(bound.outputs[0], "add_event"):
            marker = m.cl.enqueue_marker(m.queue)
            for out in bound.outputs:
                out.add_event(marker)
        return bound.outputs[0] if len(bound.outputs) == 1 else bound.outputs

    def __call__(self, *arrays):
        """Run the model; its outputs (one for a one-output model), of the inputs' kind."""
        kind, arrays = self._check(arrays)
        bound = self._bind(kind, arrays)
        try:
            self._queue_run(bound)
            return self._finish(bound)
        except MeasureError as exc:
            raise MeasureError(f"model '{self.name}' failed on {self.target}: {exc}") from None

    def time(self, *arrays, number: int | None = None, repeat: int = 5) -> float:
        """Median device seconds of one whole run (inputs bound once, nothing copied back): CUDA events,
        OpenCL profiling events from the run's first command to its last."""
        kind, arrays = self._check(arrays)
        bound = self._bind(kind, arrays)
        m = self.memory
        per_run = 1 if m.kind == CUDA and self.cuda_graph else len(bound.items)

        def run():
            return self._queue_run(bound)

        if number is None:
            once = median(m.time_runs(run, per_run, 1, 3))
            number = max(1, min(200, int(0.05 / max(once, 1e-6))))
        return median(m.time_runs(run, per_run, number, repeat))

    def step_times(self, *arrays) -> list[float]:
        """Device seconds of each step of one run (launches queued from Python, profiled one by one)."""
        kind, arrays = self._check(arrays)
        bound = self._bind(kind, arrays)
        return self.memory.step_times(bound.steps)

    # --- reading ---

    @property
    def steps(self) -> list[Launch]:
        return self.plan.launches

    @property
    def intermediate_bytes(self) -> int:
        """Bytes of the global intermediates the kernel objects allocate for themselves (each its own)."""
        from ..runtime.device_args import device_dtype

        return sum(b.size * device_dtype(b.dtype).itemsize for k in self.kernels.values()
                   for b in k.module.intermediates)

    @property
    def peak_bytes(self) -> int:
        """Device memory of activations: the arena, views' own buffers, the outputs and the kernels'
        intermediates (the weights are apart: `plan.weights_bytes`)."""
        return (self.plan.arena_bytes + sum(self.plan.own.values()) + sum(t.nbytes for t in self.output_types)
                + self.intermediate_bytes)

    def __repr__(self) -> str:
        return (f"<GpuModule '{self.name}' on {self.target.kind}: {len(self.steps)} kernels, {len(self.kernels)} "
                f"distinct, {self.plan.dtype}, arena {self.plan.arena_bytes} bytes>")

    def summary(self, *arrays) -> str:
        """Each step's group, ops, task and launches (grid x block), with device times when given inputs;
        the memory; how a run is queued."""
        times = self.step_times(*arrays) if arrays else [None] * len(self.plan.steps)
        launches = sum(len(self.kernels[s.kernel].module.kernels) for s in self.steps)
        lines = [f"module '{self.name}' on {self.target}: {len(self.steps)} kernels ({launches} launches), "
                 f"{len(self.kernels)} distinct, {self.plan.dtype}"]
        for step, t in zip(self.plan.steps, times):
            when = "" if t is None else f" {t * 1e6:9.1f} us"
            if isinstance(step, CopyStep):
                lines.append(f"  copy {step.src.where}+{step.src.offset} -> {step.dst.where} "
                             f"'{step.dst.name}' ({step.dst.nbytes} bytes){when}")
                continue
            shapes = " ".join(f"{k.grid[0]}x{k.block[0]}" for k in self.kernels[step.kernel].module.kernels)
            rate = f" {step.flops / t / 1e9:8.2f} GFLOP/s" if t and step.flops else ""
            lines.append(f"  {step.group:<24} {step.ops:<32} task {step.task:<28} blocks x threads {shapes}"
                         f"{when}{rate}")
        if arrays:
            lines.append(f"  sum of steps {sum(times) * 1e6:.1f} us; whole model {self.time(*arrays) * 1e6:.1f} us")
        p = self.plan
        lines.append(f"  arena {p.arena_bytes / 1024:.1f} KiB ({len(p.arena)} buffers), weights "
                     f"{p.weights_bytes / 1024:.1f} KiB, views with their own buffer {len(p.own)}, kernels' own "
                     f"intermediates {self.intermediate_bytes / 1024:.1f} KiB")
        if self.reason is not None:
            lines.append(f"  cannot run here: {self.reason}")
        elif self.memory.kind == CUDA:
            lines.append(f"  a run is {'one CUDA graph launch' if self.cuda_graph else 'launches queued from Python'}")
        return "\n".join(lines)

    def export(self, directory):
        """Each distinct kernel's artefact, weights.bin and model.json (the plan); load it with
        tilewright.graph.device_export.load_gpu_module(directory)."""
        from .device_export import export_gpu_module

        return export_gpu_module(self, directory)

    def __del__(self):
        for graph in getattr(self, "_graphs", {}).values():
            graph.close()
        if getattr(self, "memory", None) is not None:
            self.memory.close()


__all__ = ["GpuModule", "memory_for"]
