from graph_cases import RESIDUAL_GROUPS, Builder, partition, residual_block

from tilewright.graph.memory_plan import _ORDERS, ALIGN, Interval, _best_placement, _peak, _place, plan_memory
from tilewright.graph.tasks import extract_tasks


def chain(n=5, shape=(4, 16)):
    b = Builder("chain")
    v = b.input("x", shape)
    for i in range(n):
        v = b.op("relu" if i % 2 else "sigmoid", [v], f"v{i}", shape)
    return b.graph(v)


def test_chain_reuses_two_buffers():
    g = chain()
    plan = plan_memory(partition(g))
    size = 4 * 16 * 4
    assert set(plan.buffers) == {"v0", "v1", "v2", "v3"}  # v4 is the graph output: not in the arena
    assert plan.naive_bytes == 4 * size
    assert plan.peak_bytes == 2 * size
    assert plan.offset("v0") == plan.offset("v2") != plan.offset("v1")
    assert "peak" in str(plan)


def test_live_buffers_never_overlap_and_are_aligned():
    g = residual_block()
    plan = plan_memory(partition(g))  # one group per node
    bufs = list(plan.buffers.values())
    for b in bufs:
        assert b.offset % ALIGN == 0
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a.overlaps_in_time(b):
                assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)
    assert plan.peak_bytes < plan.naive_bytes


def test_views_alias_their_input_and_outputs_stay_outside():
    g = residual_block()
    plan = plan_memory(partition(g, RESIDUAL_GROUPS))
    # flat is a graph output, so the pooled value it views lives to the end and is copied out
    assert "flat" not in plan.buffers and "flat" in plan.external
    assert plan.buffers["pool"].last == len(RESIDUAL_GROUPS)
    b = Builder("view")
    x = b.input("x", (2, 8))
    y = b.op("relu", [x], "y", (2, 8))
    z = b.op("reshape", [y], "z", (16,), shape=(16,))
    b.op("sigmoid", [z], "out", (16,))
    plan = plan_memory(partition(b.graph("out")))
    assert plan.aliases == {"z": "y"} and plan.offset("z") == plan.offset("y") == 0


def test_identical_groups_are_one_task():
    g = chain(n=4)
    tasks = extract_tasks(partition(g))
    assert [t.weight for t in tasks] == [2, 2]
    tasks = extract_tasks(partition(residual_block(), RESIDUAL_GROUPS))
    assert len(tasks) == 3 and all(t.weight == 1 for t in tasks)  # conv1 (relu) differs from conv2 (add+relu)


def test_placement_reaches_the_live_bound_where_largest_first_fragments():
    # live bytes per step: 0, 512, 576, 384, 192, 64; placed largest first the peak is 640
    ivs = [Interval("b0", 192, 2, 3), Interval("b1", 256, 1, 1), Interval("b2", 256, 1, 2),
           Interval("b3", 128, 2, 4), Interval("b4", 64, 3, 5)]
    clashes = {a.value: [b for b in ivs if b is not a and a.overlaps_in_time(b)] for a in ivs}
    assert _peak(_place(ivs, _ORDERS[0], clashes, None)) == 640
    placed = _best_placement(ivs)
    assert _peak(placed) == 576
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            if a.overlaps_in_time(b):
                assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)
    assert _best_placement(ivs) == placed  # seeded: the same plan every time
