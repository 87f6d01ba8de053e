"""A compiled model: one kernel per task (groups of the same task share it,
each with its own pointers), the constant arrays kept once, one arena laid out
by the memory plan, and a native runner that calls every kernel in order.
`module(*arrays)` validates the inputs, patches the few pointers that change
per call (graph inputs and outputs) and makes one native call."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import MeasureError, ShapeError
from ..runtime.aligned import aligned_zeros
from ..stats import median
from .lower_te import GroupProgram
from .memory_plan import plan_memory
from .native import Sequence, dispatch_overhead, entry_point
from .partition import Group, Partition
from .tasks import Task, constant_positions, extract_tasks, lower_partition


@dataclass(frozen=True)
class Step:
    """One kernel call: the group, its task, and the graph value bound to each kernel argument."""
    group: Group
    task: Task
    values: tuple[str, ...]


class Module:
    """A compiled model. Safe to call from several threads: one arena and one set of kernel pointers
    serve every call, so calls (and timings) take turns under a lock; each call's outputs are its own
    arrays. For requests served truly in parallel, compile one Module per worker."""

    def __init__(self, partition: Partition, kernels: dict[str, object], tasks: list[Task],
                 programs: dict[str, GroupProgram], target, fills: dict | None = None,
                 workspaces: dict[str, tuple[int, ...]] | None = None):
        """`kernels`: a built kernel per task key, or per group name where a group's
        arguments cannot be mapped onto its task's kernel. `fills`: under the same keys,
        the PackFill of a kernel whose constant packs were moved out (graph/const_packs.py);
        each group's packed arrays are made here, once, and passed as constants.
        `workspaces`: under the same keys, the bytes of each temporary a kernel takes as one of
        its last arguments (lower/workspace.py); each group's lie in the arena."""
        fills, workspaces = fills or {}, workspaces or {}
        self._lock = threading.RLock()  # the arena and the patched pointers are shared by every call
        self.partition, self.graph, self.tasks, self.target = partition, partition.graph, tasks, target
        self._ids = _id_inputs(self.graph)  # the id inputs a call checks against their tables
        task_of = {g: t for t in tasks for g in t.groups}
        # the key of each group's kernel: its own where its arguments do not map onto its task's
        key_of = {g.name: g.name if g.name in kernels else task_of[g.name].key
                  for g in partition.groups if not g.is_view}
        self._workspace: dict[str, tuple[int, int]] = {}  # '<group>.workspace<n>' -> (its step, bytes)
        self._workspace_of: dict[str, tuple[str, ...]] = {}  # group -> its temporaries' names, in argument order
        for i, g in enumerate(partition.groups):
            if g.name in key_of:
                sizes = workspaces.get(key_of[g.name], ())
                self._workspace_of[g.name] = tuple(f"{g.name}.workspace{n}" for n in range(len(sizes)))
                self._workspace.update((w, (i, nbytes)) for w, nbytes in zip(self._workspace_of[g.name], sizes))
        self.plan = plan_memory(partition, self._workspace)
        self.kernels = kernels
        self.value_guards: dict[str, np.ndarray] = {}  # inputs whose compiled value every call must repeat
        self.templates: list = []  # graph/template_choice.py's decisions, where compile(kernels=...) made any
        self.b2b: list = []  # graph/b2b_fusion.py's decisions per pair of dense layers
        graph = self.graph
        # kept once: the graph's own arrays where already dense and of the right dtype
        self.constants = {k: np.require(np.asarray(v, dtype=graph.type_of(k).dtype), requirements="C")
                          for k, v in graph.constants.items()}
        self.arena = aligned_zeros(self.plan.peak_bytes, np.uint8)
        self._static: dict[str, np.ndarray] = dict(self.constants)
        self.packed: dict[str, np.ndarray] = {}  # constants packed once for a kernel (_fill_packs)
        for v, b in self.plan.buffers.items():
            if v in self._workspace:  # raw bytes, the kernel knows their type
                self._static[v] = self.arena[b.offset:b.offset + self._workspace[v][1]]
                continue
            t = graph.type_of(v)
            self._static[v] = self.arena[b.offset:b.offset + t.nbytes].view(t.dtype).reshape(t.shape)
        self.steps: list[Step] = []
        self._step_kernels: list = []
        self._views: list[Group] = []
        entries, arg_arrays, self._dynamic = [], [], []
        for g in partition.groups:
            if g.is_view:
                self._views.append(g)
                continue
            task, prog = task_of[g.name], programs[g.name]
            values = prog.input_values + prog.output_values
            key = key_of[g.name]
            kernel, fill = kernels[key], fills.get(key)
            if key != g.name:
                values = tuple(values[i] for i in task.arg_order(prog))
            if fill is not None:
                values = tuple(values) + self._fill_packs(g.name, fill, values)
            values = tuple(values) + self._workspace_of[g.name]
            step = Step(g, task, values)
            ptrs = (ctypes.c_void_p * len(values))()
            for slot, v in enumerate(values):
                arr = self._resolve_static(v)
                if arr is None:
                    self._dynamic.append((ptrs, slot, v))
                else:
                    ptrs[slot] = arr.ctypes.data
            self.steps.append(step)
            self._step_kernels.append(kernel)
            entries.append(entry_point(kernel._lib))
            arg_arrays.append(ptrs)
        self._produced = frozenset(v for s in self.steps for v in s.group.outputs)
        self._sequence = Sequence(target, entries, arg_arrays)
        self.input_types = [graph.type_of(v) for v in graph.inputs]
        self.output_types = [graph.type_of(v) for v in graph.outputs]

    def _fill_packs(self, group: str, fill, values) -> tuple[str, ...]:
        """Run a group's pack kernel once on its constants; the packed arrays become
        constants named '<group>.<buffer>' (exported with the weights)."""
        consts = [self._static.get(self.plan.root(v)) for v in values]
        arrays = [None if a is None else self._at(a, v) for a, v in zip(consts, values)]
        names = tuple(f"{group}.{n}" for n in fill.names)
        for name, arr in zip(names, fill.run(arrays)):
            self.constants[name] = self._static[name] = arr
            self.packed[name] = arr
        return names

    def _resolve_static(self, value: str) -> np.ndarray | None:
        """The array of `value` if it is the same on every call (arena or constant), else None."""
        if value in self.packed:
            return self.packed[value]
        if value in self._workspace:
            return self._static[value]
        root = self.plan.root(value)
        arr = self._static.get(root)
        if arr is None or root in self.graph.outputs or root in self.graph.inputs:
            return None
        return self._at(arr, value)

    def _at(self, base: np.ndarray, value: str) -> np.ndarray:
        """`value`'s array inside `base`, the array of its root (a view may start past its root's first byte)."""
        t = self.graph.type_of(value)
        start = self.plan.view_offset(value)
        return base.reshape(-1).view(np.uint8)[start:start + t.nbytes].view(t.dtype).reshape(t.shape)

    # --- running ---

    def _check_inputs(self, arrays) -> list[np.ndarray]:
        names = self.graph.inputs
        if len(arrays) != len(names):
            raise ShapeError(f"model '{self.graph.name}' takes {len(names)} inputs ({', '.join(names)}), "
                             f"got {len(arrays)}")
        out = []
        for name, t, a in zip(names, self.input_types, arrays):
            a = self._host_array(name, a)
            if tuple(a.shape) != t.shape:
                raise ShapeError(f"model '{self.graph.name}': input '{name}' has shape {list(a.shape)}, "
                                 f"expected {list(t.shape)}")
            if a.dtype != np.dtype(t.dtype):
                raise ShapeError(f"model '{self.graph.name}': input '{name}' has dtype {a.dtype}, expected "
                                 f"{t.dtype} (cast it with .astype(np.{t.dtype}))")
            fixed = self.value_guards.get(name)
            if fixed is not None and not np.array_equal(a, fixed):
                raise ShapeError(f"model '{self.graph.name}': input '{name}' holds {a.ravel().tolist()[:8]}, but "
                                 f"the module was compiled for {fixed.ravel().tolist()[:8]} (its value fixes a shape "
                                 "or an attribute); compile again with this value in example_inputs")
            out.append(np.require(a, requirements="C"))
        for i, rows, wraps, node in self._ids:
            ids = out[i]
            low = -rows if wraps else 0
            if ids.size and (int(ids.min()) < low or int(ids.max()) >= rows):
                bad = int(ids.min()) if int(ids.min()) < low else int(ids.max())
                raise ShapeError(f"model '{self.graph.name}': input '{names[i]}' holds id {bad}, outside "
                                 f"[{low}, {rows}) of the {rows}-row table that '{node}' reads")
        return out

    def _host_array(self, name: str, a) -> np.ndarray:
        return host_array(a, f"model '{self.graph.name}'", name, "this module")

    def _bind(self, arrays) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
        env = dict(zip(self.graph.inputs, self._check_inputs(arrays)))
        outputs = []
        for v, t in zip(self.graph.outputs, self.output_types):
            if v in env:  # an input passed straight out is returned as a copy, never as the caller's own array
                outputs.append(env[v].copy())
            elif v in self._produced:  # a kernel writes it: the output array is its buffer
                env[v] = np.empty(t.shape, t.dtype)
                outputs.append(env[v])
            else:  # a view or constant, copied into a fresh array after the run; kernels read its root
                outputs.append(np.empty(t.shape, t.dtype))
        for ptrs, slot, v in self._dynamic:
            if v in env:
                ptrs[slot] = env[v].ctypes.data
            else:
                ptrs[slot] = env[self.plan.root(v)].ctypes.data + self.plan.view_offset(v)
        self._keep = env
        return env, outputs

    def __call__(self, *arrays):
        """Run the model; a list of outputs (one output alone for a one-output model): NumPy arrays, or
        torch tensors sharing their memory when any input is a torch tensor."""
        with self._lock:
            env, outputs = self._bind(arrays)
            rc = self._sequence.run()
            if rc:
                step = self.steps[rc - 1]
                raise MeasureError(f"model '{self.graph.name}': kernel of group '{step.group.name}' failed "
                                   "(out of memory?)")
            self._finish(env, outputs)
        if any(_is_torch(a) for a in arrays):
            import torch

            outputs = [torch.from_numpy(o) for o in outputs]
        return outputs[0] if len(outputs) == 1 else outputs

    @property
    def peak_bytes(self) -> int:
        """Peak activation memory of one run: the arena (kernels' large temporaries included),
        the output arrays, and the most a kernel allocates for itself while it runs (on its
        stack or per thread; one kernel runs at a time)."""
        from .temporaries import temporary_bytes

        temps = max((k.temporary_bytes(self.target.cores) if hasattr(k, "temporary_bytes")
                     else temporary_bytes(k.func, self.target.cores) for k in self._step_kernels), default=0)
        return self.plan.peak_bytes + sum(t.nbytes for t in self.output_types) + temps

    def __repr__(self) -> str:
        return (f"<Module '{self.graph.name}': {len(self.steps)} kernels, {len(self.tasks)} tasks, "
                f"arena {self.plan.peak_bytes} bytes>")

    def _finish(self, env, outputs) -> None:
        """Graph outputs that are views, inputs or constants are copies of what they alias."""
        for v, out in zip(self.graph.outputs, outputs):
            if v in self._produced:
                continue
            src = self._lookup(v, env)
            if src is not out:
                np.copyto(out, src.reshape(out.shape))

    def _lookup(self, v: str, env) -> np.ndarray:
        if v in env:
            return env[v]
        root = self.plan.root(v)
        return self._at(env[root] if root in env else self._static[root], v)

    def time(self, *arrays, number: int | None = None, repeat: int = 5) -> float:
        """Median seconds per run of the whole model (kernels back to back inside C)."""
        with self._lock:
            self._bind(arrays)
            number = number or self._runs_per_timing()
            return median([self._sequence.time(number) for _ in range(repeat)])

    def _runs_per_timing(self, seconds: float = 0.05) -> int:
        """Whole runs of the model that one timing averages over: enough to last `seconds`."""
        return max(1, int(seconds / max(self._sequence.time(1), 1e-7)))

    def kernel_times(self, *arrays, repeat: int = 3, in_place: bool = False, min_seconds: float = 0.01) -> list[float]:
        """Seconds per call of each step's kernel, on the bound buffers: each kernel run alone
        on warm caches (calls back to back for `min_seconds` per sample), or with `in_place` timed
        inside whole runs of the model back to back (caches as the kernels before it leave them),
        the median of `repeat` sets of runs."""
        with self._lock:
            return self._kernel_times(arrays, repeat, in_place, min_seconds)

    def _kernel_times(self, arrays, repeat: int, in_place: bool, min_seconds: float) -> list[float]:
        self._bind(arrays)
        if in_place:
            number = self._runs_per_timing()
            sets = [self._sequence.profile(number) for _ in range(repeat)]
            return [median(ts) for ts in zip(*sets)]
        times = []
        for kernel, ptrs in zip(self._step_kernels, self._sequence.args):
            once = max(kernel._lib.tw_time(ptrs, 1), 1e-7)
            number = max(1, int(min_seconds / once))
            times.append(median([kernel._lib.tw_time(ptrs, number) for _ in range(repeat)]))
        return times

    def dispatch_overhead(self) -> dict[str, float]:
        return dispatch_overhead(self.target)

    def summary(self, *arrays) -> str:
        """Groups, tasks, kernel times (when given inputs), the memory plan and the dispatch overhead."""
        times = self.kernel_times(*arrays) if arrays else [None] * len(self.steps)
        lines = [f"module '{self.graph.name}': {len(self.steps)} kernels, {len(self.tasks)} tasks, "
                 f"{len(self._views)} views on {self.target.key}"]
        peak = None
        if arrays:
            from ..runtime.peak import fp32_peak_gflops

            peak = fp32_peak_gflops(self.target)
        for s, t in zip(self.steps, times):
            ops = "+".join(n.op for n in s.group.nodes)
            when = ""
            if t is not None:
                gflops = s.task.flops / t / 1e9
                when = f"{t * 1e6:10.1f} us {gflops:7.1f} GFLOP/s {100 * gflops / peak:5.1f}% of peak"
            lines.append(f"  {s.group.name:<24} {ops:<36} task {s.task.name} (x{s.task.weight}) {when}")
        if arrays:
            whole = self.time(*arrays)
            lines.append(f"  total of kernels {sum(times) * 1e6:.1f} us; whole model {whole * 1e6:.1f} us; "
                         f"fp32 peak {peak:.0f} GFLOP/s")
        lines.append(f"  {self.plan}")
        o = self.dispatch_overhead()
        lines.append(f"  dispatch per kernel: native runner {o['native_s'] * 1e9:.0f} ns, one ctypes call from "
                     f"Python {o['python_s'] * 1e9:.0f} ns")
        return "\n".join(lines)

    def set_num_threads(self, n: int) -> None:
        """Threads every kernel runs on from now on (compiled for the target's cores)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ShapeError(f"set_num_threads takes a positive int, got {n!r}")
        for kernel in {id(k): k for k in self._step_kernels}.values():
            kernel.set_num_threads(n)

    def export(self, directory):
        """One shared library with every kernel and the runner, weights.bin and model.h (see graph/export.py)."""
        from .export import export_module

        return export_module(self, directory)


def build_module(partition: Partition, target, programs: dict[str, GroupProgram] | None = None,
                 tasks: list[Task] | None = None, kernels_choice: str = "search", store=None,
                 fuse_b2b: bool = True) -> Module:
    """Build one kernel per task (best record of the active store, or the default schedule); with
    `kernels_choice` "templates" or "auto", put templates where they fit (graph/template_choice.py)
    and, with `fuse_b2b`, fuse pairs of dense layers back to back (graph/b2b_fusion.py)."""
    from ..targets import as_target
    from .const_packs import build_kernel

    target = as_target(target)
    programs = lower_partition(partition) if programs is None else programs
    tasks = extract_tasks(partition, programs) if tasks is None else tasks
    kernels: dict[str, object] = {}
    fills: dict[str, object] = {}
    workspaces: dict[str, tuple[int, ...]] = {}

    def add(key: str, args: list, constants: set[int], name: str) -> None:
        kernels[key], fill, workspaces[key] = build_kernel(args, constants, target, name)
        if fill is not None:
            fills[key] = fill

    for t in tasks:
        add(t.key, t.args, set(t.constants), t.name)
        for g in t.groups[1:]:
            if t.arg_order(programs[g]) is None:
                add(g, list(programs[g].args), constant_positions(programs[g], partition.graph.constants),
                    programs[g].name)
    decisions: list = []
    b2b: list = []
    if kernels_choice != "search" and target.kind == "cpu":
        from .template_choice import choose

        (kernels, fills, workspaces), decisions = choose(kernels_choice, partition, target, programs, tasks,
                                                         (kernels, fills, workspaces), store)
        if fuse_b2b:
            from .b2b_fusion import choose_b2b

            partition, programs, tasks, (kernels, fills, workspaces), b2b = choose_b2b(
                kernels_choice, partition, target, programs, tasks, (kernels, fills, workspaces), store)
    module = Module(partition, kernels, tasks, programs, target, fills=fills, workspaces=workspaces)
    module.templates, module.b2b = decisions, b2b
    return module


def host_array(a, model: str, name: str, runner: str) -> np.ndarray:
    """A NumPy view of a CPU torch tensor or a DLPack-capable array (no copy), else np.asarray; a tensor on
    another device, or an array DLPack cannot hand over, is a ShapeError naming `model`'s input `name`."""
    if _is_torch(a):
        if not a.is_cpu:
            raise ShapeError(f"{model}: input '{name}' is on {a.device}; {runner} runs on the CPU: pass a CPU "
                             "tensor (x.cpu())")
        return (a.detach() if a.requires_grad else a).numpy()  # shares the tensor's memory
    if not isinstance(a, np.ndarray) and hasattr(a, "__dlpack__"):
        try:
            return np.from_dlpack(a)
        except (BufferError, TypeError, RuntimeError) as e:
            raise ShapeError(f"{model}: input '{name}' ({type(a).__name__}) cannot be read on the CPU through "
                             f"DLPack: {e}") from e
    return np.asarray(a)


_TORCH_TYPES: set[type] = set()  # tensor types seen, so a call's type test is one set lookup


def _is_torch(a) -> bool:
    kind = type(a)
    if kind in _TORCH_TYPES:
        return True
    if kind.__module__.startswith("torch") and hasattr(a, "detach") and hasattr(a, "device"):
        _TORCH_TYPES.add(kind)
        return True
    return False


def _id_inputs(graph) -> list[tuple[int, int, bool, str]]:
    """(input position, table rows, negative ids wrap, node) of every embedding or gather that reads a
    graph input as its ids: those are checked before any kernel runs (a kernel would clamp them)."""
    from .gather_ops import checked_indices

    return [(graph.inputs.index(n.inputs[1]), graph.type_of(n.inputs[0]).shape[0],
             bool(n.attr("negative_wraps", False)), n.name)
            for n in graph.nodes if n.op == "embedding" and n.inputs[1] in graph.inputs] + checked_indices(graph)
