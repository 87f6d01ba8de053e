"""A compiled kernel: call it on NumPy arrays, time it, read or export its source."""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import weakref
from pathlib import Path

import numpy as np

from ..build.cc import rebuild
from ..errors import BuildError, MeasureError
from ..ir.stmt import Buffer, Store
from ..ir.stmt_functor import walk_stmt
from .timing import TimingResult

_NUMPY_STORAGE = {"bfloat16": np.dtype(np.uint16)}  # raw bits; float arrays are rounded on the way in


def storage_dtype(buf: Buffer) -> np.dtype:
    return _NUMPY_STORAGE.get(buf.dtype.name, buf.dtype.numpy)


def c_loop_timing(lib, ptrs, number: int | None = None, repeat: int = 5,
                  min_repeat_ms: float = 50.0) -> TimingResult:
    """The timing every compiled CPU kernel gets: a library's `tw_time(args, number)` (calls back to
    back inside C) after one warm-up call, `number` calibrated to last `min_repeat_ms`, `repeat` samples."""
    lib.tw_time(ptrs, 1)  # warm up: page faults, thread pool
    if number is None:
        once = max(lib.tw_time(ptrs, 1), 1e-7)
        number = max(1, int(min_repeat_ms / 1e3 / once))
    return TimingResult.of([lib.tw_time(ptrs, number) for _ in range(repeat)], number)


def bind_entry_points(lib: ctypes.CDLL, cores: int) -> ctypes.CDLL:
    """Declare the entry points every CPU kernel library exports and set its thread count."""
    lib.tw_call.restype = ctypes.c_int32
    lib.tw_call.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.tw_time.restype = ctypes.c_double
    lib.tw_time.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int32]
    lib.tw_set_num_threads.argtypes = [ctypes.c_int32]
    lib.tw_set_num_threads(int(cores))
    return lib


