"""Device code for GPU dialects (CUDA, OpenCL): the renderer both share.

A lowered function's top-level statements (under the Allocates of its global
intermediates) are its kernels: each holds thread-bound loops, whose extents
are its launch grid and block. A bound loop renders as its index
(`const int i = blockIdx.x;`), shared buffers are declared at the kernel's
top, and vector statements are split into lanes, with 2/4-lane contiguous
loads and stores kept as vector accesses where the dialect allows them."""

from __future__ import annotations

from ..errors import BuildError
from ..ir.dtype import DType
from ..ir.expr import (
    Binary,
    BinOp,
    Broadcast,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    Ramp,
    Select,
    Unary,
    Var,
)
from ..ir.stmt import Allocate, Barrier, Fence, For, ForKind, LetStmt, Scope, Seq, Stmt, Store
from ..ir.stmt_functor import all_expr_nodes, walk_stmt
from ..ir.traverse import children
from ..lower.gpu_checks import launch_extents
from .base import CRenderer, _Raw
from .device import DeviceBuffer, DeviceModule, KernelLaunch
from .names import GPU_RESERVED, NameTable

_DIMS = ("x", "y", "z")


def split_kernels(body: Stmt) -> tuple[list, list[Stmt]]:
    """(global intermediates, top-level statements = one kernel each)."""
    intermediates = []
    while isinstance(body, Allocate):
        if body.buffer.scope is not Scope.GLOBAL:
            raise BuildError(f"buffer '{body.buffer.name}' of scope {body.buffer.scope.value} is allocated "
                             f"outside every kernel; compute_at it inside a thread-bound loop")
        intermediates.append(body.buffer)
        body = body.body
    stmts = list(body.stmts) if isinstance(body, Seq) else [body]
    return intermediates, stmts


def _stage_name(stmt: Stmt) -> str:
    for s in walk_stmt(stmt):
        if isinstance(s, Store):
            return s.buffer.name
    return "?"


def _divisible(e: Expr, n: int) -> bool:
    """Whether `e` is provably a multiple of n (for aligned vector accesses)."""
    if isinstance(e, Const):
        return int(e.value) % n == 0
    if isinstance(e, Binary) and e.op in (BinOp.ADD, BinOp.SUB):
        return _divisible(e.a, n) and _divisible(e.b, n)
    if isinstance(e, Binary) and e.op is BinOp.MUL:
        return _divisible(e.a, n) or _divisible(e.b, n)
    return False


