"""The hand-scheduled GPU GEMM of examples/03_gemm_on_gpu.py, for the tests: one schedule, tested
as the lesson teaches it."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "gemm_on_gpu", Path(__file__).resolve().parents[1] / "examples" / "03_gemm_on_gpu.py")
lesson = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lesson)


def gemm_schedule(m=64, n=None, k=None, **options):
    """(schedule, [A, B, C]) of the lesson's GEMM; options as `schedule_gemm`'s."""
    A, B, C = lesson.gemm(m, n, k)
    return lesson.schedule_gemm(A, B, C, **options), [A, B, C]
