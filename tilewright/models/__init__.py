"""Reference networks in plain torch.nn (torchvision does not install beside
this torch): ResNet-18/50, MobileNet-v2, YOLO-v1, OverFeat, one BERT-base
encoder layer. Random weights from a fixed seed, eval mode. Imports torch
(inside the builders) and tilewright.errors only. Public names: MODELS,
ModelSpec, build and each builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .bert import bert_layer
from .mobilenet import mobilenet_v2
from .overfeat import overfeat
from .resnet import resnet18, resnet50
from .yolo import yolo_v1


@dataclass(frozen=True)
class ModelSpec:
    """`builder(**kwargs)` gives the full model for inputs of `input_shape`;
    `builder(**reduced)` a small one for inputs of `reduced_shape` (tests)."""
    builder: Callable
    input_shape: tuple[int, ...]
    reduced: dict = field(default_factory=dict)
    reduced_shape: tuple[int, ...] = ()
    kwargs: dict = field(default_factory=dict)

    def build(self, reduced: bool = False):
        return self.builder(**(self.reduced if reduced else self.kwargs))

    def example_input(self, reduced: bool = False, seed: int = 0):
        """A random float32 torch tensor of the model's input shape."""
        import torch

        shape = self.reduced_shape if reduced else self.input_shape
        return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


MODELS: dict[str, ModelSpec] = {
    "resnet18": ModelSpec(resnet18, (1, 3, 224, 224), {"layers": (1, 1, 1, 1), "width": 8, "num_classes": 10},
                          (1, 3, 32, 32)),
    "resnet50": ModelSpec(resnet50, (1, 3, 224, 224), {"layers": (1, 1, 1, 1), "width": 4, "num_classes": 10},
                          (1, 3, 32, 32)),
    "mobilenet_v2": ModelSpec(mobilenet_v2, (1, 3, 224, 224),
                              {"width_mult": 0.25, "settings": ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 1, 2)),
                               "last_channel": 64, "num_classes": 10}, (1, 3, 32, 32)),
    "yolo_v1": ModelSpec(yolo_v1, (1, 3, 448, 448), {"width": 1 / 32, "image": 64, "head_hidden": 32},
                         (1, 3, 64, 64)),
    "overfeat": ModelSpec(overfeat, (1, 3, 231, 231), {"width": 1 / 32, "image": 71, "num_classes": 10},
                          (1, 3, 71, 71)),
    "bert_layer": ModelSpec(bert_layer, (1, 128, 768), {"hidden": 64, "heads": 4, "ffn": 128}, (1, 16, 64)),
}


def build(name: str, reduced: bool = False):
    """The model called `name` (a key of MODELS), full size or reduced."""
    from ..errors import ShapeError

    if name not in MODELS:
        raise ShapeError(f"unknown model '{name}'; known: {', '.join(sorted(MODELS))}")
    return MODELS[name].build(reduced)


__all__ = ["MODELS", "ModelSpec", "build", "bert_layer", "mobilenet_v2", "overfeat", "resnet18", "resnet50",
           "yolo_v1"]
