"""The untuned GPU schedule until the GPU schedule space exists (issue 16):
every stage's spatial loops fused into one, split into blocks of up to 256
threads, the outer part bound to blockIdx.x and the inner to threadIdx.x; its
reduce loops run serially in each thread. Correct for any program, not fast:
a starting point, and what `tw.build(tensors, target="opencl")` uses."""

from __future__ import annotations

from ..errors import ScheduleError
from ..schedule import create_schedule, thread_axis
from ..schedule.stage import AttachKind
from ..targets import Target

THREADS = 256


def naive_gpu_schedule(outputs, target: Target):
    s = create_schedule(outputs)
    for st in s.stages:
        if st.attach is not AttachKind.INLINE:
            bind_one_thread_per_element(st, target)
    return s


def bind_one_thread_per_element(st, target: Target) -> None:
    """`st`'s spatial loops fused, split into blocks of up to THREADS threads, bound to blockIdx.x and
    threadIdx.x."""
    axes = list(st.op.axis)
    if not axes:
        raise ScheduleError(f"stage '{st.name}' has no spatial loop to spread over GPU threads "
                            f"(a 0-d output); give it shape (1,)")
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    block, thread = st.split(fused, factor=min(THREADS, target.gpu.max_threads_per_block, fused.extent))
    st.bind(block, thread_axis("blockIdx.x"))
    st.bind(thread, thread_axis("threadIdx.x"))


__all__ = ["bind_one_thread_per_element", "naive_gpu_schedule"]
