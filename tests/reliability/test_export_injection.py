"""An exported kernel's header and source carry no user text that C could run:
hostile tensor and kernel names are compiled into a program including the header,
and nothing of theirs runs."""

import shutil
import subprocess

import numpy as np
import pytest

import tilewright as tw

INJECT = 'x */ __attribute__((constructor)) static void pwn(void) { puts("PWNED"); } /*'
NAMES = [INJECT, "y\n#define main nope\n", "z */ int pwned = 1; /* \\", "w ??/ */ /*"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs the system C compiler `cc`")
def test_hostile_names_in_an_exported_header_inject_nothing(tmp_path):
    A = tw.placeholder((4,), "float32", name=NAMES[0])
    B = tw.placeholder((4,), "float32", name=NAMES[1])
    C = tw.compute((4,), lambda i: A[i] + B[i], name=NAMES[2])
    kernel = tw.build(tw.create_schedule(C), [A, B, C], target="cpu", name=NAMES[3])
    a, b, c = np.ones(4, np.float32), np.full(4, 2.0, np.float32), np.zeros(4, np.float32)
    kernel(a, b, c)
    assert (c == 3.0).all()
    out = kernel.export(tmp_path / "export")
    headers = list(out.glob("*.h"))
    assert len(headers) == 1 and headers[0].parent == out  # no name escapes the directory
    text = headers[0].read_text()
    assert 'puts("PWNED")' not in text
    main = tmp_path / "main.c"
    main.write_text(f'#include <stdio.h>\n#include "{headers[0].name}"\nint pwned_probe(void);\n'
                    'int main(void) { puts("main ran"); return 0; }\n')
    exe = tmp_path / "main"
    lib = headers[0].with_suffix(".so")
    proc = subprocess.run(["cc", "-I", str(out), str(main), str(lib), f"-Wl,-rpath,{out}", "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stdout == "main ran\n"  # the constructor did not run
    # every comment in the header is closed once, where the header closes it
    assert text.count("/*") == 1 and text.count("*/") == 1
    for src in out.glob("*.c"):
        assert 'puts("PWNED")' not in src.read_text()
