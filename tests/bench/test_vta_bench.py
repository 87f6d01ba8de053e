"""The VTA benchmark drivers, reduced: a layer row (exactness, 1 against 2 virtual threads, tuning) and the
whole int8 ResNet-18 with offloaded convolutions, bit-exact end to end."""

from tilewright.bench import vta_network, vta_resnet
from tilewright.lower.vta_conv import ConvShape
from tilewright.targets.vta import VTAConfig


def test_layer_row_is_exact_and_threads_help():
    shape = ConvShape(1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, name="small")
    row = vta_resnet.run_layer(shape, VTAConfig(), trials=4)
    assert all(row[k]["exact"] for k in ("vt1", "vt2", "tuned"))
    assert row["vt2"]["cycles"] < row["vt1"]["cycles"]
    assert row["tuned"]["cycles"] <= row["vt2"]["cycles"]  # the search starts from the default tiling
    assert "| small |" in vta_resnet.table([row], {"small": 1})


def test_resnet18_with_offloaded_convs_is_bit_exact_end_to_end():
    summary = vta_network.run(seed=1)
    assert summary["exact"]
    devices = [r["device"] for r in summary["rows"]]
    assert devices.count("vta") == 19 and devices[0] == "cpu"
    assert 0 < summary["last_block_zero_fraction"] < 0.9 and summary["last_block_saturated_fraction"] < 0.9
    assert summary["vta_cycles"] == sum(r["cycles"] for r in summary["rows"] if r["device"] == "vta")
