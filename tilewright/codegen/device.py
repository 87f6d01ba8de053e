"""What a GPU renderer hands to compilers and runtimes: the device source and,
per kernel, its launch descriptor (grid, block, shared bytes, the buffers it
takes in order). Plain data that round-trips through JSON, so an exported
artefact can be loaded by another process."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class DeviceBuffer:
    """A buffer the device sees: a function argument or a global intermediate the host allocates."""

    name: str  # identifier in the device source
    dtype: str  # tilewright dtype name ("float32", "bfloat16", ...)
    shape: tuple[int, ...]  # storage shape
    caller_shape: tuple[int, ...]  # the shape callers pass (differs for merged-axis views)
    role: str  # "arg" | "intermediate"
    index: int  # position among the function's arguments or intermediates

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class KernelLaunch:
    name: str  # the kernel function's name in the source
    grid: tuple[int, int, int]  # blocks (OpenCL: work-groups) per dimension
    block: tuple[int, int, int]  # threads (work-items) per block
    shared_bytes: int  # static shared memory it declares
    dynamic_shared_bytes: int  # shared memory passed at launch
    params: tuple[DeviceBuffer, ...]  # its parameters, in order

    @property
    def global_size(self) -> tuple[int, int, int]:
        """OpenCL's global work size: grid * block."""
        return tuple(g * b for g, b in zip(self.grid, self.block))


@dataclass(frozen=True)
class DeviceModule:
    source: str
    dialect: str  # "cuda" | "opencl"
    func_name: str
    kernels: tuple[KernelLaunch, ...]  # launched in this order
    args: tuple[DeviceBuffer, ...]
    intermediates: tuple[DeviceBuffer, ...]  # allocated by the host on the device, freed after the call
    outputs: tuple[int, ...] = ()  # indices of the arguments some kernel writes (copied back to the host)

    def descriptor(self) -> dict:
        """The JSON launch descriptor: grid, block, shared bytes, argument order, dtypes and shapes."""
        return {"format": "tilewright-device-module/1", "dialect": self.dialect, "func_name": self.func_name,
                "args": [asdict(b) for b in self.args],
                "intermediates": [asdict(b) for b in self.intermediates],
                "kernels": [asdict(k) for k in self.kernels], "outputs": list(self.outputs)}

    @classmethod
    def from_descriptor(cls, source: str, d: dict) -> DeviceModule:
        def buf(b):
            return DeviceBuffer(b["name"], b["dtype"], tuple(b["shape"]), tuple(b["caller_shape"]), b["role"],
                                b["index"])

        kernels = tuple(KernelLaunch(k["name"], tuple(k["grid"]), tuple(k["block"]), k["shared_bytes"],
                                     k["dynamic_shared_bytes"], tuple(buf(p) for p in k["params"]))
                        for k in d["kernels"])
        return cls(source, d["dialect"], d["func_name"], kernels, tuple(buf(b) for b in d["args"]),
                   tuple(buf(b) for b in d["intermediates"]), tuple(d.get("outputs", ())))

    def launch_summary(self) -> str:
        """One line per kernel, as a comment block: what the host launches."""
        lines = []
        for k in self.kernels:
            params = ", ".join(f"{p.name}: {p.dtype}{list(p.shape)}" for p in k.params)
            lines.append(f"// launch {k.name}<<<grid={k.grid}, block={k.block}, shared={k.shared_bytes}B>>>"
                         f"({params})")
        for b in self.intermediates:
            lines.append(f"// host allocates {b.name}: {b.dtype}{list(b.shape)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.source + "\n" + self.launch_summary() + "\n"

    def to_json(self) -> str:
        return json.dumps(self.descriptor(), indent=1)


__all__ = ["DeviceBuffer", "DeviceModule", "KernelLaunch"]
