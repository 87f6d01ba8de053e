"""A model's weights are packed once when the model is built, so the default must not price
their packing per call: where the weights' pack dominated the model (ResNet-50's 7x7 1x1
layers), the default vectorizes along the output channels once it knows they are constants."""

from synthetic_targets import AVX2

import tilewright as tw
from tilewright.space.cpu import cpu_space
from tilewright.space.cpu_default import default_point
from tilewright.space.cpu_knobs import option
from tilewright.space.cpu_plan import vector_position


def _pointwise(c, o, hw):
    x = tw.placeholder((1, c, hw, hw), "float32", name="x")
    w = tw.placeholder((o, c, 1, 1), "float32", name="w")
    b = tw.placeholder((o,), "float32", name="b")
    y = tw.ops.conv2d(x, w, b)
    return tw.compute(y.shape, lambda *i: tw.max(y[i], tw.const(0.0, "float32")), name="relu"), w


def _vector_axis(c, o, hw, constants: bool) -> str:
    out, w = _pointwise(c, o, hw)
    space, plan = cpu_space([out], AVX2, constants=[w] if constants else ())
    p = default_point(space, plan)
    return plan.main.spatial[vector_position(p, plan)].name if option(p, "vec_axis", None) is not None else "?"


def test_constant_weights_move_a_small_image_conv_to_channel_vectors():
    assert _vector_axis(2048, 512, 7, constants=False) == "hw"  # packing 4 MB per call costs too much
    assert _vector_axis(2048, 512, 7, constants=True) == "o"  # packed once: 8 rows of 49 pixels waste less


def test_near_ties_keep_the_contiguous_output_axis():
    assert _vector_axis(1024, 256, 14, constants=True) == "hw"  # modelled 4% apart, measured 8% the other way
