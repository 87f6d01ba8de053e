"""Vector exp/erf/tanh/sigmoid: glibc's libmvec where the compiler links it, one libm call per
lane where it does not; both agree with float64 NumPy to a few float32 ulps, special values
included (NaN, infinities, zero)."""

import math
import sys

import numpy as np
import pytest

import tilewright as tw
from tilewright.build.vector_math import libmvec_flags
from tilewright.codegen.vector_math import mvec_symbol

N = 4096
CASES = {
    "erf": (tw.erf, np.vectorize(math.erf)),
    "exp": (tw.exp, np.exp),
    "tanh": (tw.tanh, np.tanh),
    "sigmoid": (tw.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
}


def _kernel(fn, lanes: int):
    x = tw.placeholder((N,), "float32", name="x")
    y = tw.compute((N,), lambda i: fn(x[i]), name="y")
    s = tw.create_schedule(y)
    _, inner = s[y].split(y.op.axis[0], factor=lanes)
    s[y].vectorize(inner)
    return tw.build(s, [x, y], target="cpu")


def _inputs():
    a = (np.random.default_rng(0).standard_normal(N) * 4).astype(np.float32)
    a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0]
    return a


@pytest.fixture(params=["libmvec", "per-lane"])
def mode(request, monkeypatch):
    if request.param == "libmvec" and not libmvec_flags(tw.as_target("cpu").compiler)[0]:
        pytest.skip("the C compiler does not link glibc's libmvec (glibc < 2.35 or not glibc)")
    if request.param == "per-lane":
        monkeypatch.setattr(sys.modules["tilewright.build.cc"], "libmvec_flags", lambda compiler: ((), ()))
    return request.param


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_math_matches_float64(name, mode):
    fn, ref = CASES[name]
    lanes = tw.as_target("cpu").vector_lanes(4)
    kernel = _kernel(fn, lanes)
    a = _inputs()
    out = np.empty_like(a)
    kernel(a, out)
    with np.errstate(over="ignore"):
        want = ref(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(out[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(out[finite], want[finite], rtol=4e-7, atol=1e-37)


def test_symbols_follow_the_vector_abi():
    assert mvec_symbol("erf", 32, 8) == ("_ZGVdN8v_erff", "__AVX2__")
    assert mvec_symbol("exp", 64, 8) == ("_ZGVeN8v_exp", "__AVX512F__")
    assert mvec_symbol("exp", 32, 4) == ("_ZGVbN4v_expf", "__SSE2__")
    assert mvec_symbol("pow", 32, 8) is None and mvec_symbol("exp", 32, 2) is None


def test_a_compiler_that_cannot_link_libmvec_gets_the_per_lane_code():
    assert libmvec_flags("/bin/false") == ((), ())
