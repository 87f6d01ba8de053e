"""ONNX's DFT and STFT as products with constant cosine / sine matrices: the transformed axis moved
last, the signal's real and imaginary parts each multiplied by [length, bins] tables, the parts
recombined, all in float64 and rounded once (a float32 product of a signal whose values reach 50
misses a near-zero output by more than the 1e-7 ONNX's cases check at). O(length * bins) per transform rather
than an FFT's O(length log length): the lengths models use these for (spectrogram frames) are short.
Forward, inverse, one-sided forward (rfft) and one-sided inverse (irfft); STFT frames the signal with
strided slices, windows each frame and takes its one-sided (or full) forward DFT."""

from __future__ import annotations

import numpy as np

MAX_LENGTH = 4096  # the tables are length x bins doubles each


def _tables(length: int, bins: int, inverse: bool, onesided_inverse: bool):
    """(cos, sin) as [inputs, outputs] float64 matrices, entry [n, k] = cos / sin(2 pi k n / length), the
    inverse's 1 / length (and the one-sided inverse's doubling of the bins it folds) included."""
    if onesided_inverse:  # inputs: the one-sided spectrum k < bins; outputs: n < length
        k, n = np.arange(bins)[:, None], np.arange(length)[None, :]
        weight = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0) / length
        angle = 2 * np.pi * k * n / length
        return np.cos(angle) * weight, np.sin(angle) * weight
    n, k = np.arange(length)[:, None], np.arange(bins)[None, :]
    angle = 2 * np.pi * k * n / length
    scale = 1 / length if inverse else 1.0
    return np.cos(angle) * scale, np.sin(angle) * scale


def _last(imp, x: str, axis: int) -> str:
    rank = len(imp.b.types[x].shape)
    if axis == rank - 1:
        return x
    dims = tuple(d for d in range(rank) if d != axis) + (axis,)
    return imp.emit("permute", [x], {"dims": dims})


def _back(imp, x: str, axis: int) -> str:
    rank = len(imp.b.types[x].shape)
    if axis == rank - 1:
        return x
    order = [d for d in range(rank) if d != axis] + [axis]
    return imp.emit("permute", [x], {"dims": tuple(order.index(d) for d in range(rank))})


def _fit(imp, x: str, length: int) -> str:
    """x's last axis cut or zero-padded to `length`."""
    shape = imp.b.types[x].shape
    if shape[-1] > length:
        return imp.emit("slice", [x], {"begin": (0,) * len(shape), "end": (*shape[:-1], length),
                                       "step": (1,) * len(shape)})
    if shape[-1] < length:
        return imp.emit("pad", [x], {"pads": (0,) * (2 * len(shape) - 1) + (length - shape[-1],), "value": 0.0})
    return x


