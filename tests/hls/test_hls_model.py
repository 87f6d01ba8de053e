"""The FPGA model: initiation intervals from bank conflicts and the accumulator recurrence, resources
and their budget, the closed form against the event-level simulation, and FPGA'15's own point."""

import pytest

import tilewright as tw
from tilewright.bench.hls_baseline import fpga15_point
from tilewright.errors import ScheduleError
from tilewright.lower.hls_design import HLSDesign, initiation_interval, macs_per_cycle_peak
from tilewright.lower.hls_form import hls_form
from tilewright.runtime.hls_des import simulate
from tilewright.runtime.hls_model import bram18, estimate
from tilewright.space.hls import design_of
from tilewright.targets.hls import DEVICES

VU9P = DEVICES["vu9p"]


def _conv(dtype="float32", m=32, n=16, size=28, k=3):
    x = tw.te.placeholder((1, n, size, size), dtype, name="x")
    w = tw.te.placeholder((m, n, k, k), dtype, name="w")
    return hls_form(tw.ops.conv2d(x, w, padding=1, out_dtype=None if dtype == "float32" else "int32"))


def _axes(f, **values):
    return {n: values.get(n, 1) for n, _ in f.axes}


def test_bank_conflicts_and_recurrence_set_the_ii():
    f = _conv()
    tile = _axes(f, o=8, h=7, w=28, rc=4, rh=3, rw=3)
    unroll = _axes(f, o=8, rc=4)
    full = design_of(f, tile, unroll)
    assert initiation_interval(f, full)[0] == 1
    starved = HLSDesign(full.tile, full.unroll, (1, 1, full.partition[2]))
    ii, why = initiation_interval(f, starved)
    assert ii == 16 and why["b"] == 16  # 32 weights a cycle from one dual-ported bank
    # a float accumulator updated every cycle waits for the adder: one spatial iteration per tile
    tiny = design_of(f, _axes(f, o=8, rc=4, rh=3, rw=3), _axes(f, o=8))
    assert initiation_interval(f, tiny)[1]["recurrence"] == 5
    assert initiation_interval(_conv("int8"), design_of(_conv("int8"), _axes(f, o=8, rc=4), _axes(f, o=8)))[0] == 1


def test_resources_and_budget():
    f = _conv()
    d = design_of(f, _axes(f, o=32, h=28, w=28, rc=16, rh=3, rw=3), _axes(f, o=32, rc=16, rh=3))
    with pytest.raises(ScheduleError, match=r"does not fit vu9p: DSP 7680 of 6840 \(840 over\)"):
        estimate(f, d, VU9P)
    fine = estimate(_conv("int8"), design_of(_conv("int8"), dict(d.tile), dict(d.unroll)), VU9P)
    assert fine.dsp == 768  # int8 packs two MACs per DSP48E2
    assert bram18(1024, 32) == 2 and bram18(16, 32) == 0 and bram18(4096, 8, banks=4) == 4


@pytest.mark.parametrize("spec", [dict(o=8, h=7, w=28, rc=4, rh=3, rw=3), dict(o=32, h=28, w=28, rc=16, rh=3, rw=3),
                                  dict(o=4, h=1, w=28, rc=1, rh=1, rw=1)])
@pytest.mark.parametrize("double", [False, True])
def test_closed_form_within_ten_percent_of_event_simulation(spec, double):
    f = _conv()
    unroll = {k: (v if k in ("o", "rc") else 1) for k, v in spec.items()}
    unroll["o"] = min(unroll["o"], 8)
    d = design_of(f, _axes(f, **spec), _axes(f, **unroll), beat=8, double_buffer=double)
    e = estimate(f, d, VU9P)
    des = simulate(f, d, VU9P)
    assert abs(e.cycles - des) <= 0.10 * des, (str(d), e.cycles, des)
    assert e.cycles >= f.macs / macs_per_cycle_peak(d)  # no faster than its PE array allows


def test_fpga15_point_within_ten_percent_of_published():
    point = fpga15_point(DEVICES["vc707"])
    assert abs(point["gflops"] / 61.62 - 1) < 0.10
    assert all(layer["dsp"] == 64 * 7 * 5 for layer in point["layers"])


def test_an_ii_the_design_cannot_meet_is_an_error():
    f = _conv()
    d = design_of(f, _axes(f, o=8, h=7, w=28, rc=4, rh=3, rw=3), _axes(f, o=8, rc=4))
    estimate(f, HLSDesign(d.tile, d.unroll, d.partition, ii=1), VU9P)
    with pytest.raises(ScheduleError, match=r"II 1 was asked for but the design cannot meet it "
                                            r"\(a needs II 2, b needs II 16\)"):
        estimate(f, HLSDesign(d.tile, d.unroll, (1, 1, d.partition[2]), ii=1), VU9P)
