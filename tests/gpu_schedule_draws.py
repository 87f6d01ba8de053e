"""Random legal GPU schedules of small programs (a hypothesis `data` object draws every choice).

Each program is (args, outputs, schedule-drawing function). A drawn schedule, as in TVM's GPU lessons:
- output tiling: the last spatial axis (x) and optionally one other (y) split into block, optional
  vthread, thread and per-thread loops (split by factor or nparts, divisible or not), the other spatial
  axes outermost (serial, or fused into blockIdx.z); at most THREADS threads per block;
- reductions: optional cache_write(local) computed at the last thread loop, the first reduce axis split
  into k.outer/k.inner, shared cache_reads of inputs at k.outer fetched cooperatively by loops bound to
  the kernel's threadIdx tags (with optional vector split and storage_align), local cache_reads at a
  reduce loop;
- cross-thread reductions: a reduce loop split to the thread count, bound to threadIdx.x directly or
  through rfactor (the partials computed at the bound loop or in their own kernel);
- producers inlined, at a thread loop (local), at a block loop (shared, computed cooperatively) or root;
- vectorize of an innermost per-thread loop of 2 or 4, unroll of one short loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

import tilewright as tw

THREADS = 256  # PoCL runs larger work-groups too, but real GPUs cap at 1024 and CI stays fast


@dataclass
class Tile:
    outer: list = field(default_factory=list)  # unbound spatial loops outside the blocks
    blocks: list = field(default_factory=list)
    vthreads: list = field(default_factory=list)
    threads: list = field(default_factory=list)
    inner: list = field(default_factory=list)  # per-thread loops, x innermost
    tags: dict = field(default_factory=dict)  # threadIdx tag -> extent

    def order(self, reduce=()):
        return [*self.outer, *self.blocks, *self.vthreads, *self.threads, *reduce, *self.inner]


def tile_spatial(data, stage, axes, budget=THREADS, vthreads=True) -> Tile:
    """Bind `stage`'s spatial `axes` (its leaves) to blocks/vthreads/threads; does not reorder."""
    axes = list(axes)
    tiled = [axes[-1]]
    if len(axes) > 1 and data.draw(st.booleans(), label="tile y"):
        tiled.insert(0, data.draw(st.sampled_from(axes[:-1]), label="y axis"))
    names = ["x", "y"] if data.draw(st.booleans(), label="swap x/y") and len(tiled) == 2 else ["y", "x"]
    names = names[-len(tiled):]
    t = Tile()
    rest = [a for a in axes if not any(a is b for b in tiled)]
    if rest:
        if len(rest) > 1:
            stage.reorder(*rest, *tiled)  # fuse takes adjacent loops
            rest = [stage.fuse(*rest)] if data.draw(st.booleans(), label="fuse outer") else rest
        if len(rest) == 1 and data.draw(st.booleans(), label="outer to blockIdx.z"):
            stage.bind(rest[0], tw.thread_axis("blockIdx.z"))
            t.blocks.append(rest[0])
        else:
            t.outer = rest
    for ax, name in zip(tiled, names):
        n_t = data.draw(st.sampled_from([n for n in (1, 2, 3, 4, 5, 8, 16, 32) if n <= budget]), label=f"t{name}")
        budget //= n_t
        per = data.draw(st.integers(1, 4), label=f"per-thread {name}")
        n_v = 2 if vthreads and data.draw(st.integers(0, 3), label=f"vthread {name}") == 0 else 1
        if data.draw(st.booleans(), label=f"block {name} by factor"):
            bo, r = stage.split(ax, factor=n_v * n_t * per)
        else:
            bo, r = stage.split(ax, nparts=data.draw(st.integers(1, ax.extent), label=f"blocks {name}"))
        if n_v > 1:
            v, r = stage.split(r, nparts=n_v)
            stage.bind(v, tw.thread_axis("vthread", name=f"v{name}"))
            t.vthreads.append(v)
        th, r = stage.split(r, nparts=n_t)
        stage.bind(bo, tw.thread_axis(f"blockIdx.{name}"))
        stage.bind(th, tw.thread_axis(f"threadIdx.{name}"))
        t.blocks.append(bo)
        t.threads.append(th)
        t.inner.append(r)
        t.tags[f"threadIdx.{name}"] = n_t
    return t