class GpuRenderer(CRenderer):
    """Renders a LoweredFunc into a DeviceModule; dialects set `caps` and the hooks at the bottom."""

    dialect = ""
    vector_alignment_required = True  # vector accesses must start at a multiple of their lanes

    def __init__(self):
        super().__init__()
        self.names = NameTable(reserved=GPU_RESERVED)
        self.lane_vars: dict[int, list[str]] = {}  # id(vector let var) -> its lanes' names
        self.used: set[str] = set()  # dtype names rendered (fp64/fp16 need pragmas or headers)
        self.extents: dict[str, int] = {}  # the kernel being rendered: tag -> launch extent
        self.ntemp = 0

    # ---- types ------------------------------------------------------------
    def scalar_type(self, d: DType) -> str:
        self.used.add(d.name)
        return super().scalar_type(d)

    def storage_type(self, d: DType) -> str:
        self.used.add(d.name)
        return self.caps.storage_types.get(d.name) or self.caps.scalar_types[d.name]

    def vector_type(self, d: DType) -> str:
        return f"{self.storage_type(d.scalar)}{d.lanes}"

    def temp_type(self, d: DType) -> str:
        """The type of a temporary holding one element on its way to memory."""
        return self.storage_type(d)

    def temp(self) -> str:
        self.ntemp += 1
        return f"tw_t{self.ntemp}"

    # ---- lanes --------------------------------------------------------------
    def lane(self, e: Expr, k: int, hoisted: dict[int, str]) -> Expr:
        """The scalar expression of lane k of vector expression e."""
        d = e.dtype
        if d.lanes == 1:
            return e
        s = d.scalar
        if isinstance(e, Ramp):
            return e.base if k == 0 else Binary(BinOp.ADD, e.base, Const(k * e.stride, e.base.dtype), s)
        if isinstance(e, Broadcast):
            return e.value
        if isinstance(e, Load):
            if id(e) in hoisted:
                return _Raw(f"{hoisted[id(e)]}{self.caps.vector_lane_names[k]}", s)
            return Load(e.tensor, (self.lane(e.indices[0], k, hoisted),), s)
        if isinstance(e, Var) and id(e) in self.lane_vars:
            return _Raw(self.lane_vars[id(e)][k], s)
        if isinstance(e, Binary):
            return Binary(e.op, self.lane(e.a, k, hoisted), self.lane(e.b, k, hoisted), s)
        if isinstance(e, Compare):
            return Compare(e.op, self.lane(e.a, k, hoisted), self.lane(e.b, k, hoisted), s)
        if isinstance(e, Unary):
            return Unary(e.op, self.lane(e.a, k, hoisted), s)
        if isinstance(e, Cast):
            return Cast(self.lane(e.value, k, hoisted), s)
        if isinstance(e, Select):
            return Select(self.lane(e.cond, k, hoisted), self.lane(e.t, k, hoisted), self.lane(e.f, k, hoisted), s)
        if isinstance(e, Call):
            return Call(e.func, tuple(self.lane(a, k, hoisted) for a in e.args), s)
        raise BuildError(f"cannot split vector expression {type(e).__name__} into lanes: {e}")

    def vector_access_ok(self, d: DType, index: Expr) -> bool:
        return (isinstance(index, Ramp) and index.stride == 1 and d.lanes in self.caps.vector_lanes
                and d.name in self.vector_dtypes
                and (not self.vector_alignment_required or _divisible(index.base, d.lanes)))

    def hoist_vector_loads(self, e: Expr, hoisted: dict[int, str]) -> None:
        """Load contiguous vectors into temporaries, except under a Select's branches
        (a guarded load may be out of bounds)."""
        if isinstance(e, Load) and e.dtype.lanes > 1 and self.vector_access_ok(e.dtype, e.indices[0]):
            if id(e) not in hoisted:
                buf = self.names.of(e.tensor, e.tensor.name)
                t = self.temp()
                self.emit(f"const {self.vector_type(e.dtype)} {t} = "
                          f"{self.vector_load(e.dtype, buf, self.expr(e.indices[0].base))};")
                hoisted[id(e)] = t
            return
        for c in (e.cond,) if isinstance(e, Select) else children(e):
            self.hoist_vector_loads(c, hoisted)

    def expr_Load(self, e: Load) -> str:
        if e.dtype.lanes > 1:
            raise BuildError(f"vector load of '{e.tensor.name}' outside a vector store")
        return super().expr_Load(e)

    # ---- statements -------------------------------------------------------
    def stmt_Store(self, s: Store) -> None:
        value, index = s.value, s.indices[0]
        lanes = value.dtype.lanes
        if lanes == 1:
            return super().stmt_Store(s)
        hoisted: dict[int, str] = {}
        self.hoist_vector_loads(value, hoisted)
        buf = self.names.of(s.buffer, s.buffer.name)
        vals = [self.expr(self.lane(value, k, hoisted)) for k in range(lanes)]
        if self.vector_access_ok(value.dtype, index):
            self.emit(self.vector_store(value.dtype, buf, self.expr(index.base), vals))
            return
        temps = []  # every lane is computed before any is stored: the value may read the target
        for v in vals:
            temps.append(self.temp())
            self.emit(f"const {self.temp_type(value.dtype.scalar)} {temps[-1]} = {v};")
        for k, t in enumerate(temps):
            self.emit(self.store_element(s.buffer, buf, self.expr(self.lane(index, k, hoisted)), t))

    def stmt_LetStmt(self, s: LetStmt) -> None:
        if s.var.dtype.lanes == 1:
            return super().stmt_LetStmt(s)
        hoisted: dict[int, str] = {}
        self.hoist_vector_loads(s.value, hoisted)
        base = self.names.of(s.var, s.var.name)
        names = [f"{base}_{k}" for k in range(s.var.dtype.lanes)]
        for k, n in enumerate(names):
            self.emit(f"const {self.type_name(s.var.dtype.scalar)} {n} = {self.expr(self.lane(s.value, k, hoisted))};")
        self.lane_vars[id(s.var)] = names
        self.stmt(s.body)

    def loop_pragma(self, s: For) -> str | None:
        if s.kind is ForKind.PARALLEL:
            raise BuildError(f"loop '{s.var.name}' is parallel; on a GPU bind it to blockIdx/threadIdx instead")
        if s.kind is ForKind.UNROLLED:
            return "#pragma unroll"
        if s.kind is ForKind.ROLLED:
            return "#pragma unroll 1"
        return None

    def stmt_For(self, s: For) -> None:
        if s.kind is not ForKind.THREAD_BINDING:
            return super().stmt_For(s)
        tag = s.thread_tag
        index = self.caps.thread_index[tag]
        v = self.names.of(s.var, s.var.name)
        starts_at_zero = isinstance(s.begin, Const) and s.begin.value == 0
        value = index if starts_at_zero else f"({self.expr(s.begin)} + {index})"
        if v in self.bound_names:  # a copy of a loop (unrolled around it): a block of its own, not a redefinition
            self.emit("{")
            self.depth += 1
            self._bound_loop(s, v, value, tag, index)
            self.depth -= 1
            self.emit("}")
            return
        self.bound_names.add(v)
        self._bound_loop(s, v, value, tag, index)

    def _bound_loop(self, s: For, v: str, value: str, tag: str, index: str) -> None:
        self.emit(f"const {self.type_name(s.var.dtype)} {v} = {value};")
        own = int(s.extent.value)
        if own >= self.extents[tag]:
            return self.stmt(s.body)
        # lowering gives every loop of a tag one extent; IR built otherwise may have shorter siblings
        if any(isinstance(x, Barrier) for x in walk_stmt(s.body)):
            raise BuildError(f"loop '{s.var.name}' bound to {tag} has extent {own}, less than the launch's "
                             f"{self.extents[tag]}, and holds a barrier that its idle threads would miss")
        self.emit(f"if ({index} < {own}) {{")
        self.depth += 1
        self.stmt(s.body)
        self.depth -= 1
        self.emit("}")

    def stmt_Barrier(self, s: Barrier) -> None:
        self.emit(self.caps.barrier)

    def stmt_Fence(self, s: Fence) -> None:
        pass  # a CPU compiler's hint: a GPU compiler allocates each thread's registers itself

    def stmt_Allocate(self, s: Allocate) -> None:
        b = s.buffer
        if b.scope is Scope.SHARED:  # declared at the kernel's top
            return self.stmt(s.body)
        if b.scope is Scope.GLOBAL:
            raise BuildError(f"global buffer '{b.name}' is allocated inside a kernel; only the host allocates "
                             f"global memory")
        if s.register_lanes == 1:  # one scalar per element: registers (vector slots stay an array here)
            return self.allocate_registers(s, self.names.of(b, b.name), 1)
        self.emit("{")
        self.depth += 1
        self.emit(self.array_decl(Scope.LOCAL, b) + ";")
        self.stmt(s.body)
        self.depth -= 1
        self.emit("}")

    # ---- the module ---------------------------------------------------------
    def render(self, func) -> DeviceModule:
        intermediates, stmts = split_kernels(func.body)
        shapes = func.caller_shapes
        args = tuple(DeviceBuffer(self.names.of(b, b.name), b.dtype.name, tuple(b.shape), tuple(c), "arg", n)
                     for n, (b, c) in enumerate(zip(func.args, shapes)))
        inter = tuple(DeviceBuffer(self.names.of(b, b.name), b.dtype.name, tuple(b.shape), tuple(b.shape),
                                   "intermediate", n) for n, b in enumerate(intermediates))
        by_id = {id(b): d for b, d in zip(list(func.args) + intermediates, args + inter)}
        kernels, bodies = [], []
        for n, st in enumerate(stmts):
            self.extents = launch_extents(st, largest=True)
            if "vthread" in self.extents:
                raise BuildError(f"stage '{_stage_name(st)}' still has a loop bound to vthread, which lowering "
                                 f"should have interleaved away before code generation")
            if not self.extents:
                raise BuildError(f"stage '{_stage_name(st)}' has no loop bound to blockIdx/threadIdx; on a GPU "
                                 f"every stage must bind its outer loops (s[stage].bind(axis, tw.thread_axis(...)))")
            name = self.names.fresh(func.name if len(stmts) == 1 else f"{func.name}_{n}")
            launch, text = self.render_kernel(name, st, func.args, intermediates, by_id)
            kernels.append(launch)
            bodies.append(text)
        parts = [self.prelude()] + list(self.helpers.values()) + bodies
        source = "\n\n".join(p for p in parts if p) + "\n"
        written = {id(s.buffer) for s in walk_stmt(func.body) if isinstance(s, Store)}
        outputs = tuple(n for n, b in enumerate(func.args) if id(b) in written)
        return DeviceModule(source, self.dialect, func.name, tuple(kernels), args, inter, outputs)

    def render_kernel(self, name: str, st: Stmt, fargs, intermediates, by_id) -> tuple[KernelLaunch, str]:
        touched, written = set(), set()
        for s in walk_stmt(st):
            if isinstance(s, Store):
                touched.add(id(s.buffer))
                written.add(id(s.buffer))
        for e in all_expr_nodes(st):
            if isinstance(e, Load):
                touched.add(id(e.tensor))
        params = [b for b in list(fargs) + intermediates if id(b) in touched]
        shared, seen = [], set()
        for s in walk_stmt(st):
            if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED and id(s.buffer) not in seen:
                seen.add(id(s.buffer))
                shared.append(s.buffer)
        self.lines, self.depth, self.bound_names = [], 1, set()
        for b in shared:
            self.emit(self.array_decl(Scope.SHARED, b) + ";")
        self.stmt(st)
        decls = [self.param_decl(b, id(b) not in written) for b in params]
        grid = tuple(self.extents.get(f"blockIdx.{d}", 1) for d in _DIMS)
        block = tuple(self.extents.get(f"threadIdx.{d}", 1) for d in _DIMS)
        text = f"{self.kernel_head(name, block)}({', '.join(decls)}) {{\n" + "\n".join(self.lines) + "\n}"
        shared_bytes = sum(b.size * b.dtype.bytes for b in shared)
        return KernelLaunch(name, grid, block, shared_bytes, 0, tuple(by_id[id(b)] for b in params)), text

    # ---- dialect hooks ------------------------------------------------------
    vector_dtypes: tuple[str, ...] = ()  # dtypes with native vector types

    def prelude(self) -> str:
        raise NotImplementedError

    def kernel_head(self, name: str, block: tuple[int, int, int]) -> str:
        """What precedes a kernel's parameter list."""
        return f"{self.caps.kernel_prefix} {name}"

    def param_decl(self, b, read_only: bool) -> str:
        raise NotImplementedError

    def array_decl(self, scope: Scope, b) -> str:
        raise NotImplementedError

    def vector_load(self, d: DType, buf: str, base: str) -> str:
        raise NotImplementedError

    def vector_store(self, d: DType, buf: str, base: str, lanes: list[str]) -> str:
        raise NotImplementedError


__all__ = ["GpuRenderer", "launch_extents", "split_kernels"]
