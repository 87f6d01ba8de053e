"""The host transforms of VTA embeddings compiled from the layout's index maps: every pass bit-exact against
the NumPy gathers of the same maps (which test_vta_embed holds to the simulator and NumPy's convolution),
for TVM's template and embeddings that pad, unroll stencils (im2col), strip images into lanes and split
dilation phases."""

import dataclasses

import numpy as np
import pytest

from tilewright.bench.vta_embed_payoff import random_conv_inputs
from tilewright.search.vta_embed import ConvProblem, Mapping, pad_and_block, realize, reference_embedding, unblock
from tilewright.search.vta_host_transforms import (
    HostTransforms,
    channel_major_programs,
    default_builder,
    pack_program,
    unpack_program,
)
from tilewright.targets import host_target
from tilewright.targets.vta import VTAConfig

VTA16 = VTAConfig()
VTA8 = VTAConfig(batch=8, block_in=8, block_out=8)
ONE_THREAD = dataclasses.replace(host_target(), cores=1)


def _mappings(p, cfg, k=4):
    pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")
    from tilewright.intrin import EmbeddingError, embed, vta_gemm

    out = [reference_embedding(p, cfg)]
    for e in embed(p.te(), vta_gemm(cfg), top_k=k):
        try:
            out.append(realize(p, Mapping.of(e), cfg).mapping)
        except EmbeddingError:
            continue
    return out


CASES = [
    (ConvProblem(1, 1, 13, 30, 16, 3, 5, 0, 0, 2, 2, name="one channel, strided"), VTA16),
    (ConvProblem(2, 3, 10, 10, 32, 3, 3, 1, 1, name="three channels, batch 2"), VTA16),
    (ConvProblem(1, 16, 13, 13, 16, 3, 3, 0, 0, 1, 1, 2, 2, name="dilated"), VTA16),
    (ConvProblem(1, 8, 9, 9, 8, 3, 3, 1, 1, name="batch 1 on 8 lanes"), VTA8),
]


@pytest.mark.parametrize("p,cfg", CASES, ids=[p.name for p, _ in CASES])
def test_every_pass_matches_the_gathers(p, cfg):
    x, _, _ = random_conv_inputs(p, seed=5)
    for m in _mappings(p, cfg):
        lay = realize(p, m, cfg).layout
        g = lay.geometry
        want = lay.gather_data(x)
        one = default_builder(list(pack_program(g)), "pack", ONE_THREAD)
        got = np.empty(g.data_shape, np.int8)
        one(x, got)
        np.testing.assert_array_equal(got, want, err_msg=f"{m.label}: one pass")
        (a, b) = channel_major_programs(g)
        first, second = default_builder(list(a), "major", ONE_THREAD), default_builder(list(b), "tr", ONE_THREAD)
        mid, got2 = np.empty(a[1].shape, np.int8), np.empty(g.data_shape, np.int8)
        first(x, mid)
        second(mid, got2)
        np.testing.assert_array_equal(got2, want, err_msg=f"{m.label}: two passes")
        blocked = np.random.default_rng(2).integers(-128, 128, g.out_shape, dtype=np.int8)
        unpacked = np.empty((p.batch, p.out_channels, p.out_h, p.out_w), np.int8)
        default_builder(list(unpack_program(g)), "unpack", ONE_THREAD)(blocked, unpacked)
        np.testing.assert_array_equal(unpacked, lay.gather_out(blocked), err_msg=f"{m.label}: unpack")


def test_the_template_layout_is_tvms_pad_and_transpose():
    """The reference mapping's compiled transforms are the template's own (pad, block; unblock, crop)."""
    p, cfg = ConvProblem(3, 5, 7, 6, 20, 3, 3, 1, 1), VTA16
    x, _, _ = random_conv_inputs(p, seed=6)
    r = realize(p, reference_embedding(p, cfg), cfg)
    host = HostTransforms(r.layout.geometry, ONE_THREAD)
    np.testing.assert_array_equal(host.pack(x), pad_and_block(x, cfg, r.shape.in_channels))
    assert host.pack_passes in (1, 2)
    blocked = np.random.default_rng(3).integers(-128, 128, r.layout.geometry.out_shape, dtype=np.int8)
    np.testing.assert_array_equal(host.unpack(blocked), unblock(blocked, p.batch, p.out_channels))


def test_a_builder_is_asked_for_every_kernel():
    """The bench's tuner plugs in as `builder`: each transform kernel goes through it, on the given target."""
    p, cfg = ConvProblem(1, 3, 8, 8, 16, 3, 3, 1, 1), VTA16
    asked = []

    def builder(args, name, target):
        asked.append((name, target.cores))
        return default_builder(args, name, target)

    x, _, _ = random_conv_inputs(p, seed=7)
    lay = realize(p, reference_embedding(p, cfg), cfg).layout
    host = HostTransforms(lay.geometry, ONE_THREAD, builder)
    np.testing.assert_array_equal(host.pack(x), lay.gather_data(x))
    assert sorted(n for n, _ in asked) == ["vta_pack_channel_major", "vta_pack_data", "vta_pack_transpose"]
    host.unpack(np.zeros(lay.geometry.out_shape, np.int8))
    assert asked[-1] == ("vta_unpack_out", 1)
