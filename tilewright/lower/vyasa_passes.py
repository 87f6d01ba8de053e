"""Vyasa's passes after triplet extraction (sections III-B to III-E): column fusion, the reuse
graphs of vector and scalar loads, the shuffle network's selections, lazy stores and the
interleaving of loads and stores with the MACs, then the register-file check.

Input: per output vector (a jam point) its offset in the output and its triplet rows, each
((x offset of every lane), z offset, is a zero tap) in elements past the iteration's pointers;
lane i of a row reads x at its lane's offset and the broadcast z element, and adds to output
lane i."""

from __future__ import annotations

from ..errors import ScheduleError
from .aie_program import AIEProgram, Load, Mac, Store
from .vyasa_select import select_x16, select_x32, select_z


def _fuse(rows, columns: int, fuse: bool, out: int):
    """Each MAC's columns, one triplet row per column: 16-bit pairs of rows in z order (with the
    zero-padded tap, a filter row's taps 2j and 2j+1), or (ablation) a row with its interleaved zero
    weight."""
    if columns == 1:
        return [[r] for r in rows]
    if not fuse:
        return [[r, (tuple(x + 1 for x in r[0]), r[1] + 1, True)] for r in rows]
    rows = sorted(rows, key=lambda r: (r[1], r[0][0]))
    if len(rows) % 2:
        raise ScheduleError(f"column fusion: the output vector at {out} has {len(rows)} 1-D MACs, an odd count "
                            f"the 2-column datapath cannot pair (no filter axis to pad with a zero tap)")
    return [rows[k:k + 2] for k in range(0, len(rows), 2)]


def _components(windows: list[tuple[int, int]], reuse: bool) -> list[tuple[int, int]]:
    """Connected components of the reuse graph: windows that share an element (transitively)."""
    if not reuse:
        return list(windows)
    merged: list[list[int]] = []
    for lo, hi in sorted(windows):
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [tuple(m) for m in merged]


