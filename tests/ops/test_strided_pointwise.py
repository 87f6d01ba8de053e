"""A strided 1x1 convolution reads every stride-th element: its input is taken into
its own stage (`<name>_stride`, which the schedule copies once or inlines) and the
contraction runs at stride 1; results match PyTorch in both layouts and for 1-3 d."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilewright as tw
from tilewright.te.program import collect_program


@pytest.mark.parametrize("nsp,stride,channels_last", [(2, 2, False), (2, (2, 3), True), (1, 2, False),
                                                      (3, 2, False), (2, 2, True)])
def test_strided_pointwise_conv_subsamples_once(nsp, stride, channels_last):
    sizes = (9, 11, 7)[:nsp]
    x_shape = (1, *sizes, 6) if channels_last else (1, 6, *sizes)
    w_shape = (*([1] * nsp), 6, 5) if channels_last else (5, 6, *([1] * nsp))
    x = tw.placeholder(x_shape, "float32", name="x")
    w = tw.placeholder(w_shape, "float32", name="w")
    conv = {1: tw.ops.conv1d, 2: tw.ops.conv2d, 3: tw.ops.conv3d}[nsp]
    kwargs = {"layout": "NHWC"} if channels_last else {}
    y = conv(x, w, stride=stride, **kwargs)
    assert "conv" + f"{nsp}d_stride" in [t.name for t in collect_program([y]).tensors]
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(x_shape, dtype=np.float32)
    wn = rng.standard_normal(w_shape, dtype=np.float32)
    out = np.zeros(y.shape, np.float32)
    tw.build([x, w, y])(xn, wn, out)
    tx, tw_ = torch.from_numpy(xn), torch.from_numpy(wn)
    if channels_last:
        tx, tw_ = tx.permute(0, 3, 1, 2), tw_.permute(3, 2, 0, 1)
    ref = getattr(torch.nn.functional, f"conv{nsp}d")(tx, tw_, stride=stride)
    if channels_last:
        ref = ref.permute(0, 2, 3, 1)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)


def test_padded_strided_pointwise_keeps_its_padding_stage():
    x = tw.placeholder((1, 4, 6, 6), "float32", name="x")
    w = tw.placeholder((3, 4, 1, 1), "float32", name="w")
    y = tw.ops.conv2d(x, w, stride=2, padding=1)
    names = [t.name for t in collect_program([y]).tensors]
    assert "conv2d_stride" not in names
