"""Rendering an intrinsic call (ir.stmt.IntrinCall) in the C dialect: the emitter
chosen for the target spells it on the operands' addresses; an output tile that
lower/registers.py put in a vector register goes through a local copy."""

from __future__ import annotations

from ..errors import BuildError
from ..ir.stmt import IntrinCall


def render_intrinsic_call(r, s: IntrinCall) -> None:
    """The chosen emitter's statements on the operands' addresses; the kernel gets the
    emitter's target attribute so GCC may use its instructions whatever -march says."""
    em = s.emitter
    name = getattr(s.intrin, "name", "?")
    if em is None:
        raise BuildError(f"intrinsic '{name}' has no emitter: lower it for a target (tw.build does)")
    addrs, slot = [], None
    for n, op in enumerate(s.operands):
        if r.promoted.get(id(op.tensor)) is not None:  # lower/registers.py: the output tile, one slot
            if n != len(s.operands) - 1:
                raise BuildError(f"intrinsic '{name}' reads '{op.tensor.name}', which lives in registers")
            slot = r.promoted[id(op.tensor)][int(op.indices[0].value)]
            addrs.append(f"(({r.scalar_type(op.tensor.dtype)} *)&tw_acc)")
            continue
        buf = r.names.of(op.tensor, op.tensor.name)
        addrs.append(f"(&{buf}[{r.expr(op.indices[0])}])")
    for h in em.headers:
        r.helpers.setdefault(f"#include <{h}>", f"#include <{h}>")
    if em.gcc_target:
        r.gcc_targets.update(em.gcc_target.split(","))
    if slot is not None:  # through a local copy the compiler keeps in the register
        r.emit("{")
        r.depth += 1
        r.emit(f"__typeof__({slot}) tw_acc = {slot};")
    for line in em.render(tuple(addrs)).splitlines():
        r.emit(line)
    if slot is not None:
        r.emit(f"{slot} = tw_acc;")
        r.depth -= 1
        r.emit("}")


__all__ = ["render_intrinsic_call"]
