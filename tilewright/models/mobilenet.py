"""MobileNet-v2 (Sandler et al.): inverted residual blocks (1x1 expand,
3x3 depthwise, 1x1 linear projection) with ReLU6, a residual add when the
stride is 1 and channels match. `width_mult` scales channels (rounded to
multiples of 8 as torchvision does), `settings` lists (t, c, n, s) rows."""

from __future__ import annotations

from .seeded_weights import init_weights

SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1))


def _divisible(v: float, d: int = 8) -> int:
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


def _cbr(nn, cin, cout, k, stride=1, groups=1):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]


def mobilenet_v2(width_mult=1.0, settings=SETTINGS, last_channel=1280, num_classes=1000, seed=0):
    """MobileNet-v2; input [N, 3, 224, 224]."""
    from torch import nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hidden = cin * t
            layers = _cbr(nn, cin, hidden, 1) if t != 1 else []
            layers += _cbr(nn, hidden, hidden, 3, stride, groups=hidden)
            layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    cin = _divisible(32 * width_mult)
    last = _divisible(last_channel * max(1.0, width_mult))
    layers = _cbr(nn, 3, cin, 3, 2)
    for t, c, n, s in settings:
        cout = _divisible(c * width_mult)
        for i in range(n):
            layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    layers += _cbr(nn, cin, last, 1)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(last, num_classes)]
    return init_weights(nn.Sequential(*layers), seed)
