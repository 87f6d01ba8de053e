"""Dynamic shapes: `tw.compile(model, example_inputs, dynamic={input: {axis: Dim(...)}})`.

Kernels here are compiled for static shapes (every loop bound and stride a constant the code generator
and the search use), so a dynamic model is a set of static specializations behind one callable:

- A dimension the graph computes slice by slice (a batch: graph/batch_split.py proves it op by op) is
  compiled for a few bucket sizes only (powers of two in its range and its top, or `Dim.sizes`); a call
  of any size in the range runs as consecutive slices on those kernels, the last one padded by repeating
  its last real slice when one larger kernel is cheaper than several smaller ones (timings of the
  buckets, as calls measure them, decide; nothing is recompiled for a new batch size).
- Any other dynamic dimension (a sequence, which attention mixes) is specialized exactly: the sizes
  in `Dim.sizes` (default: the example's) are compiled by `tw.compile`, with its tuning budget each;
  another size in the range is compiled with default schedules (and any records of the same
  workloads) at its first call, which then takes seconds, and is kept.

`compile_dynamic` is what `tw.compile(..., dynamic=)` calls. A size outside its declared range,
dimensions that disagree between inputs, or a static axis of the wrong length is a ShapeError naming
the input and axis."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError
from .batch_split import Carried, NotSeparable, carried_axes


@dataclass(frozen=True)
class Dim:
    """A dynamic dimension: calls bring sizes in [low, high]; `sizes`: the sizes compiled up front
    (a batch's buckets, or points of a sequence; see the module doc). Inputs that share a Dim share
    its size in every call."""
    name: str
    low: int
    high: int
    sizes: tuple[int, ...] | None = None

    def __post_init__(self):
        if not (isinstance(self.low, int) and isinstance(self.high, int) and 1 <= self.low <= self.high):
            raise ShapeError(f"Dim '{self.name}': needs integers 1 <= low <= high, got low={self.low!r}, "
                             f"high={self.high!r}")
        if self.sizes is not None:
            object.__setattr__(self, "sizes", tuple(sorted({int(s) for s in self.sizes})))
            bad = [s for s in self.sizes if not self.low <= s <= self.high]
            if bad or not self.sizes:
                raise ShapeError(f"Dim '{self.name}': sizes {list(self.sizes)} must be non-empty and within "
                                 f"[{self.low}, {self.high}]")

    def buckets(self) -> tuple[int, ...]:
        if self.sizes is not None:
            return self.sizes
        out = {self.high}
        p = 1
        while p < self.high:
            if p >= self.low:
                out.add(p)
            p *= 2
        return tuple(sorted(out))


def parse_dynamic(dynamic, input_names: list[str]) -> dict[str, list[tuple[int, int]]]:
    """{Dim: [(input index, axis), ...]} from {input index or name: {axis: Dim or (low, high)}}; the
    Dims in order of first mention."""
    if not isinstance(dynamic, dict) or not dynamic:
        raise ShapeError("compile: dynamic= takes {input (index or name): {axis: tw.Dim(name, low, high) or "
                         "(low, high)}}")
    out: dict[Dim, list[tuple[int, int]]] = {}
    for key, axes in dynamic.items():
        index = _input_index(key, input_names)
        if not isinstance(axes, dict):
            raise ShapeError(f"compile: dynamic[{key!r}] must map axes to Dims, got {type(axes).__name__}")
        for axis, dim in axes.items():
            if isinstance(dim, tuple) and len(dim) == 2:
                dim = Dim(f"{input_names[index]}.{axis}", *dim)
            if not isinstance(dim, Dim):
                raise ShapeError(f"compile: dynamic[{key!r}][{axis!r}] must be a tw.Dim or (low, high), got {dim!r}")
            out.setdefault(dim, []).append((index, int(axis)))
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise ShapeError(f"compile: two different Dims share a name among {names}; reuse one Dim object for "
                         "axes that always have the same size")
    return out


def _input_index(key, names: list[str]) -> int:
    if isinstance(key, int) and 0 <= key < len(names):
        return key
    if isinstance(key, str) and key in names:
        return names.index(key)
    raise ShapeError(f"compile: dynamic names input {key!r}; the model's inputs are "
                     f"{', '.join(f'{i}: {n}' for i, n in enumerate(names))}")


class DynamicModule:
    """One callable over the static Modules of a model's shapes (see the module doc). `modules` maps
    each compiled (size of every Dim, in `dims` order) to its Module; `split` is the Dim run in slices
    (None where no Dim is separable: `split_reason` says why)."""

    def __init__(self, source, dims: dict[Dim, list[tuple[int, int]]], compile_graph, progress: bool = True):
        self.source, self.progress, self._compile_graph = source, progress, compile_graph
        self.dims = list(dims)
        self._at = dims
        shapes = source.example_shapes()
        for places in dims.values():
            for i, axis in places:
                if not 0 <= axis < len(shapes[i]):
                    raise ShapeError(f"compile: dynamic names axis {axis} of input '{source.input_names[i]}', which "
                                     f"has {len(shapes[i])} axes")
        self.modules: dict[tuple[int, ...], object] = {}
        self.seconds: dict[tuple[int, ...], float] = {}  # each split module's time, measured when compiled
        self._graphs: dict[tuple[int, ...], object] = {}
        self._lock = threading.RLock()
        self._threads: int | None = None  # set_num_threads's count, for specializations compiled later
        self.split, self.split_reason = None, "no dynamic dimension"
        self._carried_out: list[Carried | None] = []
        for dim in self.dims:
            if dim.high < 2:
                continue
            reason = self._try_split(dim)
            if reason is None:
                self.split = dim
                break
            self.split_reason = reason
        fixed = [d.buckets() if d is self.split else (d.sizes or (self._example(d),)) for d in self.dims]
        for key in itertools.product(*fixed):
            self.specialize(key, trials=None)

    @property
    def graph(self):
        return next(iter(self.modules.values())).graph

    def _try_split(self, dim: Dim) -> str | None:
        key = tuple(max(2, d.low) if d is dim else self._example(d) for d in self.dims)
        graph = self._graph(key)
        inputs = {graph.inputs[i]: axis for i, axis in self._at[dim]}
        try:
            carried_in, self._carried_out = carried_axes(graph, inputs, key[self.dims.index(dim)])
        except NotSeparable as e:
            return f"'{dim.name}' is not computed slice by slice: {e}"
        if any(c is not None and c.inner != 1 for c in carried_in.values()):
            return f"'{dim.name}' is not the outermost factor of an input axis"
        return None

    def _example(self, dim: Dim) -> int:
        i, axis = self._at[dim][0]
        return self.source.example_shapes()[i][axis]

    def _graph(self, key: tuple[int, ...]):
        if key not in self._graphs:
            from .infer import infer_types
            from .optimize import optimize

            self._graphs[key] = optimize(infer_types(self.source.graph(self._shapes(key))))
        return self._graphs[key]

    def _shapes(self, key: tuple[int, ...]) -> list[tuple[int, ...]]:
        shapes = [list(s) for s in self.source.example_shapes()]
        for dim, size in zip(self.dims, key):
            for i, axis in self._at[dim]:
                shapes[i][axis] = size
        return [tuple(s) for s in shapes]

    def specialize(self, key: tuple[int, ...], trials: int | None = 0):
        """The Module for these sizes of `dims`, compiled now if it is new (`trials`: its tuning budget;
        None: the budget given to tw.compile)."""
        with self._lock:
            if key not in self.modules:
                if self.progress:
                    sizes = ", ".join(f"{d.name}={s}" for d, s in zip(self.dims, key))
                    print(f"[tilewright] dynamic: compiling the specialization {sizes}", flush=True)
                graph = self._graph(key)
                d = self.dims.index(self.split) if self.split is not None else None
                if d is not None and key[d] >= 2:  # each traced graph proved again, not only the first
                    try:
                        carried_axes(graph, {graph.inputs[i]: a for i, a in self._at[self.split]}, key[d])
                    except NotSeparable as e:
                        raise ShapeError(f"dynamic model: at sizes {key} the graph mixes the slices of "
                                         f"'{self.split.name}': {e}") from e
                self.modules[key] = self._compile_graph(graph, trials)
                self._graphs.pop(key, None)
                if self._threads is not None:
                    self.modules[key].set_num_threads(self._threads)
                if self.split is not None:
                    self._time(key)
            return self.modules[key]

    def set_num_threads(self, n: int) -> None:
        """Threads of every specialization, compiled or still to come."""
        with self._lock:
            for module in self.modules.values():
                module.set_num_threads(n)
            self._threads = n

    # --- calls ---

    def _sizes(self, arrays) -> tuple[int, ...]:
        shapes = self.source.example_shapes()
        if len(arrays) != len(shapes):
            raise ShapeError(f"dynamic model takes {len(shapes)} inputs, got {len(arrays)}")
        dynamic_axes = {(i, a): d for d in self.dims for i, a in self._at[d]}
        sizes: dict[Dim, int] = {}
        for i, (a, shape) in enumerate(zip(arrays, shapes)):
            name = self.source.input_names[i]
            if len(a.shape) != len(shape):
                raise ShapeError(f"dynamic model: input '{name}' has {len(a.shape)} axes, expected {len(shape)}")
            for axis, (n, expect) in enumerate(zip(a.shape, shape)):
                dim = dynamic_axes.get((i, axis))
                if dim is None:
                    if n != expect:
                        raise ShapeError(f"dynamic model: input '{name}' axis {axis} has {n} entries; it is static "
                                         f"({expect}); declare it in dynamic= to vary it")
                    continue
                if not dim.low <= n <= dim.high:
                    raise ShapeError(f"dynamic model: input '{name}' axis {axis} ({dim.name}) has {n} entries, "
                                     f"outside the declared range [{dim.low}, {dim.high}]")
                if sizes.setdefault(dim, n) != n:
                    raise ShapeError(f"dynamic model: input '{name}' axis {axis} has {n} entries, but another "
                                     f"input's {dim.name} has {sizes[dim]}; axes that share a Dim must agree")
        return tuple(sizes[d] for d in self.dims)

    def __call__(self, *arrays):
        from .module import _is_torch, host_array

        as_torch = any(_is_torch(a) for a in arrays)
        xs = [host_array(a, "dynamic model", f"#{k}", "this module") for k, a in enumerate(arrays)]
        key = self._sizes(xs)
        if self.split is None or key in self.modules:
            outs = self._run(key, xs)
        else:
            outs = self._run_in_slices(key, xs)
        if as_torch:
            import torch

            outs = [torch.from_numpy(o) for o in outs]
        return outs[0] if len(outs) == 1 else outs

    def _run(self, key, xs) -> list[np.ndarray]:
        outs = self.specialize(key)(*xs)
        return list(outs) if isinstance(outs, list) else [outs]

    def plan(self, key: tuple[int, ...]) -> list[tuple[int, int]]:
        """(bucket, real slices) per kernel call for the split Dim's size in `key`: the cheapest cover by
        the buckets, fewer calls where costs tie. A bucket costs its module's time at these sizes
        (`seconds`, timed when compiled); where those are not compiled yet, the times at the nearest
        sizes that are, scaled (the ratios between buckets are what matter). The buckets a plan needs
        are compiled at its first use."""
        d = self.dims.index(self.split)
        total = key[d]
        cost = self._bucket_costs(key[:d] + key[d + 1:], d)
        best: list[tuple[float, int, list[tuple[int, int]]]] = [(0.0, 0, [])]  # (cost, calls, plan) per size
        for n in range(1, total + 1):
            best.append(min((best[max(0, n - b)][0] + c, best[max(0, n - b)][1] + 1,
                             best[max(0, n - b)][2] + [(b, min(b, n))]) for b, c in cost.items()))
        return best[total][2][::-1]

    def _bucket_costs(self, rest: tuple[int, ...], d: int) -> dict[int, float]:
        buckets = self.split.buckets()
        by_rest: dict[tuple[int, ...], dict[int, float]] = {}
        for k, t in self.seconds.items():
            by_rest.setdefault(k[:d] + k[d + 1:], {})[k[d]] = t
        here = by_rest.get(rest, {})
        full = [r for r, times in by_rest.items() if r != rest and len(times) == len(buckets)]
        if len(here) < len(buckets) and full:
            there = by_rest[min(full, key=lambda r: sum(abs(a - b) for a, b in zip(r, rest)))]
            common = [b for b in here if b in there]
            scale = float(np.mean([here[b] / there[b] for b in common])) if common else 1.0
            return {b: here.get(b, there[b] * scale) for b in buckets}
        unit = float(np.mean([t / (b + 1) for b, t in here.items()])) if here else 1.0
        return {b: here.get(b, unit * (b + 1)) for b in buckets}  # a call costs about one slice more

    def _time(self, key: tuple[int, ...]) -> None:
        """The new module's time for plans: the median of three calls on zeros, after one to warm up (every
        bucket timed the same way, so none looks cheaper for having been called more often)."""
        module = self.modules[key]
        xs = [np.zeros(t.shape, t.dtype) for t in module.input_types]
        module(*xs)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            module(*xs)
            times.append(time.perf_counter() - start)
        self.seconds[key] = float(np.median(times))

    def _run_in_slices(self, key, xs) -> list[np.ndarray]:
        d = self.dims.index(self.split)
        axis_of = dict(self._at[self.split])
        start, parts = 0, []
        for bucket, take in self.plan(key):
            chunk = [_rows(x, axis_of[i], start, take, bucket) if i in axis_of else x for i, x in enumerate(xs)]
            outs = self._run(key[:d] + (bucket,) + key[d + 1:], chunk)
            # an output axis holds `bucket` slices of o.shape[axis] // bucket entries (the inner factor may
            # depend on the other sizes, a sequence merged into the batch axis)
            parts.append([o if c is None else np.take(o, range(take * (o.shape[c.axis] // bucket)), axis=c.axis)
                          for o, c in zip(outs, self._carried_out)])
            start += take
        return [p[0] if c is None else np.concatenate(p, axis=c.axis)
                for p, c in zip(zip(*parts), self._carried_out)]

    def __repr__(self) -> str:
        dims = ", ".join(f"{d.name} in [{d.low}, {d.high}]" for d in self.dims)
        split = f"'{self.split.name}' in slices of {list(self.split.buckets())}" if self.split else "none"
        return f"<DynamicModule: {dims}; run in slices: {split}; {len(self.modules)} specializations compiled>"


def _rows(x: np.ndarray, axis: int, start: int, take: int, bucket: int) -> np.ndarray:
    """x's slices [start, start + take) along `axis`, the last one repeated up to `bucket`."""
    if take == bucket:
        return np.ascontiguousarray(x[(slice(None),) * axis + (slice(start, start + take),)])
    return np.take(x, np.minimum(np.arange(start, start + bucket), start + take - 1), axis=axis)


def compile_dynamic(model, example_inputs, dynamic, name, compile_static, trials: int, progress: bool):
    """A DynamicModule of `model`; `compile_static(graph, trials)` is tw.compile with the caller's options."""
    from .dynamic_sources import source_of

    source = source_of(model, example_inputs, name)
    dims = parse_dynamic(dynamic, source.input_names)
    if hasattr(source, "fill"):
        source.fill(dims)
    return DynamicModule(source, dims, lambda graph, n: compile_static(graph, trials if n is None else n),
                         progress=progress)
