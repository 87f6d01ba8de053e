"""The mini-graph: stages, loops, roles, flops."""

import tilewright as tw
from tilewright.analysis import access_axes, analyze


def conv_program():
    x = tw.placeholder((1, 8, 10, 10), "float32", name="x")
    w = tw.placeholder((16, 8, 3, 3), "float32", name="w")
    b = tw.placeholder((16,), "float32", name="b")
    return x, w, tw.ops.relu(tw.ops.conv2d(x, w, b, padding=1))


def test_conv_chain_nodes_roles_and_loops():
    x, w, y = conv_program()
    g = analyze(y)
    assert [n.name for n in g.nodes] == ["conv2d_pad", "conv2d_sum", "conv2d", "relu"]
    pad, conv, bias, relu = g.nodes
    assert pad.injective and pad.guarded and not conv.injective
    assert [(lp.name, lp.extent) for lp in conv.spatial] == [("n", 1), ("o", 16), ("h", 10), ("w", 10)]
    assert [(lp.name, lp.extent) for lp in conv.reduce] == [("rc", 8), ("rh", 3), ("rw", 3)]
    assert conv.consumers == (bias.tensor,) and relu.is_output and not conv.is_output
    assert g.main is conv
    assert conv.flops == 2 * 16 * 10 * 10 * 8 * 9
    assert g.inputs == (x, w, g.nodes[2].inputs[1])


def test_access_axes_show_which_loops_index_each_dimension():
    A = tw.placeholder((32, 16), "float32", name="A")
    B = tw.placeholder((16, 8), "float32", name="B")
    C = tw.ops.matmul(A, B)
    node = analyze(C).main
    assert access_axes(node, B) == [{node.reduce[0].name}, {node.spatial[1].name}]


def test_printable():
    _, _, y = conv_program()
    text = str(analyze(y))
    assert "conv2d_sum: reduction; spatial [n:1, o:16, h:10, w:10] reduce [rc:8, rh:3, rw:3]" in text


def test_workload_key_ignores_names_but_not_structure():
    from tilewright.analysis import workload_key

    def program(a_name, b_name, n=16):
        A = tw.placeholder((n, 8), "float32", name=a_name)
        B = tw.placeholder((8, 12), "float32", name=b_name)
        k = tw.reduce_axis(8, name=a_name + "k")
        return tw.compute((n, 12), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name=b_name + "C")

    assert workload_key(program("A", "B")) == workload_key(program("X", "Y"))
    assert workload_key(program("A", "B")) != workload_key(program("A", "B", n=32))
    A = tw.placeholder((16, 8), "float32", name="A")
    B = tw.placeholder((8, 12), "float32", name="B")
    k = tw.reduce_axis(8, name="k")
    other = tw.compute((16, 12), lambda i, j: tw.sum(A[i, k] + B[k, j], axis=k), name="C")
    assert workload_key(other) != workload_key(program("A", "B"))
