"""The GPU benchmark driver without a GPU: the PyTorch baseline mapping run on
the host against the NumPy reference (one shrunken case per operator), the
report (geomeans, goals, network rows, merging of slices) on synthetic rows,
and `tilewright bench flextensor --target opencl` end to end on PoCL."""

from __future__ import annotations

import numpy as np
import pytest

from tilewright.reference import evaluate
from tilewright.workloads import builders, gpu_baselines, suite_case

# one small case per operator, with the parameters the real cases carry (strides, dilation, groups, ...)
_SMALL = {
    "C2D": dict(batch=1, in_channels=4, height=9, width=9, out_channels=6, kernel=3, stride=2, padding=1,
                dilation=1, groups=1),
    "GRP": dict(batch=1, in_channels=8, height=7, width=7, out_channels=8, kernel=3, stride=1, padding=1,
                dilation=1, groups=4),
    "DIL": dict(batch=1, in_channels=4, height=9, width=9, out_channels=5, kernel=3, stride=1, padding=2,
                dilation=2, groups=1),
    "DEP": dict(batch=1, in_channels=4, height=8, width=8, channel_multiplier=2, kernel=3, stride=2, padding=1,
                dilation=1, out_channels=8),
    "C1D": dict(batch=1, in_channels=4, length=11, out_channels=6, kernel=3, stride=2, padding=1, dilation=1,
                groups=1),
    "T1D": dict(batch=1, in_channels=4, length=6, out_channels=5, kernel=3, stride=2, padding=1, output_padding=1,
                dilation=1, groups=1),
    "C3D": dict(batch=1, in_channels=3, depth=5, height=6, width=6, out_channels=4, kernel=3, stride=2, padding=1,
                dilation=1, groups=1),
    "T2D": dict(batch=1, in_channels=4, height=5, width=5, out_channels=3, kernel=3, stride=2, padding=1,
                output_padding=1, dilation=1, groups=1),
    "T3D": dict(batch=1, in_channels=3, depth=3, height=4, width=4, out_channels=2, kernel=3, stride=2, padding=1,
                output_padding=0, dilation=1, groups=1),
    "GEMM": dict(M=12, K=7, N=9),
    "GEMV": dict(M=12, K=7),
    "BIL": dict(batch=3, in1_features=4, in2_features=5, out_features=6),
}


@pytest.fixture
def small_cases(monkeypatch):
    """suite_case answers the shrunken case for name "small" (the builders and the baselines both ask it)."""
    def lookup(op, name):
        return dict(_SMALL[op], name=name) if name == "small" else suite_case(op, name)

    monkeypatch.setattr(builders, "suite_case", lookup)
    monkeypatch.setattr(gpu_baselines, "suite_case", lookup)


@pytest.mark.parametrize("op", sorted(_SMALL))
def test_torch_mapping_matches_the_reference(op, small_cases):
    torch = pytest.importorskip("torch")
    tensors = builders.suite_program(op, "small")
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal(t.shape).astype(np.float32) for t in tensors[:-1]]
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    for tf32 in (False, True):
        variants = gpu_baselines.torch_gpu_variants(op, "small", ins, device="cpu", tf32=tf32)
        assert variants, f"no PyTorch variant for {op}"
        for name, fn in variants.items():
            got = fn()
            assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"{op} {name}")
    assert torch.backends.cudnn.allow_tf32 is True  # the last variant ran with PyTorch's default


def test_operators_without_torch_have_no_variant():
    pytest.importorskip("torch")
    x = np.zeros((4, 4), np.float32)
    assert gpu_baselines.torch_gpu_variants("BCM", "bcm_1024x40_b8", [x], device="cpu") == {}
