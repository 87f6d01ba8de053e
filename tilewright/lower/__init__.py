"""Lowering: bound inference, loop-nest construction and the passes that turn
a schedule into loop IR (simplify, guards/partition, flatten, unroll,
vectorize, verify). Imports `schedule`, `te`, `ir`. Public names: lower,
LoweredFunc."""

from .lower import LoweredFunc, lower

__all__ = ["LoweredFunc", "lower"]
