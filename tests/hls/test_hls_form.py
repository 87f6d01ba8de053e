"""What the HLS compiler reads from a te: sums of products of input reads, padding folded into the read."""

import pytest

import tilewright as tw
from tilewright.errors import LoweringError
from tilewright.lower.hls_form import hls_form


def test_padded_strided_conv_reads_the_input_itself():
    x = tw.te.placeholder((1, 8, 10, 10), "int8", name="x")
    w = tw.te.placeholder((16, 8, 3, 3), "int8", name="w")
    f = hls_form(tw.ops.conv2d(x, w, stride=2, padding=1, out_dtype="int32"))
    assert [n for n, _ in f.spatial] == ["n", "o", "h", "w"] and [e for _, e in f.reduce] == [8, 3, 3]
    xo, wo = f.operands
    assert xo.source is x and xo.padded and xo.offset == (0, 0, -1, -1) and xo.matrix[2][2] == 2
    assert wo.source is w and not wo.padded and (f.in_dtype, f.acc_dtype) == ("int8", "int32")


def test_gemm_form():
    a = tw.te.placeholder((32, 64), "float32", name="A")
    b = tw.te.placeholder((64, 16), "float32", name="B")
    f = hls_form(tw.ops.matmul(a, b))
    assert f.macs == 32 * 64 * 16 and f.operands[1].matrix == ((0, 0, 1), (0, 1, 0))


def test_refusals_name_what_is_wrong():
    a = tw.te.placeholder((8, 8), "float32", name="A")
    relu = tw.ops.relu(a)
    k = tw.te.reduce_axis((0, 8), name="k")
    computed = tw.te.compute((8, 8), lambda i, j: tw.te.sum(relu[i, k] * a[k, j], axis=k), name="C")
    with pytest.raises(LoweringError, match="'.*' is computed"):
        hls_form(computed)
    with pytest.raises(LoweringError, match="expected a sum of products"):
        hls_form(relu)
    d = tw.te.placeholder((8, 8), "float64", name="D")
    k2 = tw.te.reduce_axis((0, 8), name="k2")
    wide = tw.te.compute((8, 8), lambda i, j: tw.te.sum(d[i, k2] * d[k2, j], axis=k2), name="E")
    with pytest.raises(LoweringError, match="float32, int8"):
        hls_form(wide)
