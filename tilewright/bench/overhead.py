"""Each side's cost of an (almost) empty call, to read a microsecond-scale case's time against.

Ours: a kernel built by the same compiler that adds 1-element arrays, with as many arguments as the
case's kernel, called from Python as the case's kernel is (`kernel(*ins, out)`: argument checks, the
ctypes call, the kernel's C entry). Its work is one add, so the time is the Python and ctypes path
that every call of ours pays. It enters no OpenMP parallel region: a real kernel's fork/join is part
of its work, as a baseline's thread hand-off is of its. PyTorch's counterpart is the same function on
1-element tensors (`workloads.baselines.torch_empty_call`), NumPy's the same on 1-element arrays
(`numpy_blas`); all three are timed with `timing.median_seconds`."""

from __future__ import annotations

import numpy as np

from .timing import median_seconds

_EMPTY: dict[tuple[int, str], tuple] = {}  # (argument count, target key) -> (kernel, arrays), built once


def empty_kernel(n_args: int, target):
    """(kernel, arrays): a kernel of `n_args` arguments (the last one written) that adds its 1-element
    inputs, and float32 arrays to call it on."""
    key = (n_args, target.key)
    if key not in _EMPTY:
        from .. import te
        from ..api import build

        ins = [te.placeholder((1,), "float32", name=f"a{n}") for n in range(n_args - 1)]
        out = te.compute((1,), lambda i: sum((a[i] for a in ins[1:]), ins[0][i]), name="out")
        kernel = build(ins + [out], target=target, name="empty_call")
        _EMPTY[key] = (kernel, [np.ones(1, np.float32) for _ in ins] + [np.zeros(1, np.float32)])
    return _EMPTY[key]


def ours_empty_call_seconds(n_args: int, target, threads: int, repeat: int = 3) -> float:
    """Seconds per Python call of `empty_kernel(n_args, target)`."""
    kernel, arrays = empty_kernel(n_args, target)
    kernel.set_num_threads(threads)
    return median_seconds(lambda: kernel(*arrays), repeat=repeat)
