"""TILEWRIGHT_BUILD_CPUS: the tuner's compiles run on the CPUs it names, while the process (and the
runner that times kernels) keeps its own; a bad list is an error naming the variable."""

import dataclasses
import os
import stat

import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.config import build_cpus
from tilewright.errors import TilewrightError
from tilewright.runtime.measure import Measurer

needs_two = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                               reason="needs Linux affinity and two usable CPUs")


@needs_two
def test_compiles_run_on_the_build_cpus(tmp_path, monkeypatch):
    mine = sorted(os.sched_getaffinity(0))
    log = tmp_path / "cpus.txt"
    wrapper = tmp_path / "cc-wrapper"
    wrapper.write_text(f"#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status >> {log}\nexec cc \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TILEWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEWRIGHT_BUILD_CPUS", str(mine[-1]))
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] * 3.0, name="B")
    cpu = dataclasses.replace(tw.as_target("cpu"), compiler=str(wrapper))
    with Measurer([B], [A, B], cpu, backend_for(cpu), timeout=5.0, repeat=1, min_repeat_ms=1) as m:
        assert m.builder.workers == 1
        result = m.measure([tw.create_schedule(B)])[0]
    assert result.ok, result.error_msg
    seen = {line.split()[-1] for line in log.read_text().splitlines()}
    assert seen == {str(mine[-1])}
    assert sorted(os.sched_getaffinity(0)) == mine  # the calling thread kept its CPUs


@pytest.mark.parametrize("text", ["x", "3-", "-1", "0-100000"])
def test_a_bad_build_cpu_list_names_the_variable(monkeypatch, text):
    monkeypatch.setenv("TILEWRIGHT_BUILD_CPUS", text)
    with pytest.raises(TilewrightError, match="TILEWRIGHT_BUILD_CPUS=.*between 0 and"):
        build_cpus()


def test_unset_means_the_process_cores(monkeypatch):
    monkeypatch.delenv("TILEWRIGHT_BUILD_CPUS", raising=False)
    assert build_cpus() is None
