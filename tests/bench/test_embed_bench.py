"""The embedding benchmark drivers, reduced to small layers: a sweep row (padding proof, hand mapping, the
first embedding bit-exact in the simulator) and a payoff row (reference and candidates bit-exact, ratios)."""

import pytest

from tilewright.bench import embed_sweep, vta_embed_payoff
from tilewright.intrin import get, vta_gemm
from tilewright.search.vta_embed import ConvProblem
from tilewright.targets.vta import VTAConfig

pytest.importorskip("ortools", reason="OR-Tools is not installed (pip install '.[test]')")


def test_sweep_rows():
    cfg = VTAConfig()
    plain = embed_sweep.embed_layer(ConvProblem(1, 32, 10, 10, 32, 3, 3, 1, 1, name="plain"), vta_gemm(cfg))
    assert not plain["needs_padding"] and plain["tvm_mapping"]
    embed_sweep.run_first(ConvProblem(1, 32, 10, 10, 32, 3, 3, 1, 1), cfg, plain)
    assert plain["exact"] and plain["cycles"] > 0
    low = embed_sweep.embed_layer(ConvProblem(1, 3, 12, 12, 16, 3, 3, 1, 1, name="low"), vta_gemm(cfg))
    assert low["needs_padding"] and "pad" in low["infeasible_without_padding"]
    x86 = embed_sweep.embed_layer(ConvProblem(1, 64, 8, 8, 32, 3, 3, 1, 1), get("x86.dot_16x4_u8s8"))
    assert x86["tvm_mapping"]  # lanes on output channels, the 4-wide reduction on input channels
    assert len(embed_sweep.deepbench_problems()) == 104  # 103 unique DeepBench shapes + the paper's 151 x 40


def test_payoff_row():
    p = ConvProblem(1, 8, 12, 12, 16, 3, 3, 1, 1, name="t")
    row = vta_embed_payoff.run_layer(p, VTAConfig(batch=8, block_in=8, block_out=8), top_k=2, trials=0)
    assert row["reference"]["exact"] and row["best"]["exact"]
    assert row["op_speedup"] > 1 and row["data_ratio"] < 1  # batch 1 -> 8 lanes: padding costs 8x
    from tilewright.bench.provenance import provenance

    doc = {"table": 5, "block": "8x8x8", "trials": 0, "layers": [row], "provenance": provenance(threads=1),
           "summary": dict.fromkeys(("op", "transform", "combined", "data", "weights", "total"), 1.0)}
    assert "| t |" in vta_embed_payoff.markdown(doc)


def test_tilings_of_a_previous_run_are_read_back(tmp_path):
    """--tilings-from: every printed tiling parses to the tiling that printed it, keyed by layer and realization."""
    import json

    from tilewright.lower.vta_conv import VTATiling

    tilings = [VTATiling(8, 12, 1, 1), VTATiling(4, 7, 2, 3, 2, "h"), VTATiling(2, 2, 4, 1, 4, "co", "co h w")]
    for t in tilings:
        assert vta_embed_payoff.parse_tiling(str(t)) == t
    side = lambda name, t: {"realization": name, "tiling": str(t)}  # noqa: E731
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"layers": [{"layer": "L0", "reference": side("ref", tilings[0]),
                                            "candidates": [side("#1", tilings[1]), side("#2", tilings[2])]}]}))
    assert vta_embed_payoff.recorded_tilings(path) == {("L0", "ref"): tilings[0], ("L0", "#1"): tilings[1],
                                                        ("L0", "#2"): tilings[2]}
