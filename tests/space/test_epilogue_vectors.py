"""The output stage of a CPU register tile is vectorized along the tile's own vector axis:
an NCHW conv tiled along its output channels runs bias and ReLU as vector operations on
whole accumulators and stores their lanes one by one (a scatter: lower/vectorize.py), where
it used to extract each lane and run the epilogue in scalar code (ResNet-50's first layer:
1.17x). An epilogue that reads another tensor across that axis at a stride (a residual
input) keeps the old scalar form, which measured faster than composing its vectors lane by lane."""

import random

import numpy as np
import pytest

import tilewright as tw
from tilewright.codegen import generate_c
from tilewright.space import apply_cpu, cpu_space
from tilewright.space.cpu_knobs import option, tile_factor
from tilewright.space.cpu_plan import vector_position
from tilewright.targets import ISA_FEATURES, Target

# a synthetic AVX2 target (8 float lanes), so the points drawn do not depend on the host
AVX2 = Target(kind="cpu", arch="x86_64", cores=2, features=frozenset(ISA_FEATURES["avx2"]), isa="avx2",
              caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)), l1_ways=8,
              fma_units=2, fma_bits=256, load_bits=256)


def conv_epilogue(residual: bool):
    x = tw.placeholder((1, 6, 9, 9), "float32", name="x")
    w = tw.placeholder((16, 6, 3, 3), "float32", name="w")
    b = tw.placeholder((16,), "float32", name="b")
    y = tw.ops.conv2d(x, w, b, padding=1)
    if not residual:
        return [x, w, b], tw.ops.relu(y)
    r = tw.placeholder((1, 16, 9, 9), "float32", name="r")
    return [x, w, b, r], tw.ops.relu(tw.ops.add(y, r))


def points_along_channels(space, plan, count=6):
    """Sampled points whose register tile is vectorized along the output channels (o)."""
    rng, found = random.Random(3), []
    o = [lp.name for lp in plan.main.spatial].index("o")
    for _ in range(2000):
        p = space.sample(rng)
        if vector_position(p, plan) == o and tile_factor(p, plan.main.spatial[o]) % plan.lanes == 0 \
                and not option(p, "vec_reduce", 0):
            found.append(p)
            if len(found) == count:
                break
    assert found, "the space has no point vectorized along o"
    return found


@pytest.mark.skipif(not tw.as_target("cpu").has("avx2"), reason="host lacks avx2")
@pytest.mark.parametrize("residual", [False, True])
def test_epilogue_runs_on_vectors_along_the_output_channels(residual):
    target = AVX2
    inputs, out = conv_epilogue(residual)
    space, plan = cpu_space(out, target)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape, dtype=np.float32) for t in inputs]
    want = tw.evaluate(out, dict(zip(inputs, arrays)))
    for p in points_along_channels(space, plan):
        s = apply_cpu(out, plan, p)
        source = generate_c(tw.lower(s, [*inputs, out])).text
        # 81 = H * W: lanes one output-channel plane apart
        assert ("tw_scatter_float32x8_s81(" in source) is not residual, str(p)
        got = np.zeros(out.shape, np.float32)
        tw.build(s, [*inputs, out], target=target)(*arrays, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(p))
