"""`tw.load(dir)`: a model that `module.export(dir)` wrote, back in Python: its library loaded
with ctypes, its weights read once, called like a `Module` (NumPy arrays or CPU torch tensors in,
the same kind out), no tilewright compilation involved."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np

from ..errors import MeasureError, ShapeError


class LoadedModule:
    def __init__(self, directory):
        d = Path(directory)
        missing = [f for f in ("libmodel.so", "weights.bin", "model.json") if not (d / f).is_file()]
        if missing:
            raise ShapeError(f"load: {d} is not an exported model (module.export(dir) writes libmodel.so, "
                             f"weights.bin, model.h and model.json); missing: {', '.join(missing)}")
        sig = json.loads((d / "model.json").read_text())
        if sig.get("format") != 1:
            raise ShapeError(f"load: {d}/model.json has format {sig.get('format')!r}; this tilewright reads 1")
        self.name = sig["name"]
        self.inputs = [(t["name"], tuple(t["shape"]), np.dtype(t["dtype"])) for t in sig["inputs"]]
        self.outputs = [(t["name"], tuple(t["shape"]), np.dtype(t["dtype"])) for t in sig["outputs"]]
        self.value_guards = {t["name"]: np.asarray(t["value"], t["dtype"]) for t in sig["inputs"] if "value" in t}
        self._lib = ctypes.CDLL(str(d / "libmodel.so"))
        self._lib.tw_model_run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self._lib.tw_model_set_num_threads.argtypes = [ctypes.c_int]
        rc = self._lib.tw_model_init(str(d / "weights.bin").encode())
        if rc:
            raise ShapeError(f"load: the model in {d} could not read its weights (tw_model_init returned {rc})")

    def set_num_threads(self, n: int) -> None:
        self._lib.tw_model_set_num_threads(int(n))

    def __call__(self, *arrays):
        from .module import _is_torch, host_array

        if len(arrays) != len(self.inputs):
            raise ShapeError(f"model '{self.name}' takes {len(self.inputs)} inputs "
                             f"({', '.join(n for n, _, _ in self.inputs)}), got {len(arrays)}")
        ins = []
        for (name, shape, dtype), a in zip(self.inputs, arrays):
            a = host_array(a, f"model '{self.name}'", name, "the library")
            if a.shape != shape or a.dtype != dtype:
                raise ShapeError(f"model '{self.name}': input '{name}' is {a.dtype}{list(a.shape)}, expected "
                                 f"{dtype}{list(shape)}")
            if name in self.value_guards and not np.array_equal(a, self.value_guards[name]):
                raise ShapeError(f"model '{self.name}': input '{name}' holds {a.ravel().tolist()[:8]}, but the "
                                 f"library was compiled for {self.value_guards[name].ravel().tolist()[:8]} (its "
                                 "value fixes a shape or an attribute)")
            ins.append(np.ascontiguousarray(a))
        outs = [np.empty(shape, dtype) for _, shape, dtype in self.outputs]
        in_ptrs = (ctypes.c_void_p * max(1, len(ins)))(*(a.ctypes.data for a in ins))
        out_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*(o.ctypes.data for o in outs))
        rc = self._lib.tw_model_run(in_ptrs, out_ptrs)
        if rc:
            raise MeasureError(f"model '{self.name}': tw_model_run returned {rc} (out of memory?)")
        if any(_is_torch(a) for a in arrays):
            import torch

            outs = [torch.from_numpy(o) for o in outs]
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self) -> str:
        return f"<LoadedModule '{self.name}': {len(self.inputs)} inputs, {len(self.outputs)} outputs>"


def load(directory) -> LoadedModule:
    """The model `module.export(directory)` wrote."""
    return LoadedModule(directory)


__all__ = ["LoadedModule", "load"]
