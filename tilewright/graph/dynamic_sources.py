"""Where a dynamic model's static graphs come from: the model traced again (torch.nn.Module) or read with
fixed input shapes (ONNX) at each set of sizes graph/dynamic.py asks for."""

from __future__ import annotations

import os

from ..errors import ShapeError


class TorchSource:
    """A torch.nn.Module: traced by the PyTorch frontend on the example inputs stretched or cut to each
    shape (entries repeated cyclically, so ids and masks keep valid values)."""

    def __init__(self, model, example_inputs, name):
        import torch

        if example_inputs is None:
            raise ShapeError("compile: a torch.nn.Module needs example_inputs (a tuple of tensors) to fix its shapes")
        examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
        if not all(isinstance(x, torch.Tensor) for x in examples):
            raise ShapeError("compile: dynamic= takes example inputs that are all torch tensors")
        self.model, self.examples, self.name = model, examples, name
        self.input_names = [f"input{i}" for i in range(len(examples))]

    def example_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(x.shape) for x in self.examples]

    def graph(self, shapes):
        import torch

        from .frontend import from_torch

        tensors = []
        for x, shape in zip(self.examples, shapes):
            for axis, n in enumerate(shape):
                if x.shape[axis] != n:
                    x = torch.index_select(x, axis, torch.arange(n) % x.shape[axis])
            tensors.append(x)
        return from_torch(self.model, tuple(tensors), name=self.name)


class OnnxSource:
    """An ONNX model: read with each set of input shapes fixed (`from_onnx(..., input_shapes=)`)."""

    def __init__(self, model, example_inputs, name):
        import onnx

        if isinstance(model, (str, os.PathLike)):
            try:
                model = onnx.load(os.fspath(model))
            except Exception as e:  # noqa: BLE001 - a truncated or foreign file
                raise ShapeError(f"compile: could not read the ONNX model {model!r}: {type(e).__name__}: {e}") from e
        self.model, self.name = model, name
        initializers = {t.name for t in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in initializers]
        self.input_names = [i.name for i in inputs]
        # (input, axis) of each named open dimension (ONNX's dim_param): axes that share a name share a size
        self.named_axes: dict[str, list[tuple[int, int]]] = {}
        for i, inp in enumerate(inputs):
            for axis, d in enumerate(inp.type.tensor_type.shape.dim):
                if d.HasField("dim_param") and d.dim_param:
                    self.named_axes.setdefault(d.dim_param, []).append((i, axis))
        if example_inputs is not None:
            examples = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
            self._shapes = [tuple(int(d) for d in x.shape) for x in examples]
        else:
            self._shapes = [tuple(d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim)
                            for i in inputs]

    def fill(self, dims: dict) -> None:
        """Ties to each declared axis the other inputs' axes of the same dim_param, then gives the dynamic
        axes the file leaves open a size (a Dim's first); an open static axis is an error."""
        claimed = {p for places in dims.values() for p in places}
        for places in dims.values():
            for i, axis in list(places):
                for group in self.named_axes.values():
                    if (i, axis) in group:
                        tied = [p for p in group if p not in claimed]
                        places.extend(tied)
                        claimed.update(tied)
        shapes = [list(s) for s in self._shapes]
        for dim, places in dims.items():
            for i, axis in places:
                if axis >= len(shapes[i]):
                    raise ShapeError(f"compile: dynamic names axis {axis} of input '{self.input_names[i]}', which "
                                     f"has {len(shapes[i])} axes")
                if shapes[i][axis] == 0:
                    shapes[i][axis] = dim.buckets()[0] if dim.sizes else dim.low
        for name, shape in zip(self.input_names, shapes):
            if 0 in shape:
                raise ShapeError(f"compile: input '{name}' of the ONNX model has an open axis {shape.index(0)} that "
                                 "dynamic= does not declare; declare it or pass example_inputs")
        self._shapes = [tuple(s) for s in shapes]

    def example_shapes(self) -> list[tuple[int, ...]]:
        return list(self._shapes)

    def graph(self, shapes):
        from .frontend import from_onnx

        return from_onnx(self.model, name=self.name, input_shapes=dict(zip(self.input_names, shapes)))


def exported_dims(model) -> dict | None:
    """For a torch ExportedProgram with symbolic input sizes (`torch.export.export(..., dynamic_shapes=)`): the
    `dynamic=` they declare, each symbol one Dim over its range; None for anything else."""
    try:
        import torch
    except ImportError:
        return None
    if not isinstance(model, torch.export.ExportedProgram):
        return None
    from .dynamic import Dim

    ranges = {str(sym): r for sym, r in model.range_constraints.items()}
    user = [n for n in model.graph.nodes if n.op == "placeholder" and n.name in model.graph_signature.user_inputs]
    dims: dict[str, Dim] = {}
    out: dict[int, dict[int, Dim]] = {}
    for i, node in enumerate(user):
        for axis, size in enumerate(getattr(node.meta.get("val"), "shape", ())):
            if not isinstance(size, torch.SymInt):
                continue
            sym = str(size.node.expr)
            if sym not in ranges:
                raise ShapeError(f"compile: input '{node.name}' axis {axis} has the derived size {sym}; only plain "
                                 "dynamic dims (torch.export.Dim) are taken")
            low, high = ranges[sym].lower, ranges[sym].upper
            try:
                high = int(high)
            except (TypeError, ValueError, OverflowError, AttributeError):  # torch's int_oo: unbounded
                raise ShapeError(f"compile: input '{node.name}' axis {axis} ({sym}) has no upper bound; export "
                                 "with Dim(..., max=N) or pass dynamic= to tw.compile") from None
            dims.setdefault(sym, Dim(sym, max(1, int(low)), high))
            out.setdefault(i, {})[axis] = dims[sym]
    return out or None


def source_of(model, example_inputs, name):
    if isinstance(model, (str, os.PathLike)) or (type(model).__module__.startswith("onnx")
                                                   and type(model).__name__ == "ModelProto"):
        return OnnxSource(model, example_inputs, name)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and isinstance(model, torch.export.ExportedProgram):  # traced again through its module
        args = example_inputs if example_inputs is not None else (model.example_inputs or ((), {}))[0]
        return TorchSource(model.module(), args, name)
    if torch is not None and isinstance(model, torch.nn.Module):
        return TorchSource(model, example_inputs, name)
    raise ShapeError(f"compile: dynamic= takes a torch.nn.Module, an ExportedProgram or an ONNX model (ModelProto "
                     f"or path), got {type(model).__name__}; a tilewright Graph has static shapes")
