"""C for CPUs: GCC/Clang vector extensions for explicit SIMD (the compiler maps
them to the ISA chosen by -march, or to scalar code), OpenMP for parallel
loops, aligned stack or heap buffers, and entry points for ctypes:
`tw_call(void **args)`, `tw_time(void **args, int32_t number)` and
`tw_set_num_threads(int32_t)`."""

from __future__ import annotations

from ..errors import BuildError
from ..ir.dtype import DType
from ..ir.expr import Binary, BinOp, Broadcast, Call, Cast, Compare, Intrinsic, Load, Ramp, Select
from ..ir.stmt import Allocate, Fence, For, ForKind, IntrinCall, Store
from .base import CRenderer
from .bf16_vectors import render_bf16_cast
from .heap import ALLOC_LARGE, HUGE_PAGES, LARGE_BYTES, workspaces
from .interleaved_stores import InterleavedStores
from .intrinsic_calls import render_intrinsic_call
from .strided import (
    SHUFFLE_MACRO,
    integer_cast_helper,
    interleaved_run,
    scatter_helper,
    strided_load_helper,
)
from .transpose import TransposeNest, transpose_helper, transpose_nest
from .vector_math import vector_math_helper
from .x86_vector_ops import minmax_helper, round_to_int_helper

STACK_LIMIT = 64 * 1024  # bytes; larger buffers go to the heap

_PRELUDE = r"""#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
"""

_BF16 = r"""static inline float tw_bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t tw_f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}"""


class CSource:
    def __init__(self, text: str, kernel_name: str, signature: str):
        self.text = text
        self.kernel_name = kernel_name
        self.signature = signature

    def __str__(self) -> str:
        return self.text


