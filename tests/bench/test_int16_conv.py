"""The int16 convolution driver, reduced to a small layer: both sides bit-exact against the
reference (checked inside), the fused side tensorized with vpmaddwd's channel pairs, the plain one
not, both timed."""

import pytest
from synthetic_targets import AVX2, host_runs

from tilewright.bench import int16_conv

pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")


def test_layer_row():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    case = {"name": "small", "in_channels": 6, "out_channels": 16, "height": 9, "width": 9, "kernel": 3,
            "stride": 1, "padding": 1, "out_height": 9, "out_width": 9}
    row = int16_conv.run_layer(case, AVX2, trials=0, rounds=1)
    assert (row["fused_uses"], row["plain_uses"]) == ("x86.dot_8x2_s16", "plain")
    assert row["macs"] == 16 * 6 * 9 * 81 and row["speedup"] > 0
    from tilewright.bench.provenance import provenance

    doc = {"threads": 2, "isa": "avx2", "trials": 0, "rows": [row], "geomean": row["speedup"],
           "provenance": provenance(threads=2)}
    assert "| small |" in int16_conv.markdown(doc)


def test_the_yolo_layers_are_the_suites():
    assert [c["name"] for c in int16_conv.yolo_layers({"yolo_conv8"})] == ["yolo_conv8"]
    assert len(int16_conv.yolo_layers()) == 15
