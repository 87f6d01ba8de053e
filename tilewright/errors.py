"""The error hierarchy. Every message names the tensor, axis or primitive at fault
and says what would be valid. Importable from every layer."""


class TilewrightError(Exception):
    """Base class of every error tilewright raises on purpose."""


class ShapeError(TilewrightError):
    """A shape, extent, index arity or index range is invalid."""


class DTypeError(TilewrightError):
    """An unknown dtype, or operands whose dtypes need an explicit cast."""


class ExprError(TilewrightError):
    """A malformed expression: misuse of a reduce axis, a non-integer index, ..."""


class NameConflictError(TilewrightError):
    """Two distinct objects share a name where names must be unique."""


class EvaluationError(TilewrightError):
    """The reference evaluator met something it cannot evaluate (missing input,
    out-of-bounds read, wrong input shape or dtype)."""


class ScheduleError(TilewrightError):
    """An illegal schedule primitive request."""


class TensorizeError(ScheduleError):
    """`s[T].tensorize` cannot place its intrinsic at the marked loop. `tensor` (the stage's) and
    `intrin` let the API, which knows the embedder, add where the intrinsic would fit."""

    def __init__(self, message: str, tensor=None, intrin=None):
        super().__init__(message)
        self.tensor, self.intrin = tensor, intrin


class EmptySpaceError(ScheduleError):
    """A schedule space whose constraints reject every point (a tiny or odd-shaped program on a device
    whose rules it cannot meet): a kind with a fallback schedule uses that instead."""


class LoweringError(TilewrightError):
    """A schedule could not be lowered to loop IR."""


class BuildError(TilewrightError):
    """Source generation or compilation failed."""


class MeasureError(TilewrightError):
    """Running or timing a kernel failed."""


class TilewrightWarning(UserWarning):
    """Something a user should know that does not stop the work (records of another
    target not applied, a record whose trace no longer replays)."""
