"""The C-family renderer: expressions and statements of loop IR as C text.

Dialects (C for CPUs now; CUDA, OpenCL, HLS C later) subclass it and override
the few things that differ: scalar type names, the function prologue, loop
pragmas, math function names and vector support."""

from __future__ import annotations

import math

import numpy as np

from ..errors import BuildError
from ..ir.dtype import DType, Kind, as_dtype
from ..ir.expr import (
    Binary,
    BinOp,
    Broadcast,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Intrinsic,
    Load,
    Ramp,
    Select,
    Unary,
    UnOp,
    Var,
)
from ..ir.stmt import Allocate, For, IfThenElse, LetStmt, Seq, Stmt, Store
from ..ir.traverse import loaded_tensors
from .capabilities import C_CAPS, Capabilities
from .names import NameTable

_INFIX = {
    BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*", BinOp.DIV: "/", BinOp.TRUNCDIV: "/", BinOp.TRUNCMOD: "%",
    BinOp.XOR: "^",
}


class CRenderer:
    """Renders one LoweredFunc. `self.lines` collects the function body."""

    indent_unit = "  "
    caps: Capabilities = C_CAPS  # what the dialect has and how it spells it

    def __init__(self):
        self.names = NameTable()
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}  # name -> definition, emitted before the kernel
        self.depth = 1
        self.promoted: dict[int, dict[int, str]] = {}  # id(buffer) -> offset -> variable
        self.promoted_lanes: dict[int, int] = {}  # id(buffer) -> lanes of its slots

    # ---- types ------------------------------------------------------------
    def scalar_type(self, d: DType) -> str:
        return self.caps.scalar_types[d.name]

    def type_name(self, d: DType) -> str:
        if d.lanes == 1:
            return self.scalar_type(d)
        return self.vector_type(d)

    def vector_type(self, d: DType) -> str:
        raise BuildError(f"this code generator has no vector type for {d}")

    # ---- expressions ------------------------------------------------------
    def const(self, c: Const) -> str:
        d, v = c.dtype, c.value
        if d.is_bool:
            return "true" if v else "false"
        if d.is_int:
            if d.bits == 64:
                return (self.caps.uint64_literal if d.kind is Kind.UINT else self.caps.int64_literal).format(v=v)
            if v == d.int_range[0] and d.name == "int32":
                return self.caps.int32_min
            if d.name == "uint32":
                return f"{v}u"  # above INT32_MAX an unsuffixed literal would be a signed 64-bit one
            return str(v) if v >= 0 else f"({v})"
        if math.isnan(v):
            text = self.caps.nan
        elif math.isinf(v):
            text = self.caps.inf if v > 0 else f"(-{self.caps.inf})"
        elif d.name == "float64":
            text = repr(float(v))
        else:
            text = repr(float(np.float32(v))) + "f"
        if d.name == "float16":
            return f"(({self.scalar_type(d)}){text})"
        if d.name == "bfloat16":
            return f"tw_f32_to_bf16({text})"
        return text

    def expr(self, e: Expr) -> str:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise BuildError(f"cannot render expression node {type(e).__name__}: {e}")
        return method(e)

    def expr_Const(self, e: Const) -> str:
        return self.const(e)

    def expr_Var(self, e: Var) -> str:
        return self.names.of(e, e.name)

    expr_IterVar = expr_Var

    def expr_Load(self, e: Load) -> str:
        slot = self.promoted_slot(e.tensor, e.indices[0])
        if slot is not None:
            return slot
        return self.load_element(e.tensor, self.names.of(e.tensor, e.tensor.name), self.expr(e.indices[0]))

    def load_element(self, b, buf: str, index: str) -> str:
        """One element of buffer `b` (named `buf` here) at `index`."""
        return f"{buf}[{index}]"

    def store_element(self, b, buf: str, index: str, value: str) -> str:
        """The statement writing `value` into buffer `b` (named `buf` here) at `index`."""
        return f"{buf}[{index}] = {value};"

    def expr_Binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        d = e.dtype
        if d.name in ("bfloat16",):
            return self.bf16_binary(e, a, b)
        if e.op is BinOp.TRUNCMOD and d.is_float:  # C's fmod: the dividend's sign, exact
            return f"fmod{self.caps.math_suffix_f32 if d.name == 'float32' else ''}({a}, {b})"
        if e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD, BinOp.TRUNCDIV, BinOp.TRUNCMOD) and d.is_int:
            if e.op in (BinOp.TRUNCDIV, BinOp.TRUNCMOD) and isinstance(e.b, Const) and e.b.value not in (0, -1):
                return f"({a} {_INFIX[e.op]} {b})"  # a constant divisor cannot trap: C's own operator
            return f"{self.helper_floordiv(e.op, d)}({a}, {b})"  # defined at b == 0 and MIN / -1: no trap
        if e.op in (BinOp.SHL, BinOp.SHR) and d.is_int:
            if isinstance(e.b, Const) and 0 <= e.b.value < d.bits and d.lanes == 1:  # a fixed-point rescale
                if e.op is BinOp.SHR:
                    return f"({a} >> {b})"
                return f"(({self.type_name(d)})(({self.scalar_type(_UINT[max(32, d.bits)])}){a} << {b}))"
            return f"{self.helper_shift(e.op, d)}({a}, {b})"
        if e.op in _INFIX:
            if d.is_int and d.bits < 32 and e.op in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
                # C computes narrow integers in int: wrap at every operation, as the reference does
                if e.op is BinOp.MUL and d.kind is Kind.UINT and d.lanes == 1:
                    a = f"({self.scalar_type(_UINT[32])}){a}"  # 65535 * 65535 overflows int
                return f"(({self.type_name(d)})({a} {_INFIX[e.op]} {b}))"
            return f"({a} {_INFIX[e.op]} {b})"
        if e.op in (BinOp.AND, BinOp.OR):
            sym = ("&&" if e.op is BinOp.AND else "||") if d.is_bool else ("&" if e.op is BinOp.AND else "|")
            return f"({a} {sym} {b})"
        if e.op in (BinOp.MIN, BinOp.MAX):
            return f"{self.helper_minmax(e.op, d)}({a}, {b})"
        if e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD):
            if d.is_float:
                f = self.math_name(Intrinsic.FLOOR, d)
                q = f"{f}({a} / {b})"
                return q if e.op is BinOp.FLOORDIV else f"({a} - {f}({a} / {b}) * {b})"
            return f"{self.helper_floordiv(e.op, d)}({a}, {b})"
        raise BuildError(f"cannot render operator {e.op}")

    def expr_Unary(self, e: Unary) -> str:
        a = self.expr(e.a)
        if e.op is UnOp.NEG:
            if e.dtype.name == "bfloat16":
                return f"tw_f32_to_bf16(-tw_bf16_to_f32({a}))"
            if e.dtype.is_int and e.dtype.bits < 32:
                return f"(({self.type_name(e.dtype)})(-{a}))"
            return f"(-{a})"
        if e.dtype.is_bool:
            return f"(!{a})"
        if e.dtype.is_int and e.dtype.bits < 32 and e.dtype.lanes == 1:  # ~ of a promoted uint8 is a negative int
            return f"(({self.type_name(e.dtype)})(~{a}))"
        return f"(~{a})"

    def expr_Compare(self, e: Compare) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.a.dtype.name == "bfloat16":
            a, b = f"tw_bf16_to_f32({a})", f"tw_bf16_to_f32({b})"
        return f"({a} {e.op.value} {b})"

    def expr_Cast(self, e: Cast) -> str:
        src, dst = e.value.dtype, e.dtype
        v = self.expr(e.value)
        if src.name == "bfloat16":
            v = f"tw_bf16_to_f32({v})"
        if dst.name == "bfloat16":
            return f"tw_f32_to_bf16((float)({v}))"
        if dst.is_bool:
            return f"({v} != 0)"
        return f"(({self.type_name(dst)})({v}))"

    def expr_Select(self, e: Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"

    def expr_Call(self, e: Call) -> str:
        d = e.dtype
        args = [self.expr(a) for a in e.args]
        if d.name in ("bfloat16", "float16"):  # compute in float, round back
            conv = (lambda s: f"tw_bf16_to_f32({s})") if d.name == "bfloat16" else (lambda s: f"(float)({s})")
            inner = self.scalar_call(e.func, [conv(a) for a in args], DType("float32", d.kind, 32))
            return f"tw_f32_to_bf16({inner})" if d.name == "bfloat16" else f"(({self.scalar_type(d)})({inner}))"
        return self.scalar_call(e.func, args, d)

    def scalar_call(self, func: Intrinsic, args: list[str], d: DType) -> str:
        if func is Intrinsic.ABS and d.is_int:
            if d.kind is Kind.UINT:
                return args[0]
            return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
        one = "1.0f" if d.name == "float32" else "1.0"
        if func is Intrinsic.SIGMOID:
            return f"({one} / ({one} + {self.math_name(Intrinsic.EXP, d)}(-({args[0]}))))"
        if func is Intrinsic.RSQRT:
            return f"({one} / {self.math_name(Intrinsic.SQRT, d)}({args[0]}))"
        return f"{self.math_name(func, d)}({', '.join(args)})"

    def math_name(self, func: Intrinsic, d: DType) -> str:
        base = self.caps.math_renames.get(func, func.value)
        return base + (self.caps.math_suffix_f32 if d.name == "float32" else "")

    def expr_Ramp(self, e: Ramp) -> str:
        raise BuildError("a ramp outside a vectorized loop cannot be rendered by this dialect")

    def expr_Broadcast(self, e: Broadcast) -> str:
        raise BuildError("a broadcast outside a vectorized loop cannot be rendered by this dialect")

    # ---- helpers emitted on demand ---------------------------------------
    def helper_minmax(self, op: BinOp, d: DType) -> str:
        name = f"tw_{op.value}_{d.name}"
        t = self.type_name(d)
        cmp = "<" if op is BinOp.MIN else ">"
        # NaN wins, as in NumPy's maximum. The NaN test comes last and alone: `(a > b || a != a)` compiles
        # to a branch on the comparison, mispredicted half the time on data of either sign (a ReLU epilogue
        # of scalar stores ran 2.7x slower on normal inputs than on positive ones); this form is a select
        # plus a branch that is never taken on ordinary data.
        body = f"{t} m = a {cmp} b ? a : b; return a != a ? a : m;" if d.is_float else f"return a {cmp} b ? a : b;"
        self.helpers.setdefault(name, f"{self.caps.helper_prefix} {t} {name}({t} a, {t} b) {{ {body} }}")
        return name

    def helper_floordiv(self, op: BinOp, d: DType) -> str:
        """Integer division/modulo that never traps: x / 0 == 0 and x % 0 == x (so a == (a/b)*b + a%b
        still holds), MIN / -1 wraps to MIN; the reference evaluator computes the same."""
        t = self.type_name(d)
        name = f"tw_{op.name.lower()}_{d.name}"
        low = d.int_range[0]
        neg = f"(a == {self.const(Const(low + 1, d))} - 1 ? a : -a)" if low < 0 else "a"
        zero = "return 0;" if op in (BinOp.FLOORDIV, BinOp.TRUNCDIV) else "return a;"
        minus1 = f"return {neg};" if op in (BinOp.FLOORDIV, BinOp.TRUNCDIV) else "return 0;"
        body = {
            BinOp.FLOORDIV: f"{t} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;",
            BinOp.FLOORMOD: f"{t} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;",
            BinOp.TRUNCDIV: "return a / b;",
            BinOp.TRUNCMOD: "return a % b;",
        }[op if low < 0 else (BinOp.TRUNCMOD if op in (BinOp.FLOORMOD, BinOp.TRUNCMOD) else BinOp.TRUNCDIV)]
        if low < 0:
            body = f"if (b == -1) {minus1} {body}"
        body = f"if (b == 0) {zero} {body}"
        self.helpers.setdefault(name, f"{self.caps.helper_prefix} {t} {name}({t} a, {t} b) {{ {body} }}")
        return name

    def helper_shift(self, op: BinOp, d: DType) -> str:
        """Shifts as NumPy and ONNX define them: a count outside [0, bits) (undefined in C) shifts every bit
        out, leaving 0, or -1 for a right shift of a negative value; left shifts wrap, in unsigned arithmetic
        (a signed left shift that overflows is undefined in C)."""
        t = self.type_name(d)
        u = self.scalar_type(_UINT[d.bits])
        wide = self.scalar_type(_UINT[max(32, d.bits)])  # narrow values promote to (signed) int otherwise
        name = f"tw_{op.name.lower()}_{d.name}"
        valid = f"({u})b < {d.bits}"
        if op is BinOp.SHL:
            body = f"return {valid} ? ({t})(({wide})({u})a << ({u})b) : 0;"
        else:
            fill = "(a < 0 ? -1 : 0)" if d.kind is Kind.INT else "0"
            body = f"return {valid} ? ({t})(a >> ({u})b) : {fill};"
        self.helpers.setdefault(name, f"{self.caps.helper_prefix} {t} {name}({t} a, {t} b) {{ {body} }}")
        return name

    def bf16_binary(self, e: Binary, a: str, b: str) -> str:
        fa, fb = f"tw_bf16_to_f32({a})", f"tw_bf16_to_f32({b})"
        f32 = DType("float32", e.dtype.kind, 32)
        inner = self.expr_Binary(Binary(e.op, _Raw(fa, f32), _Raw(fb, f32), f32))
        return f"tw_f32_to_bf16({inner})"

    def expr__Raw(self, e: _Raw) -> str:
        return e.text

    # ---- statements -------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append(self.indent_unit * self.depth + line)

    def stmt(self, s: Stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise BuildError(f"cannot render statement {type(s).__name__}")
        method(s)

    def stmt_Seq(self, s: Seq) -> None:
        for c in s.stmts:
            self.stmt(c)

    def loop_pragma(self, s: For) -> str | None:
        return None

    def stmt_For(self, s: For) -> None:
        v = self.names.of(s.var, s.var.name)
        t = self.type_name(s.var.dtype)
        pragma = self.loop_pragma(s)
        if pragma:
            self.emit(pragma)
        begin, extent = self.expr(s.begin), self.expr(s.extent)
        starts_at_zero = isinstance(s.begin, Const) and s.begin.value == 0
        end = extent if starts_at_zero else f"{begin} + {extent}"
        self.emit(f"for ({t} {v} = {begin}; {v} < {end}; ++{v}) {{")
        self.depth += 1
        self.stmt(s.body)
        self.depth -= 1
        self.emit("}")

    def stmt_IfThenElse(self, s: IfThenElse) -> None:
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.depth += 1
        self.stmt(s.then)
        self.depth -= 1
        if s.orelse is not None:
            self.emit("} else {")
            self.depth += 1
            self.stmt(s.orelse)
            self.depth -= 1
        self.emit("}")

    def stmt_Store(self, s: Store) -> None:
        slot = self.promoted_slot(s.buffer, s.indices[0])
        if slot is not None:
            self.emit(f"{slot} = {self.expr(s.value)};")
            return
        buf = self.names.of(s.buffer, s.buffer.name)
        self.emit(self.store_element(s.buffer, buf, self.expr(s.indices[0]), self.expr(s.value)))

    def stmt_LetStmt(self, s: LetStmt) -> None:
        v = self.names.of(s.var, s.var.name)
        if s.pin:  # lower/operand_pins.py: an empty asm that "modifies" it keeps the value in a register
            self.emit(f"{self.type_name(s.var.dtype)} {v} = {self.expr(s.value)};")
            self.emit(f'__asm__("" : "+{s.pin}"({v}));')
        else:
            self.emit(f"const {self.type_name(s.var.dtype)} {v} = {self.expr(s.value)};")
        self.stmt(s.body)

    # ---- register slots (lower/registers.py marks the buffers) --------------
    def allocate_registers(self, s: Allocate, name: str, lanes: int) -> None:
        """A local buffer read and written only at constant offsets becomes one
        variable per (vector) slot, so the compiler keeps it in registers."""
        b = s.buffer
        t = self.type_name(b.dtype.with_lanes(lanes))
        slots = {}
        for offset in range(0, b.size, lanes):
            slots[offset] = self.names.fresh(f"{name}_{offset}")
        self.promoted[id(b)] = slots
        self.promoted_lanes[id(b)] = lanes
        self.emit("{")
        self.depth += 1
        self.emit(f"{t} {', '.join(slots.values())};")
        self.stmt(s.body)
        del self.promoted[id(b)]  # partitioning/unrolling may allocate the same buffer again elsewhere
        self.depth -= 1
        self.emit("}")

    def promoted_slot(self, buf, index: Expr) -> str | None:
        slots = self.promoted.get(id(buf))
        if slots is None:
            return None
        if isinstance(index, Ramp):
            if index.stride != 1:  # registers.py promotes only contiguous vector accesses
                raise BuildError(f"register slots of '{buf.name}' read at stride {index.stride}")
            return slots[int(index.base.value)]
        offset, lanes = int(index.value), self.promoted_lanes[id(buf)]
        if lanes == 1:
            return slots[offset]
        return f"{slots[offset - offset % lanes]}[{offset % lanes}]"  # one lane of a vector slot

    def slot_fill_lanes(self, stmts, n: int) -> int:
        """The slot's lanes if `stmts[n:]` starts with scalar stores to lanes 0 .. lanes-1 of one vector
        register slot, in order, none reading the slot's buffer; else 0."""
        first = stmts[n]
        if not (isinstance(first, Store) and id(first.buffer) in self.promoted and isinstance(first.indices[0], Const)
                and first.value.dtype.lanes == 1):
            return 0
        lanes, base = self.promoted_lanes[id(first.buffer)], first.indices[0].value
        if lanes == 1 or base % lanes or n + lanes > len(stmts):
            return 0
        for j, st in enumerate(stmts[n:n + lanes]):
            if not (isinstance(st, Store) and st.buffer is first.buffer and isinstance(st.indices[0], Const)
                    and st.indices[0].value == base + j and st.value.dtype.lanes == 1) \
                    or any(t is first.buffer for t in loaded_tensors(st.value)):
                return 0
        return lanes

    def stmt_Allocate(self, s: Allocate) -> None:
        raise BuildError("this dialect does not allocate buffers")


_UINT = {bits: as_dtype(f"uint{bits}") for bits in (8, 16, 32, 64)}


class _Raw(Expr):
    """Pre-rendered text standing in for an expression (used for bfloat16)."""

    def __init__(self, text: str, dtype: DType):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "dtype", dtype)

    __slots__ = ("text", "dtype")


__all__ = ["CRenderer"]
