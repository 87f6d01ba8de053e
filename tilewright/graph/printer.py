"""A graph as text: one line per node, `%value: type = op(inputs) {attrs}`."""

from __future__ import annotations


def _attr(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr(x) for x in v) + ")"
    return repr(v) if isinstance(v, str) else str(v)


def format_graph(g) -> str:
    def typed(v):
        t = g.types.get(v)
        return f"%{v}: {t}" if t is not None else f"%{v}"

    lines = [f"graph {g.name}({', '.join(typed(v) for v in g.inputs)}) {{"]
    for n in g.nodes:
        if n.op == "constant":
            lines.append(f"  {typed(n.outputs[0])} = constant")
            continue
        attrs = ", ".join(f"{k}={_attr(v)}" for k, v in n.attrs.items())
        outs = ", ".join(typed(v) for v in n.outputs)
        lines.append(f"  {outs} = {n.op}({', '.join('%' + v for v in n.inputs)})" + (f" {{{attrs}}}" if attrs else ""))
    lines.append(f"  return {', '.join('%' + v for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines)
