"""Models from Hugging Face transformers' own modeling code (small configs of the default
architectures, seeded random weights, nothing downloaded) compile and match eager."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tilewright.graph.compile import compile as tw_compile  # noqa: E402


class _Hidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).last_hidden_state


def _models():
    T = transformers
    return {
        "resnet": lambda: T.ResNetModel(T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])),
        "mobilenet_v2": lambda: T.MobileNetV2Model(T.MobileNetV2Config(image_size=64, depth_multiplier=0.35)),
    }


@pytest.mark.parametrize("name", ["resnet", "mobilenet_v2"])
def test_matches_eager(name, tmp_path):
    torch.manual_seed(0)
    net = _Hidden(_models()[name]().eval()).eval()
    x = torch.randn(1, 3, 64, 64)
    module = tw_compile(net, (x,), trials=0, records=tmp_path / "r.db", progress=False)
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