def cooperative(data, stage, tags: dict, vector=True) -> None:
    """Distribute `stage` (a tile computed inside block loops) over the kernel's threads: every threadIdx
    tag bound once with the kernel's extent (else each thread would write the whole tile)."""
    axes = list(stage.leaf_iter_vars)
    if len(axes) >= len(tags) and len(tags) and data.draw(st.booleans(), label="fetch by nparts"):
        bound = []
        for ax, tag in zip(axes[::-1], sorted(tags)):  # x on the last axis, y on the one before
            o, i = stage.split(ax, nparts=tags[tag])
            stage.bind(o, tw.thread_axis(tag))
            bound.append(o)
        stage.reorder(*bound[::-1], *[a for a in stage.leaf_iter_vars if not any(a is b for b in bound)])
        return
    f = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    vec = None
    if vector and data.draw(st.booleans(), label="vector fetch"):
        f, vec = stage.split(f, factor=data.draw(st.sampled_from([2, 4]), label="fetch lanes"))
    for tag in sorted(tags):  # threadIdx.x innermost
        f, t = stage.split(f, factor=tags[tag])
        stage.bind(t, tw.thread_axis(tag))
    if vec is not None:
        stage.vectorize(vec)


def maybe_align(data, stage) -> None:
    if len(stage.op.axis) >= 2 and data.draw(st.integers(0, 2), label="storage_align?") == 0:
        factor = data.draw(st.sampled_from([2, 4, 8, 16, 32]), label="align factor")
        stage.storage_align(stage.op.axis[-2], factor, data.draw(st.integers(0, factor - 1), label="align offset"))


def annotate(data, stage, inner) -> None:
    """Vectorize the innermost per-thread loop (2 or 4 lanes); unroll one short unbound loop."""
    leaves = stage.leaf_iter_vars
    vec = None
    if inner and leaves[-1] is inner[-1] and inner[-1].extent in (2, 4) and \
            data.draw(st.booleans(), label=f"{stage.name} vectorize"):
        stage.vectorize(inner[-1])
        vec = inner[-1]
    short = [a for a in leaves if a is not vec and stage.thread_tag(a) is None and 1 < a.extent <= 4]
    if short and data.draw(st.integers(0, 2), label=f"{stage.name} unroll?") == 0:
        stage.unroll(data.draw(st.sampled_from(short), label="unroll axis"))


def place_producer(data, s, prod, consumer, tile: Tile) -> None:
    """An injective intermediate: inline, root (its own kernel), at the consumer's last thread loop (local),
    or at its last block loop (shared, computed cooperatively by the block's threads)."""
    stage = s[prod]
    choice = data.draw(st.sampled_from(["inline", "root", "thread", "block"]), label=f"{stage.name} placement")
    if choice == "inline":
        stage.compute_inline()
    elif choice == "root":
        t = tile_spatial(data, stage, stage.op.axis)
        stage.reorder(*t.order())
        annotate(data, stage, t.inner)
    elif choice == "thread":
        stage.compute_at(s[consumer], tile.threads[-1])
        annotate(data, stage, [])
    else:  # a block loop outside the vthreads: inside one the tile would be per thread (local)
        stage.compute_at(s[consumer], tile.blocks[-1])
        cooperative(data, stage, tile.tags)
        maybe_align(data, stage)


# ---- reductions with register tiles and shared tiles --------------------------------------------------

def schedule_injective(data, s, out) -> None:
    """An elementwise/transpose output: optional shared tiles of its inputs at the last block loop,
    fetched cooperatively, and local copies at the last thread loop."""
    C = s[out]
    shared, local = [], []
    for t in list(C.op.input_tensors):
        choice = data.draw(st.sampled_from(["global", "shared", "local"]), label=f"cache {t.name}")
        if choice != "global":
            (shared if choice == "shared" else local).append(s.cache_read(t, choice, [C]))
    tile = tile_spatial(data, C, C.op.axis)
    C.reorder(*tile.order())
    for T in shared:
        s[T].compute_at(C, tile.blocks[-1])
        cooperative(data, s[T], tile.tags)
        maybe_align(data, s[T])
    for T in local:
        s[T].compute_at(C, tile.threads[-1])
    annotate(data, C, tile.inner)


