"""The correctness check passes nothing it cannot vouch for: NaN and infinity
positions compared exactly, inputs drawn from each operator's domain, an
all-NaN reference reported before tuning, a too-large program refused before
allocating."""

import inspect
import os

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import TilewrightError
from tilewright.runtime.inputs import check_fits_in_memory, positive_inputs
from tilewright.runtime.measure import Measurer
from tilewright.runtime.runner import check_outputs as check
from tilewright.targets import as_target


def measurer(outs, args, **kw):
    tgt = as_target("cpu")
    extra = []
    if "backend" in inspect.signature(Measurer).parameters:
        from tilewright.backends import backend_for

        extra = [backend_for(tgt)]
    return Measurer(outs, args, tgt, *extra, **kw)


def test_nan_positions_must_match_the_reference():
    want = np.array([1.0, np.nan, 3.0], np.float32)
    assert check([np.array([1.0, 2.0, 3.0], np.float32)], [want], [1e-4]) is not None  # a number for a NaN
    assert check([np.array([np.nan, np.nan, 3.0], np.float32)], [want], [1e-4]) is not None  # a NaN for a number
    assert check([np.array([1.0, np.nan, 3.0], np.float32)], [want], [1e-4]) is None


def test_finite_values_are_checked_beside_a_nan():
    want = np.array([1.0, np.nan, 3.0], np.float32)
    assert "max abs error" in check([np.array([1.0, np.nan, 30.0], np.float32)], [want], [1e-4])


def test_infinities_must_match_in_position_and_sign():
    want = np.array([np.inf, -np.inf, 2.0])
    assert check([np.array([-np.inf, -np.inf, 2.0])], [want], [1e-9]) is not None
    assert check([np.array([np.inf, -np.inf, np.inf])], [want], [1e-9]) is not None
    assert check([np.array([np.inf, -np.inf, 2.0])], [want], [1e-9]) is None


def test_inputs_feeding_a_restricted_domain_are_positive():
    A = tw.placeholder((8,), "float32", name="A")
    B = tw.placeholder((8,), "float32", name="B")
    C = tw.placeholder((8,), "float32", name="C")
    D = tw.placeholder((8,), "float32", name="D")
    E = tw.placeholder((8,), "float32", name="E")
    S = tw.compute((8,), lambda i: B[i] + C[i], name="S")
    out = tw.compute((8,), lambda i: tw.log(A[i]) + tw.sqrt(S[i]) + tw.pow(D[i], E[i]) + E[i], name="out")
    assert positive_inputs([out]) == {id(A), id(B), id(C), id(D)}
    F = tw.placeholder((8,), "float32", name="F")
    q = tw.compute((8,), lambda i: A[i] / F[i], name="q")
    assert positive_inputs([q]) == {id(F)}


def test_the_measurer_draws_log_inputs_from_its_domain():
    A = tw.placeholder((256,), "float32", name="A")
    B = tw.compute((256,), lambda i: tw.log(A[i]), name="B")
    with measurer([B], [A, B]) as m:
        a = np.load(os.path.join(m._dir.name, "arg0.npy"))
        ref = np.load(os.path.join(m._dir.name, "ref0.npy"))
        assert (a > 0).all() and np.isfinite(ref).all()
        result = m.measure([tw.create_schedule(B)])[0]
    assert result.ok, result.error_msg


def test_an_all_nan_reference_is_an_unusable_test_input():
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: tw.log(A[i] - 2.0), name="logB")  # NaN on any positive input below 2
    with pytest.raises(TilewrightError, match="'logB'.*unusable.*domain"):
        measurer([B], [A, B])


def test_a_program_too_large_for_memory_is_refused_before_allocating():
    A = tw.placeholder((1_000_000, 1_000_000), "float32", name="huge")
    B = tw.compute((1_000_000, 1_000_000), lambda i, j: A[i, j] * 2.0, name="B")
    with pytest.raises(TilewrightError, match="'huge'.*GiB"):
        measurer([B], [A, B])
    small = tw.placeholder((1024,), "float32", name="small")
    out = tw.compute((1024,), lambda i: small[i] + 1.0, name="out")
    check_fits_in_memory([out], [small, out], available=1 << 30)
    with pytest.raises(TilewrightError, match="small"):
        check_fits_in_memory([out], [small, out], available=1000)
