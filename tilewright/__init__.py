"""tilewright: a tensor compiler and automatic schedule explorer.

Describe a computation with tensor expressions (`placeholder`, `compute`,
`reduce_axis`, `sum`, ...), or take one from `tilewright.ops`; evaluate it
with the NumPy reference (`evaluate`). Hardware intrinsics: `decl_tensor_intrin`,
`intrin.get`, `intrin.registered`, and `s[C].tensorize(axis, intrin)`. Whole models: `compile` (a torch.nn.Module
or a graph, tuned and fused) and `frontend` (`from_torch`, `from_onnx`). Tuning: `tune`, `tuning_task`
(a `TuningTask`: one program's tuning kept open across calls), `TuneOptions`, and `RayExecutor`
(builders and runners on a Ray cluster, the optional extra `tilewright[ray]`)."""

__version__ = "0.1.0"

from . import intrin, ops
from .api import build, lower, tune, tuning_task
from .errors import (
    BuildError,
    DTypeError,
    EvaluationError,
    ExprError,
    LoweringError,
    MeasureError,
    NameConflictError,
    ScheduleError,
    ShapeError,
    TilewrightError,
    TilewrightWarning,
)
from .graph import frontend
from .graph.compile import compile
from .graph.dynamic import Dim
from .graph.load import load
from .intrin import decl_tensor_intrin
from .ir.dtype import DType, as_dtype
from .records import records
from .reference import evaluate
from .schedule import Schedule, ThreadAxis, create_schedule, thread_axis
from .search.options import TuneOptions
from .search.ray_executor import RayExecutor
from .search.task import TuningTask
from .search.tuner import TuneResult
from .targets import Target, as_target
from .te import (
    Tensor,
    abs,
    all,
    any,
    cast,
    ceil,
    comm_reducer,
    compute,
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
    max,
    min,
    placeholder,
    pow,
    reduce_axis,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
    truncdiv,
    truncmod,
)

__all__ = [
    "ops", "intrin", "decl_tensor_intrin", "evaluate", "compile", "Dim", "load", "frontend", "DType", "as_dtype",
    "Tensor",
    "build", "lower", "Schedule", "create_schedule", "Target",
    "as_target", "records", "tune", "tuning_task", "TuneResult", "TuneOptions", "TuningTask", "RayExecutor",
    "ThreadAxis", "thread_axis",
    "BuildError", "DTypeError", "EvaluationError", "ExprError", "LoweringError", "MeasureError",
    "NameConflictError", "ScheduleError", "ShapeError", "TilewrightError", "TilewrightWarning",
    "abs", "all", "any", "cast", "ceil", "comm_reducer", "compute", "const", "cos", "erf", "exp", "floor",
    "floordiv", "floormod", "if_then_else", "log", "logical_and", "logical_not", "logical_or", "max", "min",
    "placeholder", "pow", "reduce_axis", "round", "rsqrt", "select", "sigmoid", "sin", "sqrt", "sum", "tanh",
    "truncdiv", "truncmod",
]