class CCodeGen(InterleavedStores, CRenderer):
    def __init__(self, vector_bytes: int = 0):
        """`vector_bytes`: the target's vector width, for blocked transposing copies (0: none)."""
        super().__init__()
        self.vector_types: dict[str, str] = {}
        self.vector_bytes = vector_bytes
        self.parallel_depth = 0  # parallel loops around the statement being rendered
        self.workspace_slots = 0  # large per-call buffers kept between calls (codegen/heap.py)
        self.gcc_targets: set[str] = set()  # target attributes intrinsic emitters need

    # ---- vectors ----------------------------------------------------------
    def vector_type(self, d: DType) -> str:
        name = f"tw_{d.name}x{d.lanes}"
        if d.is_bool:  # comparison masks: same-width signed integers
            raise BuildError("bool vectors are rendered as masks")
        scalar = self.scalar_type(d.scalar)
        self.vector_types.setdefault(name, f"typedef {scalar} {name} __attribute__((vector_size({d.bytes * d.lanes}),"
                                           f" aligned({d.bytes})));")
        return name

    def mask_type(self, like: DType) -> str:
        bits = like.bits
        return self.vector_type(DType(f"int{bits}", _int_kind(), bits, like.lanes))

    def expr_Ramp(self, e: Ramp) -> str:
        d = e.dtype
        t = self.vector_type(d)
        lanes = ", ".join(str(k * e.stride) for k in range(e.lanes))
        return f"(({t}){{{lanes}}} + {self.expr(e.base)})"

    def expr_Broadcast(self, e: Broadcast) -> str:
        # An initializer list, not `{0} + x`: adding 0.0 is not an identity (-0.0),
        # so the compiler would keep the addition.
        t = self.vector_type(e.dtype)
        name = f"tw_bcast_{t[3:]}"
        scalar = self.scalar_type(e.dtype.scalar)
        self.helpers.setdefault(
            name, f"static inline {t} {name}({scalar} v) {{ return ({t}){{{', '.join(['v'] * e.lanes)}}}; }}")
        return f"{name}({self.expr(e.value)})"

    def expr_Load(self, e: Load) -> str:
        slot = self.promoted_slot(e.tensor, e.indices[0])
        if slot is not None:
            return slot
        if e.dtype.lanes == 1:
            return super().expr_Load(e)
        buf = self.names.of(e.tensor, e.tensor.name)
        index = e.indices[0]
        if isinstance(index, Ramp) and index.stride == 1:
            t = self.vector_type(e.dtype)
            return f"(*({t} *)(&{buf}[{self.expr(index.base)}]))"
        if isinstance(index, Ramp) and index.stride != 0:
            return self._strided_load(e, buf, index)
        raise BuildError(f"vector load of '{buf}' with a non-contiguous index {index}")

    def _scatter(self, d, index: Ramp) -> str:
        """The name of the helper that stores `index`'s lanes one by one (codegen/strided.py)."""
        name, definition = scatter_helper(index.stride, index.lanes, self.vector_type(d), self.scalar_type(d.scalar))
        self.helpers.setdefault(name, definition)
        return name

    def _strided_load(self, e: Load, buf: str, index: Ramp) -> str:
        """Contiguous loads over the span the lanes read, then shuffles (codegen/strided.py)."""
        t, m = self.vector_type(e.dtype), self.mask_type(e.dtype)
        name, definition = strided_load_helper(index.stride, index.lanes, t, m, self.scalar_type(e.dtype.scalar))
        self.helpers.setdefault("TW_SHUFFLE", SHUFFLE_MACRO)
        self.helpers.setdefault(name, definition)
        low = min(0, index.stride * (index.lanes - 1))  # a negative stride's span starts below the base
        base = self.expr(index.base) if low == 0 else f"{self.expr(index.base)} - {-low}"
        return f"{name}(&{buf}[{base}])"

    def stmt_IntrinCall(self, s: IntrinCall) -> None:
        render_intrinsic_call(self, s)

    def stmt_Fence(self, s: Fence) -> None:
        self.emit('__asm__ __volatile__("" ::: "memory");')

    def stmt_Store(self, s: Store) -> None:
        value = s.value
        slot = self.promoted_slot(s.buffer, s.indices[0])
        if slot is not None:
            self.emit(f"{slot} = {self.expr(value)};")
            return
        if value.dtype.lanes == 1:
            return super().stmt_Store(s)
        buf = self.names.of(s.buffer, s.buffer.name)
        index = s.indices[0]
        if isinstance(index, Ramp) and index.stride > 1:  # a scatter (lower/vectorize.py)
            self.emit(f"{self._scatter(value.dtype, index)}(&{buf}[{self.expr(index.base)}], {self.expr(value)});")
            return
        if not (isinstance(index, Ramp) and index.stride == 1):
            raise BuildError(f"vector store to '{buf}' with a non-contiguous index {index}")
        t = self.vector_type(value.dtype)
        self.emit(f"*({t} *)(&{buf}[{self.expr(index.base)}]) = {self.expr(value)};")

    def expr_Binary(self, e: Binary) -> str:
        if e.dtype.lanes > 1 and e.op in (BinOp.MIN, BinOp.MAX):
            return self._vector_minmax(e)
        if e.dtype.lanes > 1 and e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD, BinOp.AND, BinOp.OR) \
                and not (e.op in (BinOp.AND, BinOp.OR) and e.dtype.is_int):
            if e.dtype.is_bool and e.op in (BinOp.AND, BinOp.OR):
                sym = "&" if e.op is BinOp.AND else "|"
                return f"({self.expr(e.a)} {sym} {self.expr(e.b)})"
            raise BuildError(f"vector {e.op.value} is not supported")
        return super().expr_Binary(e)

    def _vector_minmax(self, e: Binary) -> str:
        name, definition = minmax_helper(e.op.value, e.dtype, self.vector_type(e.dtype), self.mask_type(e.dtype))
        self.helpers.setdefault(name, definition)
        return f"{name}({self.expr(e.a)}, {self.expr(e.b)})"

    def expr_Compare(self, e: Compare) -> str:
        return super().expr_Compare(e)

    def expr_Select(self, e: Select) -> str:
        if e.dtype.lanes == 1:
            return super().expr_Select(e)
        t = self.vector_type(e.dtype)
        m = self.mask_type(e.dtype)
        cond = self.expr(e.cond)
        if e.cond.dtype.lanes == 1:
            return f"({cond} ? {self.expr(e.t)} : {self.expr(e.f)})"
        return (f"(({t})((({m}){self.expr(e.t)} & ({m})({cond})) | "
                f"(({m}){self.expr(e.f)} & ~({m})({cond}))))")

    def expr_Cast(self, e: Cast) -> str:
        if e.dtype.lanes == 1 and e.dtype.name == "float32" and e.value.dtype.name == "float64":
            # GCC 12's SLP vectorizer (-O3 -march=x86-64-v3) drops a double -> float -> double round trip
            # (found by the fuzzer): the rounding goes through a volatile so it always happens
            self.helpers.setdefault("tw_round_f32", "static inline float tw_round_f32(double x) "
                                                    "{ volatile float f = (float)x; return f; }")
            return f"tw_round_f32({self.expr(e.value)})"
        if e.dtype.lanes == 1:
            return super().expr_Cast(e)
        value = e.value
        if isinstance(value, Call) and value.func is Intrinsic.ROUND and len(value.args) == 1:
            rounding = round_to_int_helper(value.dtype, e.dtype, self.vector_type(value.dtype),
                                           self.vector_type(e.dtype))
            if rounding is not None:
                self.helpers.setdefault(*rounding)
                return f"{rounding[0]}({self.expr(value.args[0])})"
        if "bfloat16" in (value.dtype.name, e.dtype.name):
            return render_bf16_cast(self, e)
        found = integer_cast_helper(value.dtype, e.dtype, self.vector_type)
        if found is not None:
            self.helpers.setdefault(*found)
            return f"{found[0]}({self.expr(value)})"
        return f"__builtin_convertvector({self.expr(e.value)}, {self.vector_type(e.dtype)})"

    def expr_Call(self, e: Call) -> str:
        if e.dtype.lanes == 1:
            return super().expr_Call(e)
        args = [self.expr(a) for a in e.args]
        if e.func is Intrinsic.SIGMOID and e.dtype.is_float:  # 1 / (1 + exp(-x)) on whole vectors
            one = "1.0f" if e.dtype.bits == 32 else "1.0"
            return f"({one} / ({one} + {self.vector_call(Intrinsic.EXP, e.dtype, [f'(-({args[0]}))'])}))"
        return self.vector_call(e.func, e.dtype, args)

    def vector_call(self, func: Intrinsic, dtype, args: list[str]) -> str:
        """A vector math call: libmvec's vector function where the build links it, else per lane."""
        t = self.vector_type(dtype)
        lane_call = self.scalar_call(func, [f"a{k}[l]" for k in range(len(args))], dtype.scalar)
        name, definition = vector_math_helper(func.value, dtype, t, len(args), lane_call)
        self.helpers.setdefault(name, definition)
        return f"{name}({', '.join(args)})"

    # ---- statements -------------------------------------------------------
    def stmt_Seq(self, s) -> None:
        """Statements in order; a run of k scatters at stride k to offsets 0 .. k-1 of one buffer (a
        relayout into k-blocked channels) is one interleave and one contiguous store instead of
        k x lanes element stores; a run of scalar stores filling every lane of a register slot in order (an
        unrolled accumulator initialisation) is one vector assignment instead of one lane insert each."""
        stmts, n = s.stmts, 0
        while n < len(stmts):
            k = interleaved_run(stmts, n, self.promoted)
            wide = 0 if k else interleaved_run(stmts, n, self.promoted, wide=True)
            lanes = self.slot_fill_lanes(stmts, n)
            if k:
                self.interleave(stmts[n:n + k])
                n += k
            elif wide:
                self.interleave_blocked(stmts[n:n + wide])
                n += wide
            elif lanes:
                slot = self.promoted[id(stmts[n].buffer)][stmts[n].indices[0].value]
                t = self.type_name(stmts[n].value.dtype.with_lanes(lanes))
                self.emit(f"{slot} = ({t}){{{', '.join(self.expr(st.value) for st in stmts[n:n + lanes])}}};")
                n += lanes
            else:
                self.stmt(stmts[n])
                n += 1

    def stmt_For(self, s: For) -> None:
        inside = s.kind is ForKind.PARALLEL  # buffers allocated inside belong to one thread's iteration
        self.parallel_depth += inside
        self._for(s)
        self.parallel_depth -= inside

    def _for(self, s: For) -> None:
        nest = transpose_nest(s, self.vector_bytes) if self.vector_bytes else None
        if nest is None or id(nest.store.buffer) in self.promoted or id(nest.store.value.tensor) in self.promoted:
            return super().stmt_For(s)
        self._transpose(nest)

    def _transpose(self, nest: TransposeNest) -> None:
        """The copy in blocks (codegen/transpose.py): loop `a` and the run of the others, each
        stepping by the block edge, addressed from the copy's indices at the first iteration."""
        d, lanes = nest.store.value.dtype, nest.lanes
        t, m = self.vector_type(d.with_lanes(lanes)), self.mask_type(d.with_lanes(lanes))
        name, definition = transpose_helper(lanes, t, m, self.scalar_type(d))
        self.helpers.setdefault("TW_SHUFFLE", SHUFFLE_MACRO)
        self.helpers.setdefault(name, definition)
        a, b = nest.loops[0], nest.loops[1]
        va, vb = self.names.of(a.var, a.var.name), self.names.of(b.var, b.var.name)
        if a.kind is ForKind.PARALLEL:
            self.emit(self.loop_pragma(a))
        for v, var, extent in ((va, a.var, a.extent.value), (vb, b.var, nest.b_extent)):
            self.emit(f"for ({self.type_name(var.dtype)} {v} = 0; {v} < {extent}; {v} += {lanes}) {{")
            self.depth += 1
        store, load = nest.store, nest.store.value

        def address(buf, index, steps) -> str:  # the element at the block's first iteration
            return (f"&{self.names.of(buf, buf.name)}[{self.expr(nest.base(index))}"
                    f" + {steps[0]} * (int64_t){va} + {steps[1]} * (int64_t){vb}]")

        dst = address(store.buffer, store.indices[0], nest.dst_steps)
        src = address(load.tensor, load.indices[0], nest.src_steps)
        self.emit(f"{name}({dst}, {nest.dst_stride}, {src}, {nest.src_stride});")
        for _ in range(2):
            self.depth -= 1
            self.emit("}")

    def loop_pragma(self, s: For) -> str | None:
        if s.kind is ForKind.PARALLEL:
            return "#pragma omp parallel for schedule(static)"
        if s.kind is ForKind.VECTORIZED:
            return "#pragma omp simd"
        if s.kind is ForKind.UNROLLED:
            return "#pragma GCC unroll 64"
        if s.kind is ForKind.ROLLED:
            return "#pragma GCC unroll 1"
        return None

    def stmt_Allocate(self, s: Allocate) -> None:
        b = s.buffer
        name = self.names.of(b, b.name)
        if s.register_lanes:
            return self.allocate_registers(s, name, s.register_lanes)
        t = self.scalar_type(b.dtype)
        nbytes = b.size * b.dtype.bytes
        self.emit("{")
        self.depth += 1
        heap = nbytes > STACK_LIMIT  # whatever the scope: a big "local" buffer would overflow the stack
        kept = False
        if heap:  # failure sets a flag instead of returning: a return may not leave an OpenMP loop
            size = -(-nbytes // 64) * 64
            kept = nbytes >= LARGE_BYTES and not self.parallel_depth  # once per call: kept (codegen/heap.py)
            if nbytes >= LARGE_BYTES:
                self.helpers.setdefault("tw_huge", HUGE_PAGES)
            if kept:
                self.emit(f"{t} *restrict {name} = ({t} *)tw_workspace({self.workspace_slots}, {size});")
                self.workspace_slots += 1
            elif nbytes >= LARGE_BYTES:
                self.helpers.setdefault("tw_alloc_large", ALLOC_LARGE)
                self.emit(f"{t} *restrict {name} = ({t} *)tw_alloc_large({size});")
            else:
                self.emit(f"{t} *restrict {name} = ({t} *)aligned_alloc(64, {size});")
            self.emit(f"if (!{name}) {{ tw_alloc_failed = 1; }} else {{")
            self.depth += 1
        else:
            self.emit(f"{t} {name}[{b.size}] __attribute__((aligned(64)));")
        self.stmt(s.body)
        if heap:
            if not kept:
                self.emit(f"free({name});")
            self.depth -= 1
            self.emit("}")
        self.depth -= 1
        self.emit("}")

    # ---- the translation unit ---------------------------------------------
    def define(self, func) -> tuple[str, list[str], str]:
        """The C function of a lowered function: (its name, its parameters, its definition)."""
        kernel = self.names.fresh(func.name)
        params = [f"{self.scalar_type(b.dtype)} *restrict {self.names.of(b, b.name)}" for b in func.args]
        self.depth, self.lines = 1, []
        self.stmt(func.body)
        body = "\n".join(self.lines)
        head = "".join(_HINT_ATTRIBUTES[h] for h in func.compiler_hints)
        if self.gcc_targets:  # intrinsics (intrin/) the -march flags may not enable
            head += f'__attribute__((target("{",".join(sorted(self.gcc_targets))}")))\n'

        return kernel, params, (f"{head}int32_t {kernel}({', '.join(params)}) {{\n  tw_alloc_failed = 0;\n{body}\n"
                                f"  return tw_alloc_failed ? -1 : 0;\n}}")

    def casts(self, args, first: int = 0) -> list[str]:
        return [f"({self.scalar_type(b.dtype)} *)tw_args[{first + n}]" for n, b in enumerate(args)]

    def render(self, func) -> CSource:
        kernel, params, definition = self.define(func)
        call = f"{kernel}({', '.join(self.casts(func.args))})"
        return self._unit([definition], call, call, kernel, params)

    def render_with_packs(self, hoisted) -> CSource:
        """A kernel whose constant packs were moved out (lower/hoist_packs.py), as the tuner measures
        it: `tw_call`/`tw_time` take the original arguments; the packs are made on the first call
        into buffers the library keeps (the measured arrays do not change), and timing runs only
        the kernel, as a model runs it after packing its weights once."""
        kernel_fn, pack_fn = hoisted.kernel, hoisted.pack
        pack, _, pack_def = self.define(pack_fn)
        kernel, params, kernel_def = self.define(kernel_fn)
        n = len(kernel_fn.args) - len(hoisted.packs)
        keep = []
        for i, p in enumerate(hoisted.packs):
            t = self.scalar_type(p.buffer.dtype)
            keep.append(f"static {t} *tw_pack{i};")
        allocs = "".join(f"  if (!tw_pack{i}) tw_pack{i} = ({self.scalar_type(p.buffer.dtype)} *)aligned_alloc(64, "
                         f"{-(-p.buffer.size * p.buffer.dtype.bytes // 64) * 64});\n  if (!tw_pack{i}) return -1;\n"
                         for i, p in enumerate(hoisted.packs))
        orig = self.casts(kernel_fn.args[:n])
        packs = [f"tw_pack{i}" for i in range(len(hoisted.packs))]
        every = orig + packs
        ensure = (f"static int32_t tw_packed;\nstatic int32_t tw_make_packs(void **tw_args) {{\n"
                  f"  if (tw_packed) return 0;\n{allocs}"
                  f"  if ({pack}({', '.join(every[i] for i in hoisted.pack_args)}) != 0) return -1;\n"
                  f"  tw_packed = 1;\n  return 0;\n}}")
        call = f"{kernel}({', '.join(every)})"
        return self._unit(keep + [pack_def, kernel_def, ensure], f"(tw_make_packs(tw_args) ? -1 : {call})", call,
                          kernel, params, before_timing="  if (tw_make_packs(tw_args)) return -1.0;\n")

    def _unit(self, definitions: list[str], call: str, timed: str, kernel: str, params: list[str],
              before_timing: str = "") -> CSource:
        parts = [_PRELUDE, _BF16]
        parts += list(self.vector_types.values())
        parts += list(self.helpers.values())
        parts.append("static volatile int32_t tw_alloc_failed;")
        parts.append(workspaces(self.workspace_slots))
        parts += definitions
        parts += entry_points(call, timed, before_timing)
        signature = f"int32_t {kernel}({', '.join(params)});"
        return CSource("\n\n".join(parts) + "\n", kernel, signature)


def entry_points(call: str, timed: str, before_timing: str = "") -> list[str]:
    """The functions every CPU kernel library exports: `tw_call(args)` (returns `call`), `tw_time(args, n)`
    (`timed` n times back to back, seconds per call) and `tw_set_num_threads(n)`."""
    return [
        f"int32_t tw_call(void **tw_args) {{ return {call}; }}",
        "double tw_time(void **tw_args, int32_t tw_number) {\n"
        f"{before_timing}"
        "  struct timespec tw_t0, tw_t1;\n"
        "  clock_gettime(CLOCK_MONOTONIC, &tw_t0);\n"
        f"  for (int32_t tw_n = 0; tw_n < tw_number; ++tw_n) {timed};\n"
        "  clock_gettime(CLOCK_MONOTONIC, &tw_t1);\n"
        "  return ((double)(tw_t1.tv_sec - tw_t0.tv_sec) + 1e-9 * (double)(tw_t1.tv_nsec - tw_t0.tv_nsec))"
        " / tw_number;\n"
        "}",
        "int32_t tw_set_num_threads(int32_t tw_n) {\n#ifdef _OPENMP\n  omp_set_num_threads(tw_n);\n  return tw_n;\n"
        "#else\n  (void)tw_n;\n  return 1;\n#endif\n}",
    ]


# Schedule.compiler_hint -> what precedes the kernel's definition; GCC only (clang has no optimize attribute)
_HINT_ATTRIBUTES = {
    "pressure_scheduling": '#if defined(__GNUC__) && !defined(__clang__)\n'
                           '__attribute__((optimize("schedule-insns", "sched-pressure")))\n#endif\n',
}


def _int_kind():
    from ..ir.dtype import Kind

    return Kind.INT


def generate_c(func, vector_bytes: int = 0) -> CSource:
    """C source for a lowered function; `vector_bytes`: the target's vector width (0: no blocked transposes)."""
    return CCodeGen(vector_bytes).render(func)


__all__ = ["CCodeGen", "CSource", "STACK_LIMIT", "generate_c"]
