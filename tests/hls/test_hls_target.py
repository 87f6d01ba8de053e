"""Target("hls ..."): the FPGA parts as data, custom facts, and the errors of what is not one."""

import pytest

import tilewright as tw
from tilewright.errors import TilewrightError
from tilewright.targets.hls import DEVICES, FPGADevice


def test_presets_and_custom_facts():
    t = tw.Target("hls")
    assert t.kind == "hls" and t.hls is DEVICES["vu9p"] and t.hls.dsp == 6840 and t.hls.bram36 == 2160
    small = tw.Target("hls -device=zu9eg")
    assert small.hls.dsp == 2520 and small.hls.uram == 0 and small.key != t.key
    custom = tw.Target("hls -device=vu9p -dsp=4000 -clock_mhz=300")
    assert custom.hls.dsp == 4000 and custom.hls.clock_mhz == 300.0 and custom.hls.name == "vu9p-custom"
    assert "C simulation" in str(t)


def test_dsp_per_mac_by_dtype():
    vu9p, vc707 = DEVICES["vu9p"], DEVICES["vc707"]
    assert vu9p.dsp_per_mac("float32") == 5 and vu9p.dsp_per_mac("int8") == 0.5 and vc707.dsp_per_mac("int8") == 1
    with pytest.raises(TilewrightError, match="no DSP mapping for float64"):
        vu9p.dsp_per_mac("float64")


@pytest.mark.parametrize("text, match", [("hls -device=stratix", "unknown FPGA device 'stratix'"),
                                         ("hls -dsp=many", "-dsp must be a number"),
                                         ("hls -lanes=4", "unknown target option '-lanes=4'")])
def test_bad_target_strings(text, match):
    with pytest.raises(TilewrightError, match=match):
        tw.Target(text)


def test_bad_device_facts():
    with pytest.raises(TilewrightError, match="FPGADevice.dsp must be a positive integer"):
        FPGADevice("x", "x", dsp=0, bram36=1, uram=0, luts=1, clock_mhz=100.0, ddr_gbps=1.0)
    with pytest.raises(TilewrightError, match="needs its FPGA's facts"):
        tw.Target(kind="hls")
