"""Keeping builds off the cores while a kernel is timed, between processes of one machine (a Ray node's
build workers and its runner actor): timing holds the machine's core lock exclusively, each build holds it
shared. A turnstile gives timing precedence: once a measurement asks, builds not yet started wait, so a
stream of builds cannot starve it. Waiting for the lock is queue time: a measurement's timeout starts after.
POSIX advisory locks (fcntl.flock) on a file in the temporary directory: released by the kernel when a
holder dies, so a killed build or actor never leaves the machine locked."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile


def _path(name: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"tilewright-cores-{os.getuid()}.{name}")


@contextlib.contextmanager
def _flock(name: str, mode: int):
    fd = os.open(_path(name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


@contextlib.contextmanager
def _through_turnstile(mode: int):
    """The core lock in `mode`, taken while holding the turnstile (so a waiting timing blocks new builds)."""
    with _flock("turnstile", fcntl.LOCK_EX):
        held = contextlib.ExitStack()
        held.enter_context(_flock("lock", mode))  # an exclusive one waits for the builds already running
    with held:
        yield


def timing_cores():
    """Held while a kernel is timed: no build runs on this machine meanwhile."""
    return _through_turnstile(fcntl.LOCK_EX)


def building_cores():
    """Held while a build compiles: it waits while a kernel is timed or waiting to be."""
    return _through_turnstile(fcntl.LOCK_SH)


__all__ = ["building_cores", "timing_cores"]
