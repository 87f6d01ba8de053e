"""The machine's core lock: a build never runs while a kernel is timed, and waiting timings go first."""

import threading
import time

from tilewright.runtime.core_lock import building_cores, timing_cores


def test_a_build_waits_while_a_kernel_is_timed():
    events = []
    timing = threading.Event()

    def time_kernel():
        with timing_cores():
            timing.set()
            events.append(("timing", time.monotonic()))
            time.sleep(0.3)
            events.append(("timed", time.monotonic()))

    t = threading.Thread(target=time_kernel)
    t.start()
    timing.wait(5)
    with building_cores():
        events.append(("build", time.monotonic()))
    t.join()
    assert [e for e, _ in events] == ["timing", "timed", "build"]


def test_a_timing_waits_for_running_builds_and_goes_before_new_ones():
    order = []
    building, release = threading.Event(), threading.Event()

    def build(name, hold):
        with building_cores():
            building.set()
            order.append(name)
            time.sleep(hold)

    def time_kernel():
        with timing_cores():
            order.append("timing")
            release.wait(5)

    first = threading.Thread(target=build, args=("build 1", 0.4))
    first.start()
    building.wait(5)
    timer = threading.Thread(target=time_kernel)
    timer.start()
    time.sleep(0.1)  # the timing is waiting for build 1 now
    late = threading.Thread(target=build, args=("build 2", 0.0))
    late.start()
    time.sleep(0.1)
    assert order == ["build 1"]  # build 2 queues behind the waiting timing
    first.join()
    time.sleep(0.2)
    assert order == ["build 1", "timing"]  # build 2 still waits: the timing holds the cores
    release.set()
    timer.join(5)
    late.join(5)
    assert order == ["build 1", "timing", "build 2"]
