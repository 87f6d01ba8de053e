"""ONNX's losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) as graph ops: the target's log-probability
gathered along the class axis at the (run-time) labels, clamped into range first (an ignore_index may lie outside
[0, C)), zeroed where the label is ignore_index, times the gathered class weight, then reduced. "mean" divides by
the summed weights of the targets not ignored (by their count without weights), as ONNX's spec defines it."""

from __future__ import annotations

from .onnx_norms import cast_to, const_like, widened

_REDUCTIONS = ("none", "sum", "mean")


def _check(imp, scores: str, target: str, weight: str | None, a) -> tuple[int, str]:
    """(number of classes, reduction), or a refusal naming what is wrong."""
    shape, tshape = imp.b.types[scores].shape, imp.b.types[target].shape
    if len(shape) < 2:
        raise imp.fail(f"input of shape {list(shape)}: it must be [N, C, d1, ...]")
    if tshape != (shape[0], *shape[2:]):
        raise imp.fail(f"target of shape {list(tshape)} for input {list(shape)}: it must be "
                       f"{[shape[0], *shape[2:]]}")
    if not imp.b.types[target].dtype.startswith("int"):
        raise imp.fail(f"a {imp.b.types[target].dtype} target (int32 or int64)")
    if weight is not None and imp.b.types[weight].shape != (shape[1],):
        raise imp.fail(f"weight of shape {list(imp.b.types[weight].shape)}: it must be [{shape[1]}] (one per class)")
    reduction = a.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise imp.fail(f"reduction '{reduction}' (valid: {', '.join(_REDUCTIONS)})")
    return shape[1], reduction


def _nll(imp, logp: str, target: str, weight: str | None, a) -> str:
    """The loss of log-probabilities `logp` [N, C, d...] at labels `target` [N, d...], reduced as `a` says."""
    classes, reduction = _check(imp, logp, target, weight, a)
    tshape = imp.b.types[target].shape
    below = imp.emit("minimum", [target, const_like(imp, target, classes - 1)])
    clamped = imp.emit("maximum", [below, const_like(imp, target, 0)])
    column = imp.emit("reshape", [clamped], {"shape": (tshape[0], 1, *tshape[1:])})
    picked = imp.emit("take_along", [logp, column], {"axis": 1})
    loss = imp.emit("neg", [imp.emit("reshape", [picked], {"shape": tshape})])
    ignore = a.get("ignore_index")
    ignored = None if ignore is None else imp.emit("equal", [target, const_like(imp, target, int(ignore))])
    if ignored is not None:
        loss = imp.emit("where", [ignored, const_like(imp, loss, 0), loss])
    weights = None  # per target, where "mean" divides by their sum
    if weight is not None:
        weights = imp.emit("take", [weight, clamped], {"axis": 0})
        if ignored is not None:
            weights = imp.emit("where", [ignored, const_like(imp, weights, 0), weights])
        loss = imp.emit("mul", [loss, weights])
    elif ignored is not None:
        weights = imp.emit("where", [ignored, const_like(imp, loss, 0), const_like(imp, loss, 1)])
    if reduction == "none":
        return loss
    every = {"axes": tuple(range(len(tshape))), "keepdims": False}
    if reduction == "sum":
        return imp.emit("reduce_sum", [loss], every)
    if weights is None:
        return imp.emit("mean", [loss], every)
    return imp.emit("div", [imp.emit("reduce_sum", [loss], every), imp.emit("reduce_sum", [weights], every)])


def _widened_weight(imp, weight: str | None) -> str | None:
    return None if weight is None else widened(imp, weight)


def _inputs(imp, ins):
    x = imp.value(ins[0])
    weight = imp.value(ins[2]) if len(ins) > 2 and ins[2] else None
    return x, imp.value(ins[1]), weight, imp.b.types[x].dtype


def _negative_log_likelihood(imp, n, ins, a):
    x, target, weight, dtype = _inputs(imp, ins)
    cast_to(imp, _nll(imp, widened(imp, x), target, _widened_weight(imp, weight), a), dtype, n.output[0])


def _log_softmax(imp, x: str, axis: int) -> str:
    """x - max - log(sum(exp(x - max))) along `axis`: shifted by the maximum, so large scores do not overflow."""
    keep = {"axes": (axis,), "keepdims": True}
    shifted = imp.emit("sub", [x, imp.emit("reduce_max", [x], keep)])
    return imp.emit("sub", [shifted, imp.emit("log", [imp.emit("reduce_sum", [imp.emit("exp", [shifted])], keep)])])


def _softmax_cross_entropy(imp, n, ins, a):
    x, target, weight, dtype = _inputs(imp, ins)
    _check(imp, x, target, weight, a)
    logp = _log_softmax(imp, widened(imp, x), 1)
    cast_to(imp, _nll(imp, logp, target, _widened_weight(imp, weight), a), dtype, n.output[0])
    if len(n.output) > 1 and n.output[1]:
        cast_to(imp, logp, dtype, n.output[1])


LOSS_HANDLERS: dict = {"NegativeLogLikelihoodLoss": _negative_log_likelihood,
                       "SoftmaxCrossEntropyLoss": _softmax_cross_entropy}

__all__ = ["LOSS_HANDLERS"]
