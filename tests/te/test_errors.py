"""Every construction-time error: its class and that the message names the culprit
and says what would be valid."""

import pytest

import tilewright as tw


@pytest.fixture
def A():
    return tw.placeholder((4, 6), "float32", name="A")


def test_wrong_index_arity(A):
    with pytest.raises(tw.ShapeError, match=r"tensor 'A' has 2 dimension\(s\) \[4, 6\].*1 index.*exactly 2"):
        tw.compute((4,), lambda i: A[i], name="B")


@pytest.mark.parametrize("bad", [lambda i: tw.cast(i, "float32"), lambda i: 1.5, lambda i: i > 0])
def test_non_integer_index(A, bad):
    with pytest.raises(tw.ExprError, match="tensor 'A' axis 1: index must be an integer expression"):
        tw.compute((4,), lambda i: A[i, bad(i)], name="B")


def test_slice_index(A):
    with pytest.raises(tw.ExprError, match="tensor 'A' axis 0: slices are not expressions"):
        tw.compute((4,), lambda i: A[:, i], name="B")


def test_constant_index_out_of_range(A):
    with pytest.raises(tw.ShapeError, match=r"tensor 'A' axis 1: constant index 6 is out of range \[0, 6\)"):
        tw.compute((4,), lambda i: A[i, 6], name="B")


def test_reduce_axis_outside_reducer(A):
    k = tw.reduce_axis(6, name="k")
    with pytest.raises(tw.ExprError, match="compute 'B': reduce axis 'k' is used outside a reducer"):
        tw.compute((4,), lambda i: A[i, k], name="B")


def test_reduce_axis_in_two_reducers(A):
    k = tw.reduce_axis(6, name="k")
    tw.compute((4,), lambda i: tw.sum(A[i, k], axis=k), name="B")
    with pytest.raises(tw.ExprError, match="reduce axis 'k' is already reduced by compute 'B'.*new tw.reduce_axis"):
        tw.compute((4,), lambda i: tw.max(A[i, k], axis=k), name="C")


def test_reduce_axis_used_but_not_reduced(A):
    k, m = tw.reduce_axis(6, name="k"), tw.reduce_axis(4, name="m")
    match = r"reduce axis 'm' appears in the reduction but is not in its axis list \[k\]"
    with pytest.raises(tw.ExprError, match=match):
        tw.compute((4,), lambda i: tw.sum(A[m, k], axis=k), name="B")


def test_reduction_inside_larger_expression(A):
    k = tw.reduce_axis(6, name="k")
    with pytest.raises(tw.ExprError, match="sum\\(\\) reduction must be the whole body of its compute"):
        tw.compute((4,), lambda i: tw.sum(A[i, k], axis=k) + 1.0, name="B")


def test_reducing_over_a_spatial_axis(A):
    with pytest.raises(tw.ExprError, match="axis 'j' is a spatial axis"):
        tw.compute((4, 6), lambda i, j: tw.sum(A[i, j], axis=j), name="B")


def test_reducer_without_axis(A):
    with pytest.raises(tw.ExprError, match="needs `axis=`"):
        tw.compute((4,), lambda i: tw.sum(A[i, 0]), name="B")


def test_axis_of_another_compute(A):
    B = tw.compute((4, 6), lambda i, j: A[i, j], name="B")
    with pytest.raises(tw.ExprError, match="axis 'i' belongs to another compute"):
        tw.compute((4,), lambda x: A[B.op.axis[0], x], name="C")


@pytest.mark.parametrize("shape", [(0, 3), (3, -1)])
def test_zero_or_negative_extent(shape):
    with pytest.raises(tw.ShapeError, match="tensor 'X' axis [01] extent must be positive"):
        tw.placeholder(shape, "float32", name="X")
    with pytest.raises(tw.ShapeError, match="tensor 'Y' axis [01] extent must be positive"):
        tw.compute(shape, lambda i, j: i + j, name="Y")


def test_non_integer_extent():
    with pytest.raises(tw.ShapeError, match="must be a positive int, got 2.5"):
        tw.placeholder((2.5,), name="X")


@pytest.mark.parametrize("dom", [0, -3, (4, 4), (5, 2)])
def test_empty_reduce_axis(dom):
    with pytest.raises(tw.ShapeError, match="reduce_axis 'k'"):
        tw.reduce_axis(dom, name="k")


def test_fcompute_arity(A):
    with pytest.raises(tw.ShapeError, match=r"fcompute takes 1 index argument\(s\) \(i\) but the shape has 2"):
        tw.compute((4, 6), lambda i: A[i, 0], name="B")


def test_duplicate_placeholder_names_in_one_program():
    a1 = tw.placeholder((3,), name="X")
    a2 = tw.placeholder((3,), name="X")
    C = tw.compute((3,), lambda i: a1[i] + a2[i], name="C")
    with pytest.raises(tw.NameConflictError, match="two different placeholders are named 'X'"):
        tw.evaluate(C, {"X": [1.0, 2.0, 3.0]})


def test_duplicate_axis_names(A):
    with pytest.raises(tw.NameConflictError, match=r"axis name\(s\) \['i'\] are used twice"):
        k = tw.reduce_axis(6, name="i")
        tw.compute((4,), lambda i: tw.sum(A[i, k], axis=k), name="B")


def test_python_truth_value_of_expression(A):
    with pytest.raises(tw.ExprError, match="use tw.if_then_else"):
        tw.compute((4,), lambda i: A[i, 0] if i > 2 else 0.0, name="B")


def test_tensor_used_as_scalar(A):
    with pytest.raises(tw.ExprError, match=r"tensor 'A' is used as a scalar; index it, e.g. A\[i0, i1\]"):
        tw.compute((4,), lambda i: A + 1.0, name="B")


def test_multiple_outputs_from_one_compute(A):
    with pytest.raises(tw.ExprError, match="returned 2 values"):
        tw.compute((4,), lambda i: (A[i, 0], A[i, 1]), name="B")


def test_where_must_be_bool(A):
    k = tw.reduce_axis(6, name="k")
    with pytest.raises(tw.ExprError, match="where=...\\) must be a bool condition"):
        tw.compute((4,), lambda i: tw.sum(A[i, k], axis=k, where=k + 1), name="B")


def test_errors_share_one_base_class():
    for cls in (tw.ShapeError, tw.DTypeError, tw.ExprError, tw.NameConflictError, tw.EvaluationError,
                tw.ScheduleError, tw.LoweringError, tw.BuildError, tw.MeasureError):
        assert issubclass(cls, tw.TilewrightError)