def transform(imp, x: str, axis: int, length: int, inverse: bool, onesided: bool) -> str:
    """The DFT of x [..., c] (c = 1: real, 2: complex) along `axis` (not the last), as [..., bins, 2]
    (one-sided inverse: [..., length, 1])."""
    shape = imp.b.types[x].shape
    if length > MAX_LENGTH:
        raise imp.fail(f"a transform of length {length} (at most {MAX_LENGTH})")
    parts = []
    for c in range(shape[-1]):
        part = imp.emit("slice", [x], {"begin": (0,) * (len(shape) - 1) + (c,), "end": (*shape[:-1], c + 1),
                                       "step": (1,) * len(shape)})
        part = imp.emit("cast", [imp.emit("reshape", [part], {"shape": shape[:-1]})], {"dtype": "float64"})
        parts.append(_last(imp, part, axis))
    onesided_inverse = inverse and onesided
    bins = length // 2 + 1 if onesided and not inverse else length
    if onesided_inverse:
        parts = [_fit(imp, p, length // 2 + 1) for p in parts]
        cos, sin = _tables(length, length // 2 + 1, True, True)
    else:
        parts = [_fit(imp, p, length) for p in parts]
        cos, sin = _tables(length, bins, inverse, False)
    cos, sin = imp.b.constant(cos, "dft_cos", exact=True), imp.b.constant(sin, "dft_sin", exact=True)
    re = [imp.emit("matmul", [p, cos]) for p in parts]
    im = [imp.emit("matmul", [p, sin]) for p in parts]
    sign = 1 if inverse else -1
    # (a + ib)(cos + sign * i sin) = a cos - sign b sin + i (sign a sin + b cos)
    real = re[0] if len(parts) == 1 else imp.emit("sub" if sign == 1 else "add", [re[0], im[1]])
    dtype = imp.b.types[x].dtype
    if onesided_inverse:
        return _stack(imp, [_back(imp, real, axis)], dtype)
    imag = im[0] if sign == 1 else imp.emit("neg", [im[0]])
    if len(parts) == 2:
        imag = imp.emit("add", [imag, re[1]])
    return _stack(imp, [_back(imp, real, axis), _back(imp, imag, axis)], dtype)


def _stack(imp, parts, dtype: str) -> str:
    """The parts as the components of a new last axis, rounded to `dtype`."""
    shaped = [imp.emit("reshape", [p], {"shape": (*imp.b.types[p].shape, 1)}) for p in parts]
    axis = len(imp.b.types[shaped[0]].shape) - 1
    both = shaped[0] if len(shaped) == 1 else imp.emit("concat", shaped, {"axis": axis})
    return both if dtype == "float64" else imp.emit("cast", [both], {"dtype": dtype})


def _dft(imp, n, ins, a):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    rank = len(shape)
    if shape[-1] not in (1, 2):
        raise imp.fail(f"a last axis of {shape[-1]} (1: real, 2: complex)")
    if imp.opset >= 20:
        axis = int(np.asarray(imp.const(ins[2], "axis")).reshape(())) if len(ins) > 2 and ins[2] else -2
    else:
        axis = int(a.get("axis", 1))
    axis %= rank
    if axis == rank - 1:
        raise imp.fail("a transform along the real / imaginary axis")
    inverse, onesided = bool(a.get("inverse", 0)), bool(a.get("onesided", 0))
    if len(ins) > 1 and ins[1]:
        length = int(np.asarray(imp.const(ins[1], "dft_length")).reshape(()))
    else:
        length = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    if inverse and onesided and shape[-1] != 2:
        raise imp.fail("a one-sided inverse of a real spectrum (it takes complex input)")
    imp.env[n.output[0]] = transform(imp, x, axis, length, inverse, onesided)


def _stft(imp, n, ins, a):
    x = imp.value(ins[0])
    bsz, length, c = imp.b.types[x].shape
    step = int(np.asarray(imp.const(ins[1], "frame_step")).reshape(()))
    window = imp.value(ins[2]) if len(ins) > 2 and ins[2] else None
    if len(ins) > 3 and ins[3]:
        frame = int(np.asarray(imp.const(ins[3], "frame_length")).reshape(()))
    else:
        frame = imp.b.types[window].shape[0] if window else length
    frames = 1 + (length - frame) // step
    if frames < 1 or step < 1:
        raise imp.fail(f"frames of {frame} every {step} over a signal of {length}")
    pieces = [imp.emit("slice", [x], {"begin": (0, f * step, 0), "end": (bsz, f * step + frame, c),
                                      "step": (1, 1, 1)}) for f in range(frames)]
    pieces = [imp.emit("reshape", [p], {"shape": (bsz, 1, frame, c)}) for p in pieces]
    framed = pieces[0] if frames == 1 else imp.emit("concat", pieces, {"axis": 1})
    if window:
        framed = imp.emit("mul", [framed, imp.emit("reshape", [window], {"shape": (1, 1, frame, 1)})])
    imp.env[n.output[0]] = transform(imp, framed, 2, frame, False, bool(a.get("onesided", 1)))


DFT_HANDLERS = {"DFT": _dft, "STFT": _stft}

__all__ = ["DFT_HANDLERS", "MAX_LENGTH"]
