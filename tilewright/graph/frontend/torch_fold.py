"""Constant folding in the torch frontend: a node that reads only constants is run by torch itself
at import."""

from __future__ import annotations

import numpy as np


def fold_constant(c, node):
    """The value of a node whose tensor arguments are all constants (an arange, a slice of a
    buffer), computed by torch itself at import; None where it reads an input or draws random
    numbers, or returns more than one tensor."""
    import torch

    if not isinstance(node.target, torch._ops.OpOverload):
        return None
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
        return None
    args = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a)
    tensors = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.fx.Node)]
    if any(not isinstance(c.env.get(a.name), str) or c.env[a.name] not in c.b.constants for a in tensors):
        return None
    real = torch.fx.node.map_arg(args, lambda a: torch.from_numpy(np.array(c.b.constants[c.env[a.name]])))
    value = node.target(*real[0], **real[1])
    if not isinstance(value, torch.Tensor):
        return None
    return c.b.constant(value.detach().numpy().copy(), node.name)


__all__ = ["fold_constant"]
