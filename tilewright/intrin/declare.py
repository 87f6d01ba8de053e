"""`decl_tensor_intrin`: an intrinsic's semantics as a te computation, the
operand layouts it needs, and one emitter per way of spelling it.

Operands are the computation's inputs (in `inputs` order) then its output;
each has the shape of its placeholder, and `layouts[n][d]` is the flat stride
(in elements) axis d of operand n must have in memory (None: any). An emitter
turns the operands' addresses into C statements; `features` are the target
features it needs (`Target.features` names), `gcc_target` the function
attribute that lets GCC emit it, `opcodes` the mnemonics its object code shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TilewrightError
from ..ir.expr import Reduce
from ..lower.flatten import dense_strides
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor


@dataclass(frozen=True)
class Emitter:
    dialect: str  # "c": the CPU C renderer (immintrin.h)
    features: tuple[str, ...]
    render: Callable[[tuple[str, ...]], str]  # typed operand addresses (inputs, output) -> C statements
    gcc_target: str = ""
    opcodes: tuple[str, ...] = ()
    headers: tuple[str, ...] = ("immintrin.h",)
    note: str = ""  # what this spelling is and where it is exact
    # operands widened inside the call (two registers each, extra instructions): the default register-tile
    # model of the space counts them (space/cpu_tensorize.py)
    widens: bool = False


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    name: str
    output: Tensor
    inputs: tuple[Tensor, ...]
    layouts: tuple[tuple[int | None, ...], ...]
    emitters: tuple[Emitter, ...]  # in preference order: the first a target has is used
    # per input, the (lo, hi) its values must provably lie in for the spellings to be exact (None: any)
    value_ranges: tuple = ()

    @property
    def is_update(self) -> bool:
        return isinstance(self.output.op.body, Reduce)

    def emitter_for(self, dialect: str, features) -> Emitter | None:
        for e in self.emitters:
            if e.dialect == dialect and all(f in features for f in e.features):
                return e
        return None

    def needs(self, dialect: str) -> str:
        """What the emitters of `dialect` need, for error messages."""
        options = [" + ".join(e.features) or "nothing" for e in self.emitters if e.dialect == dialect]
        return " or ".join(options) if options else f"(no emitter for {dialect})"

    def __repr__(self) -> str:
        shapes = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in (*self.inputs, self.output))
        return f"TensorIntrin({self.name}: {shapes})"


def decl_tensor_intrin(output: Tensor, emitters, name: str, layouts=None, inputs=None,
                       value_ranges=None) -> TensorIntrin:
    """Declare an intrinsic computing `output` (a te compute over placeholders).
    `layouts`: per operand (inputs, then output) the required flat strides,
    default dense row-major for every operand. `inputs`: operand order, default
    the compute's placeholders in the order its body reads them. `value_ranges`:
    per input, (lo, hi) or None; tensorize embeds the intrinsic only where the
    workload's values are proven to lie in them (e.g. a saturating instruction
    that is exact on 7-bit activations)."""
    if not isinstance(output, Tensor) or not isinstance(output.op, ComputeOp):
        raise TilewrightError(f"intrinsic '{name}': the semantics must be a te compute tensor, got {output!r:.80}")
    ins = tuple(inputs) if inputs is not None else tuple(output.op.input_tensors)
    for t in ins:
        if not isinstance(t.op, PlaceholderOp):
            raise TilewrightError(f"intrinsic '{name}': input '{t.name}' is computed; an intrinsic's operands are "
                                  f"placeholders")
    read = {id(t) for t in output.op.input_tensors}
    if {id(t) for t in ins} != read:
        raise TilewrightError(f"intrinsic '{name}': inputs {[t.name for t in ins]} are not the placeholders its "
                              f"body reads {[t.name for t in output.op.input_tensors]}")
    operands = (*ins, output)
    if layouts is None:
        layouts = tuple(dense_strides(t.shape) for t in operands)
    layouts = tuple(tuple(x) for x in layouts)
    if len(layouts) != len(operands) or any(len(lay) != len(t.shape) for lay, t in zip(layouts, operands)):
        raise TilewrightError(f"intrinsic '{name}': layouts need one stride per axis of each operand "
                              f"{[list(t.shape) for t in operands]}, got {[list(x) for x in layouts]}")
    emitters = tuple(emitters)
    if not emitters or not all(isinstance(e, Emitter) for e in emitters):
        raise TilewrightError(f"intrinsic '{name}': emitters must be a non-empty list of tw.intrin.Emitter")
    ranges = tuple(value_ranges) if value_ranges is not None else (None,) * len(ins)
    if len(ranges) != len(ins):
        raise TilewrightError(f"intrinsic '{name}': value_ranges needs one entry (or None) per input, got "
                              f"{len(ranges)} for {len(ins)}")
    return TensorIntrin(name, output, ins, layouts, emitters, ranges)


__all__ = ["Emitter", "TensorIntrin", "decl_tensor_intrin"]
