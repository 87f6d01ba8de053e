"""The embedding model cross-checked against a second solver: z3 with the constraints written at the scalar
level must find exactly the plan combinations CP-SAT's tables allow (small instances)."""

import pytest

import tilewright as tw
from tilewright.search.vta_embed import ConvProblem

pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")
pytest.importorskip("z3", reason="z3-solver is not installed (pip install '.[test]')")

from tilewright.intrin.embed_check import cpsat_solutions, z3_solutions  # noqa: E402


def small_gemm(b: int, i: int, o: int):
    """A (batch x in x out) int8 GEMM block declared in te, like the VTA core's but small."""
    inp = tw.placeholder((b, i), "int8", name="inp")
    wgt = tw.placeholder((o, i), "int8", name="wgt")
    k = tw.reduce_axis(i, name="k")
    acc = tw.compute((b, o), lambda n, m: tw.sum(inp[n, k].astype("int32") * wgt[m, k].astype("int32"), axis=k),
                     name="acc")
    spelling = tw.intrin.Emitter("c", (), lambda ops: "/* declared for embedding only */")
    return tw.decl_tensor_intrin(acc, [spelling], f"gemm_{b}x{i}x{o}", inputs=[inp, wgt])


CASES = [
    (ConvProblem(1, 2, 6, 6, 4, 3, 3, 1, 1), (1, 4, 4)),
    (ConvProblem(2, 4, 5, 5, 4, 2, 2, 0, 0, 2, 2), (2, 2, 2)),
    (ConvProblem(1, 1, 8, 9, 4, 3, 2, 0, 0, 1, 1, 2, 1), (2, 4, 2)),
    (ConvProblem(1, 4, 6, 6, 2, 1, 1), (4, 2, 2)),
]


@pytest.mark.parametrize("p, block", CASES, ids=[str(p) for p, _ in CASES])
@pytest.mark.parametrize("unroll", [True, False])
def test_cpsat_and_z3_find_the_same_solutions(p, block, unroll):
    intrin = small_gemm(*block)
    ours = cpsat_solutions(p.te(), intrin, unroll=unroll)
    theirs = z3_solutions(p.te(), intrin, unroll=unroll)
    assert ours == theirs
    if unroll:
        assert ours  # every case embeds once stencils may be unrolled
