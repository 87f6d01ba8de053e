"""YOLO-v1 (Redmon et al.): the 24-conv stack whose 15 distinct layers are
FlexTensor's C2D suite (tilewright/workloads/flextensor_suite.json), each
conv followed by leaky ReLU 0.1, four 2x2 max pools, then the detection head
(linear 4096, leaky ReLU, linear to S*S*(5B+C)). `width` scales channels and
`image` the input side (a multiple of 64), so tests build small versions."""

from __future__ import annotations

from .seeded_weights import init_weights

# (kernel, out_channels, stride) per conv; "M" is a 2x2 max pool of stride 2.
LAYERS = ((7, 64, 2), "M", (3, 192, 1), "M", (1, 128, 1), (3, 256, 1), (1, 256, 1), (3, 512, 1), "M",
          *((1, 256, 1), (3, 512, 1)) * 4, (1, 512, 1), (3, 1024, 1), "M",
          *((1, 512, 1), (3, 1024, 1)) * 2, (3, 1024, 1), (3, 1024, 2), (3, 1024, 1), (3, 1024, 1))


def yolo_v1(width=1.0, image=448, head_hidden=4096, boxes=2, classes=20, seed=0):
    """YOLO-v1; input [N, 3, image, image], output [N, S*S*(5*boxes + classes)] with S = image / 64."""
    from torch import nn

    from ..errors import ShapeError

    if image % 64:
        raise ShapeError(f"yolo_v1: image side {image} must be a multiple of 64 (the stack downsamples by 64)")
    layers, cin = [], 3
    for spec in LAYERS:
        if spec == "M":
            layers.append(nn.MaxPool2d(2, 2))
            continue
        k, c, s = spec
        cout = max(1, int(c * width))
        layers += [nn.Conv2d(cin, cout, k, s, k // 2), nn.LeakyReLU(0.1)]
        cin = cout
    grid = image // 64
    layers += [nn.Flatten(), nn.Linear(cin * grid * grid, head_hidden), nn.LeakyReLU(0.1),
               nn.Linear(head_hidden, grid * grid * (5 * boxes + classes))]
    return init_weights(nn.Sequential(*layers), seed)
