"""OverFeat, fast model (Sermanet et al., table 1): five convs (11x11 stride
4, 5x5, three 3x3) with ReLU and three 2x2 max pools, then three linear
layers; input 231x231. `width` scales channels and hidden sizes, `image`
the input side, so tests build small versions."""

from __future__ import annotations

from .seeded_weights import init_weights


def _feature_side(image: int) -> int:
    side = (image - 11) // 4 + 1  # conv1
    side //= 2  # pool
    side = side - 5 + 1  # conv2
    side //= 2
    return side // 2  # conv3-5 keep the side; last pool


def overfeat(width=1.0, image=231, hidden=(3072, 4096), num_classes=1000, seed=0):
    """OverFeat (fast); input [N, 3, image, image]."""
    from torch import nn

    from ..errors import ShapeError

    side = _feature_side(image)
    if side < 1:
        raise ShapeError(f"overfeat: image side {image} is too small (at least 71 leaves a 1x1 feature map)")
    c = [max(1, int(n * width)) for n in (96, 256, 512, 1024, 1024)]
    h = [max(1, int(n * width)) for n in hidden]
    relu = nn.ReLU
    layers = [nn.Conv2d(3, c[0], 11, 4), relu(), nn.MaxPool2d(2, 2),
              nn.Conv2d(c[0], c[1], 5), relu(), nn.MaxPool2d(2, 2),
              nn.Conv2d(c[1], c[2], 3, padding=1), relu(),
              nn.Conv2d(c[2], c[3], 3, padding=1), relu(),
              nn.Conv2d(c[3], c[4], 3, padding=1), relu(), nn.MaxPool2d(2, 2),
              nn.Flatten(), nn.Linear(c[4] * side * side, h[0]), relu(), nn.Dropout(0.5),
              nn.Linear(h[0], h[1]), relu(), nn.Dropout(0.5), nn.Linear(h[1], num_classes)]
    return init_weights(nn.Sequential(*layers), seed)
