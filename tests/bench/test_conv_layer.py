"""The suite benchmark's conv layer compiled as a one-layer model: the Winograd rule's choice, the
compiled layer and PyTorch's prepacked path all compute the suite's convolution."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_targets import AVX2

from tilewright.bench import flextensor
from tilewright.bench.conv_layer import compiled_layer, conv_graph, torch_prepacked, winograd_takes
from tilewright.bench.flextensor import _winograd_sides, run_case
from tilewright.graph.reference import run_reference
from tilewright.records import Records
from tilewright.targets import as_target
from tilewright.workloads import baselines as torch_baselines


def case(stride=1, channels=32, size=8):
    return {"name": f"c{channels}_s{stride}", "batch": 1, "in_channels": channels, "height": size, "width": size,
            "out_channels": channels, "kernel": 3, "stride": stride, "padding": 1, "dilation": 1, "groups": 1}


def conv_reference(c, x, w):
    return run_reference(conv_graph(c, w), [x])[0]


def arrays(c, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c["in_channels"], c["height"], c["width"])).astype(np.float32)
    w = rng.standard_normal((c["out_channels"], c["in_channels"], 3, 3)).astype(np.float32)
    return x, w


def test_the_winograd_rule_decides_as_the_compiler_does():
    x, w = arrays(case())
    assert winograd_takes(case(), w, AVX2)
    assert not winograd_takes(case(stride=2), w, AVX2)
    x16, w16 = arrays(case(channels=16))
    assert not winograd_takes(case(channels=16), w16, AVX2)  # below the channel threshold


def test_compiled_layer_and_prepacked_torch_compute_the_convolution(tmp_path):
    c = case(size=14)  # 14x14: a partial last tile, cropped
    x, w = arrays(c)
    want = conv_reference(c, x, w)
    layer = compiled_layer(c, w, "cpu -isa=avx2", 0, Records(tmp_path / "r.db"))
    assert any(n.op == "winograd_output" for s in layer.steps for n in s.group.nodes)
    np.testing.assert_allclose(layer(x), want, rtol=1e-4, atol=1e-4)
    pytest.importorskip("torch")
    np.testing.assert_allclose(torch_prepacked(c, w, x)().numpy(), want, rtol=1e-4, atol=1e-4)


def test_winograd_sides_check_the_layer_and_add_the_prepacked_baseline(tmp_path):
    pytest.importorskip("torch")
    c = case()
    x, w = arrays(c)
    want = conv_reference(c, x, w)
    baselines, host, notes = {}, as_target("cpu -isa=avx2"), {}
    sides = _winograd_sides("C2D", c, [x, w], want, host, 0, Records(tmp_path / "r.db"), baselines, 0, notes)
    # untuned: the default layer is the one timed, once
    assert set(sides) == {"winograd"} and set(baselines) == {"torch:prepacked"}
    assert all(t() > 0 for t in sides.values())
    assert 0 < notes["winograd_max_rel_error"] <= 1e-4 and "winograd_tuning_s" not in notes
    with pytest.raises(Exception, match="Winograd.*disagrees with the reference"):
        _winograd_sides("C2D", c, [x, w], want + 1.0, host, 0, Records(tmp_path / "r.db"), {}, 0)
    assert _winograd_sides("C2D", case(stride=2), [x, w], want, host, 0, Records(tmp_path / "r.db"), {}, 0) == {}


def test_a_winograd_row_stores_the_winograd_layers_error_and_the_direct_time(tmp_path, monkeypatch):
    """The row reports the Winograd layer (made faster here, so it is the one reported): its error is the
    layer's own, not the direct kernel's, and the direct kernel's time and error stay beside it."""
    pytest.importorskip("torch")
    c = case()
    c["name"] = "tiny"
    monkeypatch.setattr(flextensor, "suite_case", lambda op, name: dict(c))
    monkeypatch.setattr(torch_baselines, "suite_case", lambda op, name: dict(c))
    monkeypatch.setattr(flextensor, "suite_program", lambda op, name: _tiny_program(c))
    monkeypatch.setattr(flextensor, "alternating_medians",
                        lambda sides: {n: (0.5e-3 if n == "winograd" else 1e-3) for n in sides})
    r = run_case("C2D", "tiny", 0, 1, Records(tmp_path / "r.db"), isa="avx2")
    assert r.method == "winograd" and r.tilewright_s == r.winograd_s == 0.5e-3 and r.direct_s == 1e-3
    assert r.max_rel_error == r.winograd_max_rel_error != r.direct_max_rel_error
    assert "torch:prepacked" in r.baselines and r.speedup == pytest.approx(2 * r.direct_speedup)


def _tiny_program(c):
    from tilewright import ops, te

    x = te.placeholder((1, c["in_channels"], c["height"], c["width"]), "float32", name="x")
    w = te.placeholder((c["out_channels"], c["in_channels"], 3, 3), "float32", name="w")
    return [x, w, ops.conv2d(x, w, stride=c["stride"], padding=c["padding"], dilation=1, groups=1)]
