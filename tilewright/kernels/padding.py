"""Padding to alignment (Bolt 3.2.3): a convolution whose input channels are not a multiple of
the vector lanes is computed on channels padded with zeros to the next multiple; the weight's
zero rows are prepared once with the other constants, the activation's copy is paid per call."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..targets import Target
from .problem import ConvProblem


def alignment(target: Target) -> int:
    return target.vector_lanes(4)


def pad_problem(problem: ConvProblem, target: Target) -> ConvProblem:
    """`problem` with IC rounded up to the target's fp32 vector lanes (itself when aligned)."""
    a = alignment(target)
    return dataclasses.replace(problem, IC=math.ceil(problem.IC / a) * a)


def padded_weight(w: np.ndarray, padded: ConvProblem) -> np.ndarray:
    """HWIO weight with zero input-channel rows up to padded.IC."""
    out = np.zeros(padded.weight_shape, np.float32)
    out[:, :, :w.shape[2], :] = w
    return out
