"""tw.tune / tw.build on target hls: the model-driven search, records a later build replays, YOLO layers
(scaled) C-simulated after the search, and the errors of what the target does not take."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.bench.hls_yolo import conv_tensors, csim_check, yolo_layers
from tilewright.errors import TilewrightError


def test_tune_then_build_from_records(tmp_path):
    a = tw.te.placeholder((32, 48), "float32", name="A")
    b = tw.te.placeholder((48, 16), "float32", name="B")
    c = tw.ops.matmul(a, b)
    res = tw.tune([a, b, c], target="hls -device=zu9eg", trials=150, records=tmp_path / "r.db")
    assert res.cycles * 5 < res.default_cycles and "no synthesis" in res.report()
    with tw.records(tmp_path / "r.db"):
        kernel = tw.build([a, b, c], target="hls -device=zu9eg")
    assert kernel.design == res.design
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((32, 48)).astype("float32"), rng.standard_normal((48, 16)).astype("float32")
    out = np.zeros((32, 16), "float32")
    kernel(x, y, out)
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["yolo_conv1", "yolo_conv8", "yolo_conv22"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_yolo_layers_scaled_csim(name, dtype):
    spec = dict(yolo_layers())[name]
    row = csim_check(spec, dtype, scale=8, trials=60, target=tw.Target("hls"))
    assert row["ok"], row
    assert row["compile_s"] < 5


def test_hls_takes_operators_not_schedules():
    x, w, y = conv_tensors(dict(yolo_layers())["yolo_conv8"], "float32", scale=8)
    s = tw.create_schedule(y)
    with pytest.raises(TilewrightError, match="target hls compiles whole operators"):
        tw.build(s, [x, w, y], target="hls")
    with pytest.raises(TilewrightError, match="unknown option"):
        tw.tune([x, w, y], target="hls", trials=4, records=None, timeout=3)
    with pytest.raises(TilewrightError, match="pass exactly those inputs"):
        tw.build([w, y], target="hls")
