"""The operator library, written in te: one file per family, PyTorch's
functional names and parameters (`tw.ops.conv2d(x, w, stride=1, padding=0,
dilation=1, groups=1)`). Imports `te`, `ir`, `errors`. Public names: below."""

from .activation import gelu, hardswish, leaky_relu, relu, sigmoid, silu, softplus, tanh
from .bilinear import bilinear
from .block_circulant import block_circulant
from .conv import conv1d, conv2d, conv3d
from .conv_transpose import conv_transpose1d, conv_transpose2d, conv_transpose3d
from .depthwise import depthwise_conv2d
from .elementwise import add, bias_add, div, maximum, minimum, mul, sub
from .fixed_point import shift_round_saturate
from .layout import conv2d_nchwc, depthwise_conv2d_nchwc, layout_transform
from .matmul import batch_matmul, bmm, gemm, gemv, matmul, mm, mv
from .normalization import batch_norm, layer_norm, log_softmax, softmax
from .pad import pad
from .pool import adaptive_avg_pool2d, avg_pool2d, global_avg_pool2d, max_pool2d
from .quantize import dequantize, qconv2d_nchwc, quantize, requantize
from .shape import flatten, permute, reshape, transpose
from .shift import shift_conv2d

__all__ = [
    "adaptive_avg_pool2d", "add", "avg_pool2d", "batch_matmul", "batch_norm", "bias_add", "bilinear",
    "block_circulant", "bmm", "conv1d", "conv2d", "conv2d_nchwc", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "depthwise_conv2d", "depthwise_conv2d_nchwc", "dequantize", "div", "flatten", "gelu", "gemm",
    "gemv", "global_avg_pool2d", "hardswish", "layer_norm", "layout_transform", "leaky_relu", "log_softmax", "matmul",
    "max_pool2d", "maximum", "minimum", "mm", "mul", "mv", "pad", "permute", "qconv2d_nchwc", "quantize", "relu",
    "requantize", "reshape", "shift_conv2d", "shift_round_saturate", "sigmoid", "silu", "softmax", "softplus", "sub",
    "tanh", "transpose",
]
