"""ResNet-18 and ResNet-50 as torchvision builds them (v1.5: the stride of a
bottleneck sits on its 3x3 conv; a 1x1 conv + BN projects the shortcut when
the shape changes). `width` scales every stage's channels, `layers` the
number of blocks per stage, so tests build small versions."""

from __future__ import annotations

from .seeded_weights import init_weights


def _conv_bn(nn, cin, cout, k, stride=1):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]


def _blocks():
    import torch
    from torch import nn

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin, planes, stride):
            super().__init__()
            self.body = nn.Sequential(*_conv_bn(nn, cin, planes, 3, stride), nn.ReLU(),
                                      *_conv_bn(nn, planes, planes, 3))
            self.shortcut = (nn.Sequential(*_conv_bn(nn, cin, planes, 1, stride))
                             if stride != 1 or cin != planes else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.shortcut(x))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride):
            super().__init__()
            cout = planes * 4
            self.body = nn.Sequential(*_conv_bn(nn, cin, planes, 1), nn.ReLU(),
                                      *_conv_bn(nn, planes, planes, 3, stride), nn.ReLU(),
                                      *_conv_bn(nn, planes, cout, 1))
            self.shortcut = (nn.Sequential(*_conv_bn(nn, cin, cout, 1, stride))
                             if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.shortcut(x))

    return BasicBlock, Bottleneck


def _resnet(block, layers, width, num_classes, seed):
    import torch
    from torch import nn

    stem = [*_conv_bn(nn, 3, width, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    blocks, cin = [], width
    for i, n in enumerate(layers):
        planes = width * 2 ** i
        for j in range(n):
            blocks.append(block(cin, planes, 2 if (i > 0 and j == 0) else 1))
            cin = planes * block.expansion
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    model = init_weights(nn.Sequential(*stem, *blocks, *head), seed)
    # a small last BN scale per block (torchvision's zero_init_residual, not zero) keeps sums bounded
    with torch.no_grad():
        for b in blocks:
            b.body[-1].weight.mul_(0.2)
    return model


def resnet18(layers=(2, 2, 2, 2), width=64, num_classes=1000, seed=0):
    """ResNet-18 (basic blocks); input [N, 3, 224, 224]."""
    return _resnet(_blocks()[0], layers, width, num_classes, seed)


def resnet50(layers=(3, 4, 6, 3), width=64, num_classes=1000, seed=0):
    """ResNet-50 (bottleneck blocks, stride on the 3x3); input [N, 3, 224, 224]."""
    return _resnet(_blocks()[1], layers, width, num_classes, seed)
