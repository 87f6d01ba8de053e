"""The HLS dialect: an `HLSDesign` as a Vitis-HLS-style C++ project (FlexTensor Fig. 4c).

`render_hls(form, design, device, name)` returns the files of a project: the kernel (one read
function per operand, the compute function, the write function, and the top function with its
`m_axi` / `s_axilite` interfaces and a DATAFLOW region connecting them by `hls::stream`s), its
header, a testbench that checks the kernel against data files, and the Tcl script a vendor tool
runs. The PIPELINE / UNROLL / ARRAY_PARTITION directives carry the design's II, PE array and banks.
Integer accumulators are as wide as the proven range of the sum needs (`ap_int<W>` where W is
not 8, 16, 32 or 64)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..lower.hls_design import HLSDesign, box, box_strides, initiation_interval, output_tiles, reduce_tiles
from ..lower.hls_form import HLSForm
from ..lower.value_range import tensor_range

C_TYPES = {"float32": "float", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
           "int32": "int32_t", "int64": "int64_t"}


@dataclass(frozen=True)
class HLSProject:
    name: str
    files: dict  # file name -> text
    acc_type: str

    @property
    def kernel(self) -> str:
        return self.files[f"{self.name}.cpp"]


def accumulator_type(form: HLSForm) -> str:
    """float for float32; else the narrowest integer that holds every partial sum (the te's own type,
    wrapping as it does, where the inputs' ranges do not bound the sum below it)."""
    if form.acc_dtype == "float32":
        return "float"
    bits_acc = 32 if form.acc_dtype == "int32" else 64
    ranges = [tensor_range(o.source) for o in form.operands]
    taps = math.prod(e for _, e in form.reduce)
    bound = max(abs(x) for x in ranges[0]) * max(abs(x) for x in ranges[1]) * taps
    width = bound.bit_length() + 1
    if width >= bits_acc:
        return f"ap_int<{bits_acc}>"
    return C_TYPES[f"int{width}"] if width in (8, 16, 32) else f"ap_int<{width}>"


def _flat(strides, terms) -> str:
    parts = [f"{s} * ({t})" if s != 1 else f"({t})" for s, t in zip(strides, terms) if t != "0"]
    return " + ".join(parts) or "0"


def _affine(row, names) -> str:
    terms = [(f"{c} * {n}" if c != 1 else n) for c, n in zip(row, names) if c]
    return " + ".join(terms) or "0"


def _origins(form: HLSForm, d: HLSDesign, which: str, var: str) -> list[str]:
    """Statements setting o_<axis> (a tile's first index) from the tile counter `var`."""
    axes = form.spatial if which == "spatial" else form.reduce
    lines, div = [], 1
    for n, e in reversed(axes):
        t = d.tile_of(n)
        lines.append(f"const int o_{n} = (({var} / {div}) % {-(-e // t)}) * {t};")
        div *= -(-e // t)
    return list(reversed(lines))


def _read_fn(form: HLSForm, d: HLSDesign, k: int) -> str:
    op = form.operands[k]
    x = "ab"[k]
    ext = box(op, d)
    names = [n for n, _ in form.axes]
    dims = len(ext)
    lines = [f"static void read_{x}(const data_t *{x}, hls::stream<beat_{x}_t> &s, int pipe) {{",
             "  for (int t = pipe; t < N_OUT; t += PIPES) {",
             *(f"    {s}" for s in _origins(form, d, "spatial", "t")),
             "    for (int q = 0; q < N_RED; q++) {",
             *(f"      {s}" for s in _origins(form, d, "reduce", "q"))]
    origin_names = [f"o_{n}" for n in names]
    for dim in range(dims):
        lines.append(f"      const int base{dim} = {_affine(op.matrix[dim], origin_names)} + {op.offset[dim]};")
    total = math.prod(ext)
    lines += [f"    read_{x}_beats:",
              f"      for (int i = 0; i < {math.ceil(total / d.beat)}; i++) {{",
              "#pragma HLS PIPELINE II=1",
              f"        beat_{x}_t beat;",
              "        for (int l = 0; l < BEAT; l++) {",
              "#pragma HLS UNROLL",
              "          const int e = i * BEAT + l;"]
    strides = box_strides(ext)
    src_strides = box_strides(op.shape)
    for dim in range(dims):
        lines.append(f"          const int j{dim} = base{dim} + (e / {strides[dim]}) % {ext[dim]};")
    inside = " && ".join([f"e < {total}"] + [f"j{dim} >= 0 && j{dim} < {op.shape[dim]}" for dim in range(dims)])
    index = _flat(src_strides, [f"j{dim}" for dim in range(dims)])
    lines += [f"          beat.v[l] = ({inside}) ? {x}[{index}] : (data_t)0;",
              "        }", "        s.write(beat);", "      }", "    }", "  }", "}"]
    return "\n".join(lines)


def _compute_fn(form: HLSForm, d: HLSDesign) -> str:
    """fill_round (beats into the buffers), mac_round (the PE array over one round), drain_tile (the
    accumulators to the write stage), and compute, which runs them with one buffer set or two."""
    names = [n for n, _ in form.axes]
    ii, _ = initiation_interval(form, d)
    sizes = [math.prod(box(op, d)) for op in form.operands]
    acc_words = math.prod(d.tile_of(n) for n, _ in form.spatial)
    lines = [f"static void fill_round(hls::stream<beat_a_t> &sa, hls::stream<beat_b_t> &sb, data_t buf_a[{sizes[0]}], "
             f"data_t buf_b[{sizes[1]}]) {{"]
    for x, n in zip("ab", sizes):
        lines += [f"fill_{x}:",
                  f"  for (int i = 0; i < {math.ceil(n / d.beat)}; i++) {{",
                  "#pragma HLS PIPELINE II=1",
                  f"    const beat_{x}_t beat = s{x}.read();",
                  "    for (int l = 0; l < BEAT; l++) {",
                  "#pragma HLS UNROLL",
                  f"      if (i * BEAT + l < {n}) buf_{x}[i * BEAT + l] = beat.v[l];",
                  "    }", "  }"]
    lines += ["}", "",
              f"static void mac_round(const data_t buf_a[{sizes[0]}], const data_t buf_b[{sizes[1]}], "
              f"acc_t acc[{acc_words}]) {{"]
    # reduce axes outside spatial ones: an accumulator recurs only after the tile's spatial iterations
    order = [n for n, _ in form.reduce] + [n for n, _ in form.spatial]
    depth = 1
    lines.append("mac:")
    for n in order:
        lines.append(f"{'  ' * depth}for (int {n}_o = 0; {n}_o < {d.tile_of(n) // d.unroll_of(n)}; {n}_o++) {{")
        depth += 1
    lines.append(f"#pragma HLS PIPELINE II={ii}")
    for n in order:
        lines += [f"{'  ' * depth}for (int {n}_i = 0; {n}_i < {d.unroll_of(n)}; {n}_i++) {{", "#pragma HLS UNROLL"]
        depth += 1
    pad = "  " * depth
    idx = []
    for op in form.operands:
        strides = box_strides(box(op, d))
        idx.append(_flat(strides, [_affine(row, [f"l_{n}" for n in names]) for row in op.matrix]))
    acc_idx = _flat(box_strides([d.tile_of(n) for n, _ in form.spatial]), [f"l_{n}" for n, _ in form.spatial])
    lines += [f"{pad}const int l_{n} = {n}_o * {d.unroll_of(n)} + {n}_i;" for n in names]
    lines.append(f"{pad}acc[{acc_idx}] += (acc_t)buf_a[{idx[0]}] * (acc_t)buf_b[{idx[1]}];")
    for _ in range(2 * len(order)):
        depth -= 1
        lines.append("  " * depth + "}")
    lines += ["}", "",
              f"static void drain_tile(acc_t acc[{acc_words}], hls::stream<beat_y_t> &sy) {{",
              "drain:",
              f"  for (int i = 0; i < {math.ceil(acc_words / d.beat)}; i++) {{",
              "#pragma HLS PIPELINE II=1",
              "    beat_y_t beat;",
              "    for (int l = 0; l < BEAT; l++) {",
              "#pragma HLS UNROLL",
              f"      const int e = i * BEAT + l < {acc_words} ? i * BEAT + l : {acc_words - 1};",
              "      beat.v[l] = acc[e];",
              "      acc[e] = 0;",
              "    }",
              "    sy.write(beat);",
              "  }", "}", "",
              "static void compute(hls::stream<beat_a_t> &sa, hls::stream<beat_b_t> &sb, hls::stream<beat_y_t> &sy, "
              "int pipe) {"]
    sets = "[2]" if d.double_buffer else ""
    dim = " dim=2" if d.double_buffer else ""
    for x, n, part in zip("ab", sizes, d.partition):
        lines += [f"  data_t buf_{x}{sets}[{n}];",
                  f"#pragma HLS ARRAY_PARTITION variable=buf_{x} cyclic factor={part}{dim}"]
        if d.double_buffer:
            lines.append(f"#pragma HLS ARRAY_PARTITION variable=buf_{x} complete dim=1")
    lines += [f"  acc_t acc[{acc_words}];",
              f"#pragma HLS ARRAY_PARTITION variable=acc cyclic factor={d.partition[2]}",
              f"  for (int i = 0; i < {acc_words}; i++) acc[i] = 0;",
              "  const int rounds = (N_OUT / PIPES) * N_RED;"]
    if d.double_buffer:  # round r unpacks into one set while round r - 1 computes from the other
        lines += ["  for (int r = 0; r <= rounds; r++) {",
                  "    if (r < rounds) fill_round(sa, sb, buf_a[r & 1], buf_b[r & 1]);",
                  "    if (r > 0) {",
                  "      mac_round(buf_a[(r - 1) & 1], buf_b[(r - 1) & 1], acc);",
                  "      if ((r - 1) % N_RED == N_RED - 1) drain_tile(acc, sy);",
                  "    }", "  }", "}"]
    else:
        lines += ["  for (int r = 0; r < rounds; r++) {",
                  "    fill_round(sa, sb, buf_a, buf_b);",
                  "    mac_round(buf_a, buf_b, acc);",
                  "    if (r % N_RED == N_RED - 1) drain_tile(acc, sy);",
                  "  }", "}"]
    return "\n".join(lines)


def _write_fn(form: HLSForm, d: HLSDesign) -> str:
    sp = [n for n, _ in form.spatial]
    tiles = [d.tile_of(n) for n in sp]
    ystrides = box_strides([e for _, e in form.spatial])
    words = math.prod(tiles)
    lines = ["static void write_y(hls::stream<beat_y_t> &sy, out_t *y, int pipe) {",
             "  for (int t = pipe; t < N_OUT; t += PIPES) {",
             *(f"    {s}" for s in _origins(form, d, "spatial", "t")),
             "  write:",
             f"    for (int i = 0; i < {math.ceil(words / d.beat)}; i++) {{",
             "#pragma HLS PIPELINE II=1",
             "      const beat_y_t beat = sy.read();",
             "      for (int l = 0; l < BEAT; l++) {",
             "#pragma HLS UNROLL",
             "        const int e = i * BEAT + l;"]
    tstrides = box_strides(tiles)
    lines += [f"        const int y_{n} = o_{n} + (e / {s}) % {t};" for n, s, t in zip(sp, tstrides, tiles)]
    # a tile that overhangs its axis computed zero-padded rows: they are not stored
    guard = " && ".join([f"e < {words}"] + [f"y_{n} < {e}" for (n, e), t in zip(form.spatial, tiles) if e % t])
    lines += [f"        if ({guard}) y[{_flat(ystrides, [f'y_{n}' for n in sp])}] = (out_t)beat.v[l];", "      }",
              "    }", "  }", "}"]
    return "\n".join(lines)


def _top(form: HLSForm, d: HLSDesign, name: str) -> str:
    a, b = (o.name for o in form.operands)
    sizes = [math.prod(box(op, d)) for op in form.operands]
    acc_words = math.prod(d.tile_of(n) for n, _ in form.spatial)
    lines = [f"void {name}(const data_t *{a}, const data_t *{b}, out_t *y) {{",
             f"#pragma HLS INTERFACE m_axi port={a} offset=slave bundle=gmem0 max_widen_bitwidth=512",
             f"#pragma HLS INTERFACE m_axi port={b} offset=slave bundle=gmem1 max_widen_bitwidth=512",
             "#pragma HLS INTERFACE m_axi port=y offset=slave bundle=gmem2 max_widen_bitwidth=512",
             *(f"#pragma HLS INTERFACE s_axilite port={p}" for p in (a, b, "y", "return"))]
    lines.append("#pragma HLS DATAFLOW")
    for p in range(d.pipelines):
        lines += [f"  hls::stream<beat_a_t> sa{p}(\"sa{p}\");", f"  hls::stream<beat_b_t> sb{p}(\"sb{p}\");",
                  f"  hls::stream<beat_y_t> sy{p}(\"sy{p}\");",
                  f"#pragma HLS STREAM variable=sa{p} depth={math.ceil(sizes[0] / d.beat)}",
                  f"#pragma HLS STREAM variable=sb{p} depth={math.ceil(sizes[1] / d.beat)}",
                  f"#pragma HLS STREAM variable=sy{p} depth={math.ceil(acc_words / d.beat)}",
                  f"  read_a({a}, sa{p}, {p});", f"  read_b({b}, sb{p}, {p});",
                  f"  compute(sa{p}, sb{p}, sy{p}, {p});", f"  write_y(sy{p}, y, {p});"]
    lines.append("}")
    return "\n".join(lines)


def render_hls(form: HLSForm, d: HLSDesign, device, name: str = "kernel") -> HLSProject:
    acc = accumulator_type(form)
    out = C_TYPES[form.acc_dtype]
    a, b = form.operands
    head = [f"// {name}: {form.output.name} = sum({a.name} * {b.name}) as an HLS design for {device.name} "
            f"({device.part}); design {d}",
            "#pragma once", '#include "tw_hls.h"', "#include <cstdint>",
            f"typedef {C_TYPES[form.in_dtype]} data_t;", f"typedef {acc} acc_t;", f"typedef {out} out_t;",
            f"const int BEAT = {d.beat};", f"const int PIPES = {d.pipelines};",
            f"const int N_OUT = {output_tiles(form, d)};", f"const int N_RED = {reduce_tiles(form, d)};",
            "struct beat_a_t { data_t v[BEAT]; };", "struct beat_b_t { data_t v[BEAT]; };",
            "struct beat_y_t { acc_t v[BEAT]; };",
            f"void {name}(const data_t *{a.name}, const data_t *{b.name}, out_t *y);", ""]
    body = [f'#include "{name}.h"', "", _read_fn(form, d, 0), "", _read_fn(form, d, 1), "", _compute_fn(form, d), "",
            _write_fn(form, d), "", _top(form, d, name), ""]
    sizes = [math.prod(o.shape) for o in form.operands] + [math.prod(e for _, e in form.spatial)]
    tb = [f'#include "{name}.h"', "#include <cmath>", "#include <cstdio>", "#include <vector>",
          "#ifndef TW_VENDOR_HLS", "long long tw_csim_faults = 0;", "#endif",
          "template <typename T> static bool load(const char *path, std::vector<T> &v) {",
          "  FILE *f = fopen(path, \"rb\"); if (!f) return false;",
          "  size_t n = fread(v.data(), sizeof(T), v.size(), f); fclose(f); return n == v.size();", "}",
          "int main() {",
          f"  std::vector<data_t> a({sizes[0]}), b({sizes[1]});",
          f"  std::vector<out_t> y({sizes[2]}), want({sizes[2]});",
          "  if (!load(\"a.bin\", a) || !load(\"b.bin\", b) || !load(\"y.bin\", want)) {",
          "    printf(\"missing a.bin / b.bin / y.bin\\n\"); return 2; }",
          f"  {name}(a.data(), b.data(), y.data());",
          "  int bad = 0;",
          f"  for (int i = 0; i < {sizes[2]}; i++)",
          "    if (std::fabs((double)y[i] - (double)want[i]) > 1e-4 * (1.0 + std::fabs((double)want[i]))) bad++;",
          "  printf(\"%d of %d outputs differ\\n\", bad, (int)y.size());",
          "  return bad != 0;", "}", ""]
    tcl = [f"open_project {name}_prj", f"set_top {name}", f"add_files {name}.cpp", f"add_files -tb tb_{name}.cpp",
           "add_files -tb {a.bin b.bin y.bin}", "open_solution sol1 -flow_target vitis",
           f"set_part {device.part}", f"create_clock -period {1000 / device.clock_mhz:g}",
           "csim_design", "csynth_design", "exit", ""]
    files = {f"{name}.h": "\n".join(head), f"{name}.cpp": "\n".join(body), f"tb_{name}.cpp": "\n".join(tb),
             "run_hls.tcl": "\n".join(tcl)}
    return HLSProject(name, files, acc)


__all__ = ["C_TYPES", "HLSProject", "accumulator_type", "render_hls"]
