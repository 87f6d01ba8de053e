"""What a compiled model does on a GPU, as plain data: where the bytes of every
value a kernel touches live, and the steps of one run in order.

A value lives in the arena (one device allocation laid out by the memory plan:
each buffer's lifetime as on the CPU, offsets re-placed at the device's
alignment where it is coarser than the plan's), in the weights block (every
constant, uploaded once), in the caller's input or output buffers (bound per
call), or, for a view whose byte offset the device cannot address (an OpenCL
sub-buffer must start at CL_DEVICE_MEM_BASE_ADDR_ALIGN, a CUDA argument at 16
bytes for vector loads), in a buffer of its own filled by a device copy before
it is read or copied back after it is written. A run is kernel launches and
those copies; graph outputs no kernel writes (views, inputs, constants) are
copied out at the end. The GpuModule runs a DevicePlan; export writes it as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..runtime.aligned import ALIGN
from .ir import TensorType
from .memory_plan import Interval, MemoryPlan, _best_placement

FORMAT = "tilewright-device-model/1"


@dataclass(frozen=True)
class Slot:
    """Where one value's bytes are: `where` is "arena" | "weights" | "input" | "output" | "own";
    `name` the graph input or output (its root) or the value with a buffer of its own ("" in the
    arena and the weights); `offset` in bytes from the start of that storage."""
    where: str
    name: str
    offset: int
    nbytes: int

    @property
    def dynamic(self) -> bool:
        """Bound per call (the caller's buffers)."""
        return self.where in ("input", "output")


@dataclass(frozen=True)
class Launch:
    """One group's kernel: the key of its kernel and the slot of each kernel argument, in order."""
    group: str
    ops: str
    kernel: str
    task: str
    flops: int
    args: tuple[Slot, ...]


@dataclass(frozen=True)
class CopyStep:
    dst: Slot
    src: Slot


@dataclass(frozen=True)
class DevicePlan:
    name: str
    dtype: str  # "float32" | "float16": what the model's float values are stored as
    arena_bytes: int
    weights_bytes: int
    weights: dict  # constant -> byte offset in the weights block
    own: dict  # value -> bytes of its own buffer
    inputs: tuple  # ((name, TensorType), ...)
    outputs: tuple
    steps: tuple  # Launch | CopyStep, in order
    produced: frozenset  # graph outputs some kernel writes: bound to the caller's output buffers
    finals: tuple = ()  # ((output index, Slot), ...): outputs copied from where their value lives
    arena: dict = field(default_factory=dict)  # arena value -> byte offset (for reading)

    @property
    def launches(self) -> list[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def to_json(self) -> dict:
        def slot(s: Slot) -> list:
            return [s.where, s.name, s.offset, s.nbytes]

        steps = []
        for s in self.steps:
            if isinstance(s, Launch):
                steps.append({**asdict(s), "args": [slot(a) for a in s.args]})
            else:
                steps.append({"copy": [slot(s.dst), slot(s.src)]})
        return {"format": FORMAT, "name": self.name, "dtype": self.dtype, "arena_bytes": self.arena_bytes,
                "weights_bytes": self.weights_bytes, "weights": self.weights, "own": self.own,
                "inputs": [[v, list(t.shape), t.dtype] for v, t in self.inputs],
                "outputs": [[v, list(t.shape), t.dtype] for v, t in self.outputs],
                "steps": steps, "produced": sorted(self.produced),
                "finals": [[i, slot(s)] for i, s in self.finals], "arena": self.arena}

    @classmethod
    def from_json(cls, d: dict) -> DevicePlan:
        def slot(x) -> Slot:
            return Slot(x[0], x[1], int(x[2]), int(x[3]))

        steps = []
        for s in d["steps"]:
            if "copy" in s:
                steps.append(CopyStep(slot(s["copy"][0]), slot(s["copy"][1])))
            else:
                steps.append(Launch(s["group"], s["ops"], s["kernel"], s["task"], int(s["flops"]),
                                    tuple(slot(a) for a in s["args"])))
        return cls(d["name"], d["dtype"], int(d["arena_bytes"]), int(d["weights_bytes"]), dict(d["weights"]),
                   dict(d["own"]), tuple((v, TensorType(tuple(s), t)) for v, s, t in d["inputs"]),
                   tuple((v, TensorType(tuple(s), t)) for v, s, t in d["outputs"]), tuple(steps),
                   frozenset(d["produced"]), tuple((int(i), slot(s)) for i, s in d["finals"]), dict(d["arena"]))


def _up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def arena_offsets(plan: MemoryPlan, align: int) -> tuple[dict[str, int], int]:
    """Each arena buffer's offset and the arena's bytes: the plan's own where its alignment is a
    multiple of `align`, else the same lifetimes placed again with sizes rounded up to `align`
    (so every offset is a multiple of it)."""
    if ALIGN % align == 0:
        return {v: b.offset for v, b in plan.buffers.items()}, plan.peak_bytes
    placed = _best_placement([Interval(b.value, _up(b.nbytes, align), b.first, b.last)
                              for b in plan.buffers.values()])
    return {p.value: p.offset for p in placed}, max((p.offset + p.nbytes for p in placed), default=0)


def build_device_plan(partition, memory: MemoryPlan, bindings: list, align: int, dtype: str) -> DevicePlan:
    """`bindings`: per kernel group, in order, (group, ops, kernel key, task label, flops, values
    bound to its arguments, values it writes)."""
    graph = partition.graph
    arena, arena_bytes = arena_offsets(memory, align)
    weights, at = {}, 0
    for v in sorted(graph.constants):
        weights[v] = at
        at = _up(at + graph.type_of(v).nbytes, max(align, ALIGN))

    def slot(v: str) -> Slot:
        root, off, n = memory.root(v), memory.view_offset(v), graph.type_of(v).nbytes
        if root in graph.inputs:
            return Slot("input", root, off, n)
        if root in graph.constants:
            return Slot("weights", "", weights[root] + off, n)
        if root in graph.outputs:
            return Slot("output", root, off, n)
        return Slot("arena", "", arena[root] + off, n)

    own: dict[str, int] = {}
    filled: set[str] = set()
    steps: list = []
    produced: set[str] = set()
    for group, ops, key, task, flops, values, written in bindings:
        args, after = [], []
        for v in values:
            s = slot(v)
            if s.offset % align:  # a view the device cannot address: its own buffer and a copy
                mine = Slot("own", v, 0, s.nbytes)
                own[v] = s.nbytes
                if v in written:
                    after.append(CopyStep(s, mine))
                elif v not in filled:
                    steps.append(CopyStep(mine, s))
                    filled.add(v)
                s = mine
            args.append(s)
        steps.append(Launch(group, ops, key, task, flops, tuple(args)))
        steps += after
        produced.update(v for v in written if v in graph.outputs)
    finals = tuple((i, slot(v)) for i, v in enumerate(graph.outputs) if v not in produced)
    return DevicePlan(graph.name, dtype, arena_bytes, at, weights, own,
                      tuple((v, graph.type_of(v)) for v in graph.inputs),
                      tuple((v, graph.type_of(v)) for v in graph.outputs), tuple(steps), frozenset(produced),
                      finals, arena)


def pack_weights(plan: DevicePlan, constants: dict) -> np.ndarray:
    """The weights block's bytes: each constant (in its graph type) at its offset."""
    blob = np.zeros(plan.weights_bytes, np.uint8)
    for v, offset in plan.weights.items():
        raw = np.ascontiguousarray(constants[v]).reshape(-1).view(np.uint8)
        blob[offset:offset + raw.nbytes] = raw
    return blob


__all__ = ["CopyStep", "DevicePlan", "Launch", "Slot", "arena_offsets", "build_device_plan", "pack_weights"]