def assemble(form, schedule, config, loops, pointers, layouts, roles, groups) -> AIEProgram:
    bits = form.bits
    lanes, columns = config.datapath(bits)
    e256, ealign = config.port_bits // bits, config.align_bits // bits
    macs = []  # (group, columns)
    for g, (out, rows) in enumerate(groups):
        macs.extend((g, cols) for cols in _fuse(rows, columns, schedule.fuse_columns, out))

    # reuse graph over x windows; a MAC's window spans its columns' lanes
    windows = [(min(min(c[0]) for c in cols), max(max(c[0]) for c in cols) + 1) for _, cols in macs]
    if schedule.reuse_graph:
        comps = _components(windows, True)
        comp_of = [next(k for k, (lo, hi) in enumerate(comps) if lo <= w[0] and w[1] <= hi) for w in windows]
    else:
        comps, comp_of = windows, list(range(len(windows)))
    xregs = []
    for lo, hi in comps:  # a register starts on a 128-bit boundary and fills with 256-bit loads
        start = lo // ealign * ealign
        end = start + -(-(hi - start) // e256) * e256
        width = (end - start) * bits
        if width > config.max_register_bits:
            raise ScheduleError(f"the reuse graph's component x[{lo}:{hi}] needs a {width}-bit register, wider than "
                                f"the {config.max_register_bits} bits one operand may name; use a smaller "
                                f"unroll-and-jam along the vector axis")
        xregs.append((start, end, 512 if width <= 512 else 1024))

    body, registers = [], {}
    live: dict[str, list[int]] = {}  # register -> [first, last] positions in body
    zloaded: dict[int, str] = {}
    acc_of: dict[int, str] = {}
    last_mac = {g: max(k for k, (gg, _) in enumerate(macs) if gg == g) for g in range(len(groups))}
    first_mac = {g: min(k for k, (gg, _) in enumerate(macs) if gg == g) for g in range(len(groups))}
    order = sorted(range(len(macs)), key=lambda k: (xregs[comp_of[k]][0], comp_of[k], macs[k][0], k))
    emitted_x = set()

    def use(reg: str) -> None:
        live.setdefault(reg, [len(body), len(body)])[1] = len(body)

    for k in order:
        g, cols = macs[k]
        c = comp_of[k]
        xs, xe, xbits = xregs[c]
        xname = f"x{c}"
        if c not in emitted_x:
            emitted_x.add(c)
            registers[xname] = xbits
            for part, off in enumerate(range(xs, xe, e256)):
                use(xname)
                body.append(Load(xname, "x", off, part))
        zs = [c[1] for c in cols]
        chunk = min(zs) // e256 * e256  # the 256-bit word; a pair across its end: the 128-bit-aligned one
        if max(zs) >= chunk + e256:
            chunk = min(zs) // ealign * ealign
        if max(zs) >= chunk + e256:
            raise ScheduleError(f"column fusion: the weights of one MAC (z offsets {zs}) straddle two 256-bit "
                                f"registers, which one z operand cannot name; pad the filter rows")
        zkey = chunk if schedule.reuse_graph else -1 - k
        if zkey not in zloaded:
            zname = f"z{len(zloaded)}"
            zloaded[zkey] = zname
            registers[zname] = 256
            use(zname)
            body.append(Load(zname, "z", chunk, 0))
        zname = zloaded[zkey]
        idx = [[c[0][i] - xs for c in cols] for i in range(lanes)]
        xsel = select_x32(tuple(r[0] for r in idx), xe - xs) if columns == 1 else select_x16(
            tuple(tuple(r) for r in idx), xe - xs)
        zsel = select_z(tuple(tuple(c[1] - chunk for c in cols) for _ in range(lanes)), e256)
        if xsel is None or zsel is None:
            raise ScheduleError(f"the shuffle network cannot select {'x' if xsel is None else 'z'} operands "
                                f"{idx[:2]}... of a {columns}-column MAC from its register; this fusion or "
                                f"layout is not expressible")
        out = groups[g][0]
        acc = acc_of.setdefault(g, f"acc{g}")
        first = k == first_mac[g]
        if not schedule.lazy_stores and not first:
            # the partial sum comes back through memory at twice the operand width (the precision it
            # needs): 512 bits, two 256-bit loads (and two stores below)
            body.extend(Load(acc, "o", out, part) for part in range(2))
        use(xname), use(zname), use(acc)
        body.append(Mac(acc, first or not schedule.lazy_stores, xname, xsel, zname, zsel, len(cols),
                        tuple(tuple(c[0][i] for c in cols) for i in range(lanes)), tuple(zs),
                        tuple(c[2] for c in cols)))
        if k == last_mac[g] or not schedule.lazy_stores:
            use(acc)
            body.extend(Store(acc, out) for _ in range(1 if k == last_mac[g] else 2))

    _check_registers(body, live, registers, config)
    return AIEProgram(form, schedule, bits, lanes, columns, loops, pointers, layouts, roles, registers,
                      tuple(body), runnable=schedule.lazy_stores and (schedule.fuse_columns or columns == 1))


def _check_registers(body, live, registers, config) -> None:
    """Vyasa prunes a point whose live vectors exceed the register file, and so do we: no spills."""
    n = len(body)
    vec = [0] * n
    accs = [0] * n
    for reg, (a, b) in live.items():
        for p in range(a, b + 1):
            if reg.startswith("acc"):
                accs[p] += 1
            else:
                vec[p] += registers[reg]
    worst = max(vec, default=0)
    if worst > config.register_file_bits:
        raise ScheduleError(f"{worst} bits of vector registers are live at once, over the register file's "
                            f"{config.register_file_bits} ({config.vector_registers} x {config.register_bits}); "
                            f"use a smaller unroll-and-jam")
    if max(accs, default=0) > config.accumulators:
        raise ScheduleError(f"{max(accs)} accumulators are live at once, over the core's {config.accumulators}; "
                            f"use a smaller unroll-and-jam")


__all__ = ["assemble"]
