"""The NumPy reference evaluator: exact-as-possible values of any te program,
against which every generated kernel is checked. Imports `te`, `ir`, `errors`.
Public names: evaluate."""

from .evaluate import evaluate

__all__ = ["evaluate"]
