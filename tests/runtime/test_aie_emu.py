"""aie_emu.h against the documented examples of the intrinsics (UG1079 "MAC on 16x16 bits") and
the accumulator / srs semantics, compiled with the host compiler."""

import subprocess

import pytest

from tilewright.config import c_compiler
from tilewright.runtime.aie_kernel import HEADER

PROGRAM = r"""
#include "aie_emu.h"
#include <stdio.h>
int main(void) {
    v64int16 x; for (int i = 0; i < 64; i++) x.e[i] = i;
    v16int16 z; for (int i = 0; i < 16; i++) z.e[i] = 0;
    z.e[0] = 1; z.e[1] = 1000;
    /* UG1079: offsets 0x24 pick words 4 (elements 8, 9) for the even lane, 2 + 4 + 1 = 7 (14, 15) for the odd */
    v16acc48 a = mul16(x, 0, 0x24, 0, 0x3210, z, 0, 0, 0, 1);
    printf("%lld %lld\n", (long long)a.e[0], (long long)a.e[1]);
    /* xsquare 0x2103: the even lane's columns read f[3], f[0]; the odd lane's f[1], f[2] */
    a = mul16(x, 0, 0, 0, 0x2103, z, 0, 0, 0, 1);
    printf("%lld %lld\n", (long long)a.e[0], (long long)a.e[1]);
    /* a sliding window: lane i = x[i] + 1000 x[i + 1] */
    a = mul16(x, 0, 0x03020100, 0x07060504, 0x2110, z, 0, 0, 0, 1);
    printf("%lld %lld\n", (long long)a.e[7], (long long)a.e[15]);
    v32int32 w; for (int i = 0; i < 32; i++) w.e[i] = 3 * i;
    v8int32 c; for (int i = 0; i < 8; i++) c.e[i] = i + 1;
    v8acc80 b = lmul8(w, 5, 0x76543210, c, 2, 0);
    printf("%lld\n", (long long)b.e[7]);
    /* srs: shift with rounding, then saturation */
    v16acc48 s = null_v16acc48(); s.e[0] = 5; s.e[1] = -5; s.e[2] = (int64_t)1 << 40;
    set_rnd(rnd_pos_inf); v16int16 r = srs(s, 1);
    printf("%d %d %d\n", r.e[0], r.e[1], r.e[2]);
    set_rnd(rnd_floor); r = srs(s, 1);
    printf("%d %d\n", r.e[0], r.e[1]);
    /* a 48-bit lane wraps as the hardware's would, and the emulation counts it */
    v16acc48 big = null_v16acc48(); big.e[0] = ((int64_t)1 << 47) - 1;
    v16int16 one; for (int i = 0; i < 16; i++) one.e[i] = 1;
    big = mac16(big, x, 0, 0x03020100, 0x07060504, 0x2110, one, 0, 0, 0, 0);
    long long cnt[6]; aie_read_counters(cnt);
    printf("%lld %lld\n", (long long)big.e[0], cnt[5]);
    int32_t mem[16] __attribute__((aligned(32)));
    for (int i = 0; i < 16; i++) mem[i] = i;
    v8int32 ok = load_v8int32(mem); v8int32 bad = load_v8int32(mem + 2);
    aie_read_counters(cnt);
    printf("%d %d %lld\n", ok.e[1], bad.e[0], cnt[4]);
    return 0;
}
"""


def test_documented_lane_addressing_and_srs(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "t"
    try:
        subprocess.run([c_compiler(), "-std=gnu11", "-I", str(HEADER.parent), str(src), "-o", str(exe)],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"aie_emu.h does not compile: {getattr(exc, 'stderr', exc)}")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == f"{8 + 1000 * 9} {14 + 1000 * 15}"
    assert out[1] == f"{3 + 1000 * 0} {1 + 1000 * 2}"
    assert out[2] == f"{7 + 1000 * 8} {15 + 1000 * 16}"
    assert out[3] == str(3 * 12 * 3)  # lane 7: x[5 + 7] * z[2]
    assert out[4] == f"3 -2 {2 ** 15 - 1}"
    assert out[5] == "2 -3"
    wrapped = (2 ** 47 - 1) + 0 + 1 - 2 ** 48  # x[0] + x[1] past the top of a 48-bit lane
    assert out[6] == f"{wrapped} 1"
    assert out[7] == "1 2 1"
