"""Torch frontend handlers that index or regroup tensors: concatenation (torch's empty 1-D parts
skipped), split into parts, embedding lookups."""

from __future__ import annotations


def concat(c, a):
    """torch.cat; it skips 1-D empty tensors (an empty key/value cache is one)."""
    vals = [v for v in (c.v(t) for t in a["tensors"]) if c.b.types[v].shape != (0,)]
    rank = len(c.node.meta["val"].shape)
    if len(vals) == 1:
        return vals[0]
    return c.out("concat", vals, {"axis": int(a["dim"]) % rank})


def split(c, a):
    """split / split_with_sizes: one slice per part (a list; getitem picks them)."""
    x = c.v(a["self"])
    shape = c.b.types[x].shape
    dim = int(a["dim"]) % len(shape)
    sizes = a.get("split_sizes")
    if sizes is None:
        step = int(a["split_size"])
        sizes = [min(step, shape[dim] - k) for k in range(0, shape[dim], step)]
    parts, start = [], 0
    for k, size in enumerate(int(v) for v in sizes):
        begin, end = [0] * len(shape), list(shape)
        begin[dim], end[dim] = start, start + size
        parts.append(c.out("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": (1,) * len(shape)},
                           val=c.node.meta["val"][k]))
        start += size
    return parts


def embedding(c, a):
    return c.out("embedding", [c.v(a["weight"]), c.v(a["indices"])])


__all__ = ["concat", "embedding", "split"]
