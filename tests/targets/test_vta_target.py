"""`Target("vta")`: the configuration as data, its options and its fingerprint."""

import pytest

import tilewright as tw
from tilewright.errors import TilewrightError
from tilewright.targets.vta import VTAConfig


def test_default_is_vtas_published_configuration():
    t = tw.Target("vta")
    cfg = t.vta
    assert t.kind == "vta" and not t.is_gpu
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 16, 16)
    assert (cfg.inp_buffer_bytes, cfg.wgt_buffer_bytes, cfg.acc_buffer_bytes, cfg.uop_buffer_bytes) == (
        32768, 262144, 131072, 32768)
    assert cfg.peak_gops == pytest.approx(102.4)
    assert "simulated" in str(t)


def test_options_and_fingerprints():
    small = tw.Target("vta -block=8x8x8 -wgt_buffer=131072 -bus_bytes=16")
    assert (small.vta.batch, small.vta.block_in, small.vta.wgt_buffer_bytes, small.vta.bus_bytes) == (8, 8, 131072, 16)
    assert small.key != tw.Target("vta").key and tw.Target("vta").key == tw.Target("vta").key


@pytest.mark.parametrize("text, message", [
    ("vta -block=8x8", "expected BATCHxINxOUT"), ("vta -cores=2", "valid for vta"),
    ("vta -block=8x12x8", "power of two"), ("vta -acc_buffer=16", "smaller than one"),
])
def test_bad_options_are_named(text, message):
    with pytest.raises(TilewrightError, match=message):
        tw.Target(text)


def test_configuration_checks():
    with pytest.raises(TilewrightError, match="int8 inputs"):
        VTAConfig(inp_bits=4)
    with pytest.raises(TilewrightError, match="does not fit in 32 bits"):
        VTAConfig(acc_buffer_bytes=1 << 24, wgt_buffer_bytes=1 << 24)
    with pytest.raises(TilewrightError, match="needs its configuration"):
        tw.Target(kind="vta")
