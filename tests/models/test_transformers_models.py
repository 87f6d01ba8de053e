"""Models from Hugging Face transformers' own modeling code (small configs of the default
architectures, seeded random weights, nothing downloaded) compile and match eager: the two CNNs,
and ViT, BERT and GPT-2 (attention through torch's SDPA decomposition, its fully-masked-row guard
read as the graph's masked softmax; token embeddings; GPT-2's fused QKV split and empty cache)."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tilewright.bench.transformers_models import last_hidden  # noqa: E402
from tilewright.graph.compile import compile as tw_compile  # noqa: E402


def _models():
    T = transformers
    text = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, hidden_size=64)
    ids = torch.randint(0, 100, (1, 16))
    image = torch.randn(1, 3, 64, 64)
    return {
        "resnet": (lambda: T.ResNetModel(T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])),
                   image),
        "mobilenet_v2": (lambda: T.MobileNetV2Model(T.MobileNetV2Config(image_size=64, depth_multiplier=0.35)),
                         image),
        "vit": (lambda: T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, **text)), torch.randn(1, 3, 32, 32)),
        "bert": (lambda: T.BertModel(T.BertConfig(vocab_size=100, **text)), ids),
        "gpt2": (lambda: T.GPT2Model(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32)),
                 ids),
    }


@pytest.mark.parametrize("name", ["resnet", "mobilenet_v2", "vit", "bert", "gpt2"])
def test_matches_eager(name, tmp_path):
    torch.manual_seed(0)
    build, x = _models()[name]
    net = last_hidden(build())
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    module = tw_compile(net, (x,), target=AVX2, trials=0, records=tmp_path / "r.db", progress=False)
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
