"""`evaluate(outputs, inputs)`: the NumPy reference value of any te program."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import EvaluationError
from ..te.program import collect_program
from ..te.tensor import Tensor
from .stage_eval import DEFAULT_BUDGET, evaluate_stage
from .values import check_input


def _input_arrays(program, inputs: Mapping) -> dict[int, np.ndarray]:
    if not isinstance(inputs, Mapping):
        raise EvaluationError(f"inputs must map placeholders (or their names) to arrays, got {type(inputs).__name__}")
    placeholders = {t.name: t for t in program.inputs}
    given: dict[str, object] = {}
    for key, value in inputs.items():
        name = key.name if isinstance(key, Tensor) else key
        if not isinstance(name, str):
            raise EvaluationError(f"input key {key!r} is neither a tensor nor a tensor name")
        if isinstance(key, Tensor) and not any(key is t for t in program.tensors):
            continue  # a placeholder this program does not read: harmless
        if name not in placeholders:
            if isinstance(key, Tensor) or any(t.name == name for t in program.stages):
                raise EvaluationError(f"'{name}' is computed by the program, not an input; remove it from inputs")
            raise EvaluationError(
                f"inputs has '{name}', which is not a placeholder of this program; "
                f"placeholders are: {', '.join(placeholders) or '(none)'}"
            )
        given[name] = value
    missing = [n for n in placeholders if n not in given]
    if missing:
        raise EvaluationError(f"missing input(s) {missing}; every placeholder needs an array")
    return {
        id(t): check_input(t.name, t.shape, t.dtype, given[t.name]) for t in program.inputs
    }


def evaluate(outputs, inputs: Mapping, budget: int = DEFAULT_BUDGET):
    """Evaluate the program producing `outputs` on `inputs` (placeholder or name
    -> array; placeholder objects the program does not read are ignored, unknown
    names are an error). Returns one array for one output tensor, else a list. bfloat16
    values come back as float32 arrays holding bfloat16-representable values."""
    program = collect_program(outputs)
    values = _input_arrays(program, inputs)
    for t in program.stages:
        try:
            values[id(t)] = evaluate_stage(t.op, values, budget)
        except MemoryError:
            n = int(np.prod(t.shape, dtype=np.float64))
            raise EvaluationError(
                f"'{t.name}' {list(t.shape)} ({n * t.dtype.bytes / 2**30:.2f} GiB) does not fit in memory; the "
                f"reference holds every stage of the program whole: evaluate a smaller shape") from None
    results = [values[id(t)] for t in program.outputs]
    return results[0] if isinstance(outputs, Tensor) else results
