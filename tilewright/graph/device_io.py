"""A GPU module's inputs and outputs: what kind of array the caller passed
(NumPy, copied in and out; a CUDA array exposing __cuda_array_interface__ such
as a torch CUDA tensor or a CuPy array; a pyopencl Array or Buffer, used in
place), the checks of shape, dtype and device with messages naming the input
and what would be valid, output arrays of the inputs' kind, and the device
handle of a caller's array."""

from __future__ import annotations

import numpy as np

from ..errors import MeasureError, ShapeError

NUMPY, CUDA, OPENCL = "numpy", "cuda", "opencl"


def _package(a) -> str:
    return type(a).__module__.split(".")[0]


def array_kind(a) -> str:
    """NUMPY for a NumPy array (or anything np.asarray takes), CUDA for an array on a CUDA device,
    OPENCL for a pyopencl Array or Buffer; a torch tensor elsewhere is its device's name."""
    if isinstance(a, np.ndarray):
        return NUMPY
    if _package(a) == "torch":
        return CUDA if a.device.type == "cuda" else f"torch-{a.device.type}"
    if _package(a) == "pyopencl":
        return OPENCL
    if hasattr(a, "__cuda_array_interface__"):
        return CUDA
    return NUMPY


_NAMES = {CUDA: "CUDA", OPENCL: "pyopencl", NUMPY: "NumPy"}
_DEVICES = {CUDA: "CUDA", OPENCL: "OpenCL"}
_REMEDY = {CUDA: "a NumPy array (copied in and out) or a CUDA tensor (tensor.cuda(), used in place)",
           OPENCL: "a NumPy array (copied in and out) or a pyopencl Array on the module's context (used in place)"}


def check_inputs(model: str, device: str, names, types, arrays) -> tuple[str, list]:
    """(the inputs' kind, the inputs checked against `types`: NumPy arrays made C-contiguous,
    device arrays as given). `device`: CUDA or OPENCL, the kind of device the model runs on."""
    if len(arrays) != len(names):
        raise ShapeError(f"model '{model}' takes {len(names)} inputs ({', '.join(names)}), got {len(arrays)}")
    kinds = [array_kind(a) for a in arrays]
    for name, kind in zip(names, kinds):
        if kind.startswith("torch-"):
            raise MeasureError(f"model '{model}': input '{name}' is a torch tensor on the {kind[6:]}, but the model "
                               f"runs on {_DEVICES[device]}; pass {_REMEDY[device]}, e.g. {name}.numpy()"
                               + (f" or {name}.cuda()" if device == CUDA else ""))
        if kind not in (NUMPY, device):
            raise MeasureError(f"model '{model}': input '{name}' is a {_NAMES[kind]} array, but the model runs on "
                               f"{_DEVICES[device]}; pass {_REMEDY[device]}")
    if len(set(kinds)) > 1:
        listed = ", ".join(f"'{n}' {k}" for n, k in zip(names, kinds))
        raise MeasureError(f"model '{model}': the inputs mix NumPy and device arrays ({listed}); pass all of one "
                           f"kind (outputs come back as the inputs' kind)")
    kind = kinds[0] if kinds else NUMPY
    out = []
    for name, t, a in zip(names, types, arrays):
        shape, dtype = _shape_dtype(a, kind)
        if dtype is not None and dtype != np.dtype(t.dtype):
            cast = f".astype(np.{t.dtype})" if kind == NUMPY else ".half()" if t.dtype == "float16" else ".float()"
            raise ShapeError(f"model '{model}': input '{name}' has dtype {dtype}, expected {t.dtype} (cast it with "
                             f"{cast})")
        if shape is not None and tuple(shape) != t.shape:
            raise ShapeError(f"model '{model}': input '{name}' has shape {list(shape)}, expected {list(t.shape)}")
        if shape is None and _nbytes(a) < t.nbytes:  # a raw OpenCL buffer: only its size is known
            raise ShapeError(f"model '{model}': input '{name}' is an OpenCL buffer of {_nbytes(a)} bytes; it must "
                             f"hold {t} ({t.nbytes} bytes)")
        out.append(np.require(np.asarray(a), requirements="C") if kind == NUMPY else a)
    return kind, out


def _shape_dtype(a, kind: str):
    if kind == NUMPY:
        a = np.asarray(a)
        return a.shape, a.dtype
    if kind == CUDA:
        iface = a.__cuda_array_interface__
        return tuple(iface["shape"]), np.dtype(iface["typestr"])
    if hasattr(a, "shape"):  # pyopencl.array.Array
        return tuple(a.shape), np.dtype(a.dtype)
    return None, None  # a pyopencl Buffer


def _nbytes(a) -> int:
    return int(getattr(a, "size", 0) or 0)


def new_outputs(kind: str, like, types, memory) -> list:
    """Output arrays of the inputs' kind (`like`: the first input), on the same device."""
    if kind == CUDA and _package(like) == "torch":
        import torch

        return [torch.empty(t.shape, dtype=getattr(torch, t.dtype), device=like.device) for t in types]
    if kind == CUDA and _package(like) == "cupy":
        import cupy

        return [cupy.empty(t.shape, dtype=t.dtype) for t in types]
    if kind == CUDA:
        raise MeasureError(f"outputs of a model called with {type(like).__name__} inputs: only torch and CuPy "
                           f"arrays can be made here; pass NumPy arrays or torch CUDA tensors")
    if kind == OPENCL and hasattr(like, "shape"):
        import pyopencl.array as cl_array

        return [cl_array.empty(memory.queue, t.shape, t.dtype) for t in types]
    if kind == OPENCL:
        import pyopencl as cl

        return [cl.Buffer(memory.context, cl.mem_flags.READ_WRITE, size=max(t.nbytes, 1)) for t in types]
    return [np.empty(t.shape, t.dtype) for t in types]


def device_handle(model: str, name: str, a, t, memory) -> object:
    """The device address (CUDA) or Buffer (OpenCL) of a caller's device array `a` holding value `name`
    of type `t`, after checking its layout, alignment and device."""
    if memory.kind == CUDA:
        from ..codegen.device import DeviceBuffer
        from ..runtime.cuda import device_pointer

        b = DeviceBuffer(name, t.dtype, t.shape, t.shape, "arg", 0)
        return device_pointer(a, b, f"model '{model}'", memory.device, memory.stream)
    if hasattr(a, "shape"):  # pyopencl.array.Array
        if a.context != memory.context:
            raise MeasureError(f"model '{model}': input '{name}' lives in another OpenCL context than the model's "
                               f"kernels; make it with the module's queue (module.queue)")
        if a.offset or not a.flags.c_contiguous:
            raise MeasureError(f"model '{model}': '{name}' must be a C-contiguous pyopencl Array at offset 0; pass "
                               f"a copy (.copy())")
        if a.queue is not None and a.queue != memory.queue:
            a.queue.finish()  # written on another queue: wait for it (ours is in order)
        return a.base_data
    return a


__all__ = ["CUDA", "NUMPY", "OPENCL", "array_kind", "check_inputs", "device_handle", "new_outputs"]