def schedule_tiled_reduction(data, s, out) -> None:
    """`out` a reduction; the intermediates it reads (padded copies) are inlined or root kernels."""
    local = data.draw(st.booleans(), label="cache_write local")
    R = s[s.cache_write(out, "local")] if local else s[out]
    sources = list(R.op.input_tensors)
    shared = {}
    for t in sources:
        if data.draw(st.booleans(), label=f"shared {t.name}"):
            shared[t.name] = s.cache_read(t, "shared", [R])
    locals_ = [s.cache_read(shared.get(t.name, t), "local", [R]) for t in sources
               if data.draw(st.integers(0, 2), label=f"local {t.name}") == 0]
    for p in [t for t in sources if s.stage_of(t) is not None]:
        if data.draw(st.booleans(), label=f"{p.name} inline"):
            s[p].compute_inline()
        else:
            t = tile_spatial(data, s[p], s[p].op.axis)
            s[p].reorder(*t.order())
    C = s[out]
    tile = tile_spatial(data, C, C.op.axis)
    reduce = list(R.op.reduce_axis)
    k0 = reduce[0]
    if k0.extent > 1 and data.draw(st.booleans(), label="split k"):
        reduce[:1] = R.split(k0, factor=data.draw(st.integers(1, k0.extent), label="k factor"))
    if local:
        C.reorder(*tile.order())
        R.compute_at(C, tile.threads[-1])
        R.reorder(*reduce, *R.op.axis)
        inner = list(R.op.axis)
    else:
        C.reorder(*tile.order(reduce))
        inner = tile.inner
    for T in shared.values():
        s[T].compute_at(R, reduce[0])
        cooperative(data, s[T], tile.tags)
        maybe_align(data, s[T])
    for T in locals_:
        s[T].compute_at(R, data.draw(st.sampled_from(reduce), label=f"{T.name} at"))
    annotate(data, C, tile.inner)
    if local:
        annotate(data, R, inner)


def row_reduction(data, s, out, rows_stage_tile=True) -> None:
    """A reduction over the last axis: cross-thread (bound directly or through rfactor) or one thread
    per row with a serial loop."""
    B = s[out]
    (k,) = B.op.reduce_axis
    mode = data.draw(st.sampled_from(["cross", "rfactor", "rfactor root", "serial"]), label=f"{B.name} mode")
    if mode == "serial":
        t = tile_spatial(data, B, B.op.axis, vthreads=False)
        ko, ki = B.split(k, factor=data.draw(st.integers(1, 4), label="k factor"))
        B.reorder(*t.order([ko, ki]))
        B.unroll(ki)
        return
    nt = data.draw(st.sampled_from([2, 3, 4, 8, 16, 32, 64]), label="reduce threads")
    by_nparts = data.draw(st.booleans(), label="threads by nparts")
    ko, ki = B.split(k, nparts=nt) if by_nparts else B.split(k, factor=nt)
    red = ko if by_nparts else ki
    ty = data.draw(st.sampled_from([n for n in (1, 2, 4) if n * nt <= THREADS]), label="rows per block")
    if mode != "cross":
        rf = s.rfactor(out, red, factor_axis=data.draw(st.integers(0, 1), label="factor_axis"))
        red = B.op.reduce_axis[0]
    bo, bi = B.split(B.op.axis[0], factor=ty)
    B.bind(bo, tw.thread_axis("blockIdx.x"))
    B.bind(bi, tw.thread_axis("threadIdx.y"))
    B.bind(red, tw.thread_axis("threadIdx.x"))
    if mode == "rfactor":
        s[rf].compute_at(B, red)
    elif mode == "rfactor root":
        t = tile_spatial(data, s[rf], s[rf].op.axis)
        s[rf].reorder(*t.order(s[rf].op.reduce_axis))


def softmax_fused(data, s, M, E, S) -> None:
    """M and E computed at O's row loop (bound to blockIdx.x), each a cross-thread reduction over the
    same threadIdx.x extent as O's column loop."""
    nt = data.draw(st.sampled_from([2, 3, 4, 8, 16, 32, 64]), label="threads")
    i, j = s[S].op.axis
    by_nparts = data.draw(st.booleans(), label="S by nparts")
    jo, ji = s[S].split(j, nparts=nt) if by_nparts else s[S].split(j, factor=nt)
    tx = jo if by_nparts else ji
    s[S].bind(i, tw.thread_axis("blockIdx.x"))
    s[S].bind(tx, tw.thread_axis("threadIdx.x"))
    for T in (M, E):
        st_ = s[T]
        (k,) = st_.op.reduce_axis
        by_nparts = data.draw(st.booleans(), label=f"{T.name} by nparts")
        ko, ki = st_.split(k, nparts=nt) if by_nparts else st_.split(k, factor=nt)
        red = ko if by_nparts else ki
        if data.draw(st.booleans(), label=f"{T.name} rfactor"):
            rf = s.rfactor(T, red)
            red = st_.op.reduce_axis[0]
            st_.bind(red, tw.thread_axis("threadIdx.x"))
            s[rf].compute_at(st_, red)
        else:
            st_.bind(red, tw.thread_axis("threadIdx.x"))
        st_.compute_at(s[S], i)

