"""Loop IR statements produced by lowering and consumed by code generators.

Buffers are the storage of tensors after scheduling; `Load(buffer, ...)`
(the same node te uses for tensors) reads them. Vector values appear only
after the vectorize pass: `Ramp` and `Broadcast` plus dtypes with lanes > 1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .dtype import DType
from .expr import Expr, Var


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    ROLLED = "rolled"  # serial, and the backend compiler is asked not to unroll it
    THREAD_BINDING = "thread_binding"  # one iteration per GPU block/thread: For.thread_tag names which


# GPU thread tags a loop can be bound to (TVM spellings); "vthread" is interleaved by lowering.
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")


class Scope(enum.Enum):
    GLOBAL = "global"  # a kernel argument or a heap/stack intermediate
    LOCAL = "local"  # small, private to one iteration (one GPU thread): registers when possible
    SHARED = "shared"  # GPU: one copy per thread block (CUDA __shared__, OpenCL __local)
    # the on-chip buffers of a VTA-like accelerator (targets/vta.py): input, weight, accumulator
    VTA_INP = "vta.inp"
    VTA_WGT = "vta.wgt"
    VTA_ACC = "vta.acc"


@dataclass(frozen=True, eq=False)
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    scope: Scope = Scope.GLOBAL
    perm: tuple[int, ...] | None = None  # storage order: dimension d holds the tensor's axis perm[d]

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope.value})"


class Stmt:
    __slots__ = ()
    __hash__ = object.__hash__

    def __str__(self) -> str:
        from .stmt_printer import stmt_str

        return stmt_str(self)


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    var: Var
    begin: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread_tag: str | None = None  # for THREAD_BINDING: one of THREAD_TAGS


@dataclass(frozen=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt
    # set by lower/registers.py: held in registers, one variable per slot of this many lanes (0: memory)
    register_lanes: int = 0


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt
    # set by lower/operand_pins.py: the asm register class ("x": an x86 vector register) the value is
    # held in, so the C compiler cannot fold its load into the instructions that use it ("": no pin)
    pin: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """Every thread of a block waits here until all have arrived, and writes to
    memory of `scope` before it are visible to reads after it (__syncthreads)."""

    scope: Scope = Scope.SHARED


@dataclass(frozen=True, eq=False, repr=False)
class Fence(Stmt):
    """A point the C compiler may not move memory accesses across, nor reuse a
    value loaded before it after it. No thread waits (unlike Barrier); it only
    keeps sibling register tiles from being interleaved into one that spills."""


@dataclass(frozen=True, eq=False, repr=False)
class IntrinCall(Stmt):
    """One call of a declared hardware intrinsic (intrin/): `intrin` carries its
    name, semantics and emitters (opaque to the IR). Each operand is the element
    at its origin (a Load, flattened like any other) and `strides[n]` the flat
    elements between neighbours along each axis of the intrinsic's operand n;
    inputs come first, the output last. `update`: the output accumulates (+=).
    `emitter`: the spelling chosen for the target (set when lowered for one)."""

    intrin: object
    operands: tuple
    strides: tuple[tuple[int, ...], ...]
    update: bool = True
    emitter: object = None


def seq(*stmts: Stmt | None) -> Stmt:
    """A flat sequence, dropping Nones and unwrapping nested sequences."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        flat.extend(s.stmts if isinstance(s, Seq) else (s,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
