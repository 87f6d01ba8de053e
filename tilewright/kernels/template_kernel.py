"""A compiled template instance: the library, its constant weights packed once into the panel
layout the microkernel reads (as a deployed model packs them), and calls and timing through the
same `tw_call`/`tw_time` entry points every tilewright CPU kernel exports."""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..build.cc import build_library
from ..errors import ShapeError
from ..runtime.aligned import aligned_copy, aligned_zeros
from ..runtime.kernel import bind_entry_points, c_loop_timing
from ..runtime.timing import TimingResult
from ..targets import Target
from .cpu_source import single_source
from .cpu_tiles import CpuTile, check_layout, check_tile, problem_tiles
from .epilogue import Epilogue
from .problem import ConvProblem, GemmProblem


def pack_weight(w: np.ndarray, k: int, n: int, nr: int) -> np.ndarray:
    """[K, N] (or HWIO, which reshapes to it) -> panels [ceil(N / nr)][K][nr], zero columns past N,
    on a 64-byte boundary so every panel row is an aligned vector load."""
    w = np.asarray(w, np.float32).reshape(k, n)
    panels = math.ceil(n / nr)
    out = aligned_zeros((panels, k, nr), np.float32)
    padded = np.zeros((k, panels * nr), np.float32)
    padded[:, :n] = w
    out[...] = padded.reshape(k, panels, nr).transpose(1, 0, 2)
    return out


def pack_bias(b: np.ndarray, n: int, nr: int) -> np.ndarray:
    out = aligned_zeros((math.ceil(n / nr) * nr,), np.float32)
    out[:n] = np.asarray(b, np.float32).reshape(n)
    return out


class NativeKernel:
    """Loads a template library; `run(arrays)` calls tw_call on C-contiguous float32 arrays."""

    def __init__(self, source: str, target: Target, what: str, load: bool = True):
        """`load=False`: compile only (an isolated runner loads and runs the library)."""
        self.target, self.what = target, what
        self.build_result = build_library(source, target)
        self._lib = bind_entry_points(ctypes.CDLL(str(self.build_result.library)), target.cores) if load else None

    @property
    def source(self) -> str:
        return self.build_result.source

    def _pointers(self, arrays: list[np.ndarray]):
        return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])

    def run(self, arrays: list[np.ndarray]) -> None:
        rc = self._lib.tw_call(self._pointers(arrays))
        if rc != 0:
            raise MemoryError(f"{self.what}: the kernel could not allocate its workspace (code {rc})")

    def time_arrays(self, arrays: list[np.ndarray], repeat: int = 5, min_repeat_ms: float = 50.0) -> TimingResult:
        return c_loop_timing(self._lib, self._pointers(arrays), repeat=repeat, min_repeat_ms=min_repeat_ms)


def check_array(a: np.ndarray, shape: tuple, what: str, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.shape != tuple(shape):
        raise ShapeError(f"{what}: {name} has shape {a.shape}; expected {tuple(shape)}")
    if a.dtype != np.float32:
        raise ShapeError(f"{what}: {name} has dtype {a.dtype}; the templates take float32")
    return np.ascontiguousarray(a)


class TemplateKernel(NativeKernel):
    """One GEMM or NHWC convolution with its epilogue: `kernel(x, out, residual=None)`."""

    def __init__(self, problem, target: Target, tile: CpuTile, epilogue: Epilogue, weight: np.ndarray,
                 bias: np.ndarray | None = None, load: bool = True):
        check_tile(tile, target, problem.M, problem.N)
        check_layout(tile, problem)
        self.problem, self.tile, self.epilogue = problem, tile, epilogue
        if epilogue.bias and bias is None:
            raise ShapeError(f"{problem.name}: the epilogue adds a bias but none was given (shape ({problem.N},))")
        weight = check_array(weight, problem.weight_shape, problem.name, "weight")
        self.packed = pack_weight(weight, problem.K, problem.N, tile.nr)
        self.bias = pack_bias(check_array(bias, (problem.N,), problem.name, "bias"), problem.N, tile.nr) \
            if epilogue.bias else None
        super().__init__(single_source(problem, epilogue, tile), target, problem.name, load)

    @property
    def constants(self) -> list[np.ndarray]:
        """The packed arrays the kernel takes after its input, in argument order."""
        return [self.packed] + ([self.bias] if self.bias is not None else [])

    def arrays(self, x: np.ndarray, out: np.ndarray, residual: np.ndarray | None = None) -> list[np.ndarray]:
        p = self.problem
        x = check_array(x, p.input_shape, p.name, "input")
        if out.shape != p.output_shape or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ShapeError(f"{p.name}: out must be a C-contiguous float32 array of shape {p.output_shape}, got "
                             f"{out.dtype} {out.shape}")
        arrays = [x, self.packed] + ([self.bias] if self.bias is not None else [])
        if self.epilogue.residual:
            if residual is None:
                raise ShapeError(f"{p.name}: the epilogue adds a residual; pass residual= of shape {p.output_shape}")
            arrays.append(check_array(residual, p.output_shape, p.name, "residual"))
        return arrays + [out]

    def __call__(self, x: np.ndarray, out: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
        self.run(self.arrays(x, out, residual))
        return out

    def time(self, x: np.ndarray, out: np.ndarray, residual: np.ndarray | None = None, **kw) -> TimingResult:
        return self.time_arrays(self.arrays(x, out, residual), **kw)


def build_template(problem: GemmProblem | ConvProblem, weight: np.ndarray, target: Target | str = "cpu",
                   epilogue: Epilogue | tuple = (), bias: np.ndarray | None = None,
                   tile: CpuTile | None = None) -> TemplateKernel:
    """The template instance for `problem` with `tile` (the first of the rules' list when not given;
    `profile` measures the list and picks)."""
    target = target if isinstance(target, Target) else Target(target)
    epilogue = epilogue if isinstance(epilogue, Epilogue) else Epilogue(tuple(epilogue))
    tile = tile or problem_tiles(problem, target)[0]
    return TemplateKernel(problem, target, tile, epilogue, weight, bias)


def random_inputs(problem, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = aligned_copy(rng.standard_normal(problem.input_shape, dtype=np.float32))
    w = rng.standard_normal(problem.weight_shape, dtype=np.float32) / np.float32(math.sqrt(problem.K))
    return x, w


__all__ = ["NativeKernel", "TemplateKernel", "build_template", "pack_bias", "pack_weight"]
