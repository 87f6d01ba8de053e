"""Tensor expressions: placeholder, compute, reduce_axis, reducers and elementwise
intrinsics, plus the program view (stages in dependency order) and its text form.
Imports `ir` and `errors` only."""

from .formula import program_str
from .intrinsics import (
    abs,
    all,
    any,
    cast,
    ceil,
    const,
    cos,
    erf,
    exp,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    logical_and,
    logical_not,
    logical_or,
    pow,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sqrt,
    tanh,
    truncdiv,
    truncmod,
)
from .operation import compute, placeholder, reduce_axis
from .program import Program, collect_program
from .reducers import Reducer, comm_reducer, max, min, sum
from .tensor import ComputeOp, PlaceholderOp, Tensor

__all__ = [
    "abs", "all", "any", "cast", "ceil", "const", "cos", "erf", "exp", "floor", "floordiv", "floormod",
    "if_then_else", "log", "logical_and", "logical_not", "logical_or", "pow", "round", "rsqrt", "select",
    "sigmoid", "sin", "sqrt", "tanh", "truncdiv", "truncmod", "compute", "placeholder", "reduce_axis",
    "Program", "collect_program", "Reducer", "comm_reducer", "max", "min", "sum", "ComputeOp",
    "PlaceholderOp", "Tensor", "program_str",
]