class Kernel:
    """`kernel(*arrays)` runs it in place on C-contiguous arrays in argument order."""

    def __init__(self, func, source, build, target):
        self.func = func
        self._source = source
        self.build_result = build
        self.target = target
        # every argument the kernel stores into (outputs and computed intermediates passed in args)
        self.output_names = tuple(b.name for b in func.args if b in _stored_buffers(func.body))
        # per argument (name, NumPy dtype, shape, written); the argument pairs of which one is written;
        # data pointers of recent calls' arrays (_address): what each call checks, computed once
        self._specs = [(b.name, storage_dtype(b), tuple(shape), b.name in self.output_names)
                       for b, shape in zip(func.args, func.caller_shapes)]
        self._written_pairs = [(i, j) for i in range(len(self._specs)) for j in range(i + 1, len(self._specs))
                               if self._specs[i][3] or self._specs[j][3]]
        self._addresses: dict[int, tuple] = {}
        self._lib = bind_entry_points(self._load(), target.cores)

    def _load(self) -> ctypes.CDLL:
        """dlopen the library; one that fails to load (a damaged cache entry) is
        deleted and rebuilt once, never loaded again."""
        try:
            return ctypes.CDLL(str(self.build_result.library))
        except OSError as exc:
            self.build_result = rebuild(self.build_result, self.target, str(exc))
        try:
            return ctypes.CDLL(str(self.build_result.library))
        except OSError as exc:
            raise BuildError(f"cannot load the freshly built {self.build_result.library} ({exc}); check that "
                             "TILEWRIGHT_CC/CC builds shared libraries for this machine") from None

    @property
    def source(self) -> str:
        return self._source.text

    @property
    def args(self) -> tuple[Buffer, ...]:
        return self.func.args

    def set_num_threads(self, n: int) -> None:
        self._lib.tw_set_num_threads(int(n))

    def __del__(self):
        # the large buffers this thread's calls kept (codegen/heap.py); a kernel sharing the library
        # maps them again at its next call
        release = getattr(getattr(self, "_lib", None), "tw_release", None)
        if release is not None:
            release()

    def _pack(self, arrays) -> tuple[ctypes.Array, list[tuple[int, int]]]:
        """The arguments' data pointers and the memory span [start, end) of each, every argument
        checked (count, type, dtype, shape, layout, writable where written)."""
        specs = self._specs
        if len(arrays) != len(specs):
            raise MeasureError(f"kernel '{self.func.name}' takes {len(specs)} arrays "
                               f"({', '.join(s[0] for s in specs)}), got {len(arrays)}")
        ptrs = (ctypes.c_void_p * len(specs))()
        spans = []
        self._keep = arrays
        for n, ((name, want, shape, written), arr) in enumerate(zip(specs, arrays)):
            if not isinstance(arr, np.ndarray):
                raise MeasureError(f"argument '{name}' must be a NumPy array, got {type(arr).__name__}")
            if arr.dtype != want and not (arr.dtype.name == "bfloat16" and want == np.uint16):  # ml_dtypes: same bits
                raise MeasureError(f"argument '{name}' has dtype {arr.dtype}, expected {want} "
                                   f"({self.func.args[n].dtype})")
            if arr.shape != shape:
                raise MeasureError(f"argument '{name}' has shape {list(arr.shape)}, expected {list(shape)}")
            if not arr.flags.c_contiguous:
                raise MeasureError(f"argument '{name}' is not C-contiguous; pass np.ascontiguousarray(...)")
            if written and not arr.flags.writeable:
                raise MeasureError(f"argument '{name}' is read-only, but the kernel writes it")
            address = self._address(arr)
            ptrs[n] = address
            spans.append((address, address + arr.nbytes))
        return ptrs, spans

    def _address(self, arr: np.ndarray) -> int:
        """`arr`'s data pointer. NumPy's own accessors take microseconds per array, which a
        microsecond kernel called from Python would pay several times over, so the pointers of
        the arrays of recent calls are kept (with the arrays themselves: an array's data does not
        move while it is alive, and a weak reference tells a live array from a new one that took
        a dead one's id)."""
        cache = self._addresses
        hit = cache.get(id(arr))
        if hit is not None and hit[0]() is arr:
            return hit[1]
        if len(cache) >= 4 * max(1, len(self.func.args)):
            cache.clear()
        address = arr.ctypes.data
        cache[id(arr)] = (weakref.ref(arr), address)
        return address

    def __call__(self, *arrays) -> None:
        """Run in place. An output that overlaps an input (the same array, a view of
        it, or overlapping memory) is computed into a fresh array and copied over it
        afterwards, so `kernel(a, a)` means `a[:] = f(a)` (the kernel's pointers are
        `restrict`: writing into memory it still reads would give wrong results).
        Two outputs that overlap each other have no meaning: a MeasureError."""
        ptrs, spans = self._pack(arrays)
        via_copy = self._aliased_outputs(spans)
        if via_copy:
            fresh = [np.empty_like(a) if n in via_copy else a for n, a in enumerate(arrays)]
            ptrs, _ = self._pack(fresh)
        rc = self._lib.tw_call(ptrs)
        if rc != 0:
            raise MeasureError(f"kernel '{self.func.name}' failed with code {rc} (out of memory?)")
        for n in via_copy:
            np.copyto(arrays[n], fresh[n])

    def _aliased_outputs(self, spans: list[tuple[int, int]], copy: bool = True) -> list[int]:
        """Positions of outputs whose memory overlaps an input's (to compute through a
        copy); a MeasureError naming both arguments where a copy cannot help (two
        outputs overlap) or is not wanted (`copy=False`). `spans`: each argument's
        [start, end) from _pack (C-contiguous arrays occupy exactly that)."""
        specs = self._specs
        out = []
        for i, j in self._written_pairs:
            if spans[i][0] >= spans[j][1] or spans[j][0] >= spans[i][1]:
                continue
            wi, wj = specs[i][3], specs[j][3]
            if (wi and wj) or not copy:
                what = "both are written" if wi and wj else "one is written while the other is read"
                raise MeasureError(f"arguments '{specs[i][0]}' and '{specs[j][0]}' of kernel '{self.func.name}' "
                                   f"overlap in memory and {what}; pass separate arrays")
            out.append(i if wi else j)
        return sorted(set(out))

    def time(self, *arrays, number: int | None = None, repeat: int = 5, min_repeat_ms: float = 50.0,
             flush_cache: bool = False) -> TimingResult:
        """Median/min/max/stdev seconds per call; calls run back to back inside C.
        With flush_cache, a buffer larger than the last-level cache is written
        before each single call. Arguments that overlap in memory where one is written
        are a MeasureError (the copy `__call__` makes would be timed too)."""
        ptrs, spans = self._pack(arrays)
        self._aliased_outputs(spans, copy=False)  # a copy would be timed too: overlap is an error here
        if not flush_cache:
            return c_loop_timing(self._lib, ptrs, number, repeat, min_repeat_ms)
        self._lib.tw_time(ptrs, 1)  # warm up: page faults, thread pool
        junk = np.empty(max(self.target.cache_bytes(3), 1 << 25) // 8 + 1024)
        samples = []
        for _ in range(repeat):
            junk.fill(1.0)
            samples.append(self._lib.tw_time(ptrs, 1))
        return TimingResult.of(samples, 1)

    def export(self, directory) -> Path:
        """Write <name>.c, <name>.so and <name>.h, usable without Python. Every
        user-given name written into them is sanitized (identifiers by codegen; the
        header's comment, include guard and the file names here), so no tensor or
        kernel name can close a comment or inject code into a program including it."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        name = _identifier(self._source.kernel_name)
        (d / f"{name}.c").write_text(self.source)
        shutil.copyfile(self.build_result.library, d / f"{name}.so")
        args = "\n".join(f" *   {_comment(b.name)}: {_comment(str(b.dtype))}[{', '.join(map(str, shape))}]"
                         for b, shape in zip(self.func.args, self.func.caller_shapes))
        guard = f"TILEWRIGHT_{name.upper()}_H"
        header = (f"/* Generated by tilewright. Arrays are dense, row-major.\n{args}\n"
                  f" * Build flags: {_comment(' '.join(self.build_result.flags))}\n */\n"
                  f"#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n"
                  f"{self._source.signature}\n"
                  f"int32_t tw_call(void **args);\ndouble tw_time(void **args, int32_t number);\n"
                  f"int32_t tw_set_num_threads(int32_t n);\n#endif\n")
        (d / f"{name}.h").write_text(header)
        return d


def _comment(text: str) -> str:
    """`text` safe inside a C block comment: no `*/`, newline, backslash or trigraph."""
    return re.sub(r"[^A-Za-z0-9_ .,:=+\-\[\]()]", "?", text).replace("??", "?")


MAX_FILE_STEM = 120  # bytes; file systems allow 255, and the header's guard adds a prefix


def _identifier(text: str) -> str:
    """`text` as a C identifier and file name: [A-Za-z0-9_] only, and short enough for any file system
    (a long name keeps its start and a hash of the whole)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text) or "kernel"
    if len(name) > MAX_FILE_STEM:
        name = name[:MAX_FILE_STEM - 17] + "_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return "k_" + name if name[0].isdigit() else name


def _stored_buffers(body) -> list:
    return [st.buffer for st in walk_stmt(body) if isinstance(st, Store)]
