"""Every failure of the compiler, the cache or the file system is a BuildError
naming the path and what to do; a damaged cached library is rebuilt, never
loaded again."""

import dataclasses
import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilewright as tw
from tilewright.build import cc
from tilewright.errors import BuildError, TilewrightError
from tilewright.targets import as_target

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def program(scale=2.0):
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] * scale, name="B")
    return A, B


def build_and_run(scale=2.0):
    A, B = program(scale)
    kernel = tw.build(tw.create_schedule(B), [A, B], target="cpu")
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    kernel(a, b)
    assert np.array_equal(b, a * scale)
    return kernel


def library(kernel):
    return kernel.build_result.library


def damage(path, data: bytes) -> None:
    """Replace the cached file as another process would (a new inode: this process
    still has the old library mapped, and writing that one in place would crash it)."""
    tmp = path.with_suffix(".damaged")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("kind", ["empty", "truncated", "not elf"])
def test_a_damaged_cached_library_is_rebuilt(cache, kind):
    path = library(build_and_run())
    data = path.read_bytes()
    damage(path, {"empty": b"", "truncated": data[: len(data) // 2], "not elf": b"#!/bin/sh\n" * 50}[kind])
    kernel = build_and_run()
    assert library(kernel) == path and path.read_bytes() == data and not kernel.build_result.cached


def test_a_library_that_fails_to_load_is_rebuilt_once(cache):
    """Whole-looking ELF that dlopen refuses (program headers zeroed): the loader
    deletes it and compiles it again. In a fresh process: this one has the path
    loaded already, and dlopen would hand back that handle."""
    path = library(build_and_run())
    data = bytearray(path.read_bytes())
    phoff = int.from_bytes(data[32:40], "little")
    phsize = int.from_bytes(data[54:56], "little") * int.from_bytes(data[56:58], "little")
    data[phoff:phoff + phsize] = bytes(phsize)
    damage(path, bytes(data))
    assert cc.elf_problem(path) is None  # the cheap check passes: only dlopen finds it
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from test_build_cache import build_and_run, library; "
            "k = build_and_run(); print(library(k), k.build_result.cached)")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         env={**os.environ, "TILEWRIGHT_CACHE_DIR": str(cache)}, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [str(path), "False"] and bytes(data) != path.read_bytes()


def test_a_compiler_that_writes_nothing_is_a_build_error(cache):
    target = dataclasses.replace(as_target("cpu"), compiler="true")
    A, B = program(3.0)
    with pytest.raises(BuildError, match="'true' exited 0.*TILEWRIGHT_CC"):
        tw.build(tw.create_schedule(B), [A, B], target=target)
    assert not list((cache / "kernels").glob("*.so"))  # nothing left to load later


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_an_unwritable_or_full_cache_is_a_build_error(cache, monkeypatch, code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(cache / "kernels" / "x.so"))

    monkeypatch.setattr(cc.tempfile, "mkstemp", fail)
    A, B = program(4.0)
    with pytest.raises(BuildError, match=f"{cache / 'kernels'}.*{os.strerror(code)}.*TILEWRIGHT_CACHE_DIR"):
        tw.build(tw.create_schedule(B), [A, B], target="cpu")


def test_a_cache_dir_that_cannot_be_created_names_it(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("in the way")
    monkeypatch.setenv("TILEWRIGHT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    A, B = program(5.0)
    with pytest.raises(TilewrightError, match=f"{tmp_path / 'file' / 'cache'}.*TILEWRIGHT_CACHE_DIR"):
        tw.build(tw.create_schedule(B), [A, B], target="cpu")
