"""A te program: the stages reachable from some output tensors, in dependency order."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import NameConflictError, TilewrightError
from .tensor import PlaceholderOp, Tensor


@dataclass(frozen=True, eq=False)
class Program:
    outputs: tuple[Tensor, ...]
    tensors: tuple[Tensor, ...]  # every tensor, producers before consumers

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if isinstance(t.op, PlaceholderOp))

    @property
    def stages(self) -> tuple[Tensor, ...]:
        """The computed tensors (not placeholders), producers first."""
        return tuple(t for t in self.tensors if not isinstance(t.op, PlaceholderOp))

    def by_name(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)


def as_tensor_list(outputs, what: str = "outputs") -> tuple[Tensor, ...]:
    if isinstance(outputs, Tensor):
        return (outputs,)
    try:
        items = tuple(outputs)
    except TypeError:
        raise TilewrightError(f"{what} must be a tensor or a list of tensors, got {type(outputs).__name__}") from None
    for t in items:
        if not isinstance(t, Tensor):
            raise TilewrightError(f"{what} must contain tensors, got {type(t).__name__} {t!r}")
    if not items:
        raise TilewrightError(f"{what} is empty; give at least one tensor")
    return items


def collect_program(outputs) -> Program:
    """Walk from `outputs` to the placeholders. Placeholder names must be unique
    (inputs and kernel arguments are matched by name); computed stages may share
    names, code generators make their symbols unique."""
    outs = as_tensor_list(outputs)
    order: list[Tensor] = []
    done: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(t, False) for t in reversed(outs)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            if id(t) not in done:
                done.add(id(t))
                order.append(t)
            continue
        if id(t) in done:
            continue
        stack.append((t, True))
        stack.extend((p, False) for p in reversed(t.op.input_tensors) if id(p) not in done)
    names: dict[str, Tensor] = {}
    for t in order:
        if not isinstance(t.op, PlaceholderOp):
            continue
        other = names.setdefault(t.name, t)
        if other is not t:
            raise NameConflictError(
                f"two different placeholders are named '{t.name}' in this program; input names must be unique "
                f"(inputs are matched by name): rename one"
            )
    return Program(outs, tuple(order))
