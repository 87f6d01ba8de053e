"""ONNX's RNN, GRU and LSTM unrolled over their (static) sequence at import: the input projections of
every step are one matmul per gate, each step a recurrent matmul per gate, the gate activations and
the state update; `sequence_lens` (a run-time input) holds a row's state past its length and zeroes
its outputs there, as ONNX defines. Directions forward, reverse and bidirectional; layout 0 and 1;
clip; LSTM peepholes and input_forget; GRU's linear_before_reset; the activations ONNX lists that the
graph spells (others refused by name). The unrolled graph grows with the sequence: past MAX_STEPS
steps a loop kernel would be the right lowering, and the import refuses."""

from __future__ import annotations

import numpy as np

from .onnx_activations import _c

MAX_STEPS = 512
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_NEEDS = {"HardSigmoid": (0.2, 0.5), "LeakyRelu": (0.01, None), "Affine": (1.0, 0.0), "ScaledTanh": (1.0, 1.0),
          "ThresholdedRelu": (1.0, None), "Elu": (1.0, None), "Sigmoid": None, "Tanh": None, "Relu": None,
          "Softsign": None, "Softplus": None}


def _activation(imp, name, alpha, beta, x):
    if name == "Sigmoid":
        return imp.emit("sigmoid", [x])
    if name == "Tanh":
        return imp.emit("tanh", [x])
    if name == "Relu":
        return imp.emit("relu", [x])
    if name == "HardSigmoid":
        return imp.emit("clip", [imp.emit("add", [imp.emit("mul", [x, _c(imp, x, alpha)]), _c(imp, x, beta)])],
                        {"min": 0.0, "max": 1.0})
    if name == "LeakyRelu":
        return imp.emit("leaky_relu", [x], {"alpha": alpha})
    if name == "Affine":
        return imp.emit("add", [imp.emit("mul", [x, _c(imp, x, alpha)]), _c(imp, x, beta)])
    if name == "ScaledTanh":
        return imp.emit("mul", [imp.emit("tanh", [imp.emit("mul", [x, _c(imp, x, beta)])]), _c(imp, x, alpha)])
    if name == "ThresholdedRelu":
        return imp.emit("where", [imp.emit("greater", [x, _c(imp, x, alpha)]), x, _c(imp, x, 0)])
    if name == "Elu":
        negative = imp.emit("mul", [imp.emit("sub", [imp.emit("exp", [x]), _c(imp, x, 1)]), _c(imp, x, alpha)])
        return imp.emit("where", [imp.emit("greater", [x, _c(imp, x, 0)]), x, negative])
    if name == "Softsign":
        return imp.emit("div", [x, imp.emit("add", [_c(imp, x, 1), imp.emit("abs", [x])])])
    decay = imp.emit("exp", [imp.emit("neg", [imp.emit("abs", [x])])])  # Softplus, without overflow
    return imp.emit("add", [imp.emit("maximum", [x, _c(imp, x, 0)]),
                            imp.emit("log", [imp.emit("add", [_c(imp, x, 1), decay])])])


def _activations(imp, n, a, directions):
    names = list(a.get("activations", [])) or _DEFAULT_ACTIVATIONS[n.op_type] * directions
    names = [s.decode() if isinstance(s, bytes) else s for s in names]
    per = len(_DEFAULT_ACTIVATIONS[n.op_type])
    if len(names) != per * directions:
        raise imp.fail(f"{len(names)} activations ({per} per direction expected)")
    alphas, betas = list(a.get("activation_alpha", [])), list(a.get("activation_beta", []))
    out = []
    for name in names:
        if name not in _NEEDS:
            raise imp.fail(f"activation '{name}'; valid: {', '.join(_NEEDS)}")
        defaults = _NEEDS[name] or (None, None)
        alpha = alphas.pop(0) if defaults[0] is not None and alphas else defaults[0]
        beta = betas.pop(0) if defaults[1] is not None and betas else defaults[1]
        out.append(lambda x, name=name, alpha=alpha, beta=beta: _activation(imp, name, alpha, beta, x))
    return [out[d * per:(d + 1) * per] for d in range(directions)]


class _Weights:
    """Rows [lo, hi) of direction d of an ONNX weight, a constant where the weight is one."""

    def __init__(self, imp, name):
        self.imp, self.name = imp, name
        self.known = imp.known.get(name)

    def part(self, d, lo, hi):
        if self.known is not None:
            return self.imp.b.constant(np.ascontiguousarray(self.known[d, lo:hi]), "rnn_weight")
        v = self.imp.value(self.name)
        shape = self.imp.b.types[v].shape
        s = self.imp.emit("slice", [v], {"begin": (d, lo, *(0,) * (len(shape) - 2)),
                                         "end": (d + 1, hi, *shape[2:]), "step": (1,) * len(shape)})
        return self.imp.emit("reshape", [s], {"shape": (hi - lo, *shape[2:])})


def _times(imp, x, w):
    """x [..., K] times w [N, K] transposed."""
    if imp.b.const_value(w) is not None:
        return imp.emit("dense", [x, w])
    return imp.emit("matmul", [x, imp.emit("permute", [w], {"dims": (1, 0)})])


def recurrent(imp, n, ins, a):
    ins = list(ins) + [""] * (8 - len(ins))
    x = imp.value(ins[0])
    if a.get("layout", 0):
        x = imp.emit("permute", [x], {"dims": (1, 0, 2)})
    seq, batch, _ = imp.b.types[x].shape
    if seq > MAX_STEPS:
        raise imp.fail(f"a sequence of {seq} steps unrolled (at most {MAX_STEPS})")
    hidden, gates = int(a["hidden_size"]), _GATES[n.op_type]
    direction = a.get("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    acts = _activations(imp, n, a, directions)
    lens = None
    if ins[4]:
        lens = imp.value(ins[4])
        lens = imp.emit("reshape", [imp.emit("cast", [lens], {"dtype": "int64"})], {"shape": (batch, 1)})
    ys, finals, cells = [], [], []
    for d in range(directions):
        reverse = direction == "reverse" or d == 1
        y, h, c = _direction(imp, n, a, ins, x, d, reverse, acts[d], lens, seq, batch, hidden, gates)
        ys.append(y)
        finals.append(h)
        cells.append(c)
    _outputs(imp, n, a, ys, finals, cells, seq, batch, hidden)


def _direction(imp, n, a, ins, x, d, reverse, acts, lens, seq, batch, hidden, gates):
    w, r = _Weights(imp, ins[1]), _Weights(imp, ins[2])
    b = _Weights(imp, ins[3]) if ins[3] else None
    clip = a.get("clip")
    zeros = imp.b.constant(np.zeros((batch, hidden), np.float32), "zeros")
    h = _initial(imp, ins[5], d, batch, hidden) if ins[5] else zeros
    c = _initial(imp, ins[6], d, batch, hidden) if n.op_type == "LSTM" and ins[6] else zeros
    proj, rec, rbias = [], [], []
    for g in range(gates):
        xw = _times(imp, x, w.part(d, g * hidden, (g + 1) * hidden))
        rbias.append(b.part(d, (gates + g) * hidden, (gates + g + 1) * hidden) if b else None)
        if b is not None:  # the input bias always adds; GRU's recurrent bias of h~ may go inside the reset
            xw = imp.emit("add", [xw, b.part(d, g * hidden, (g + 1) * hidden)])
        proj.append(xw)
        rec.append(r.part(d, g * hidden, (g + 1) * hidden))
    peep = [_Weights(imp, ins[7]).part(d, k * hidden, (k + 1) * hidden) for k in range(3)] \
        if n.op_type == "LSTM" and ins[7] else None
    outs = []
    steps = range(seq - 1, -1, -1) if reverse else range(seq)
    for t in steps:
        xt = [imp.emit("reshape", [imp.emit("slice", [p], {"begin": (t, 0, 0), "end": (t + 1, batch, hidden),
                                                           "step": (1, 1, 1)})], {"shape": (batch, hidden)})
              for p in proj]
        new_h, new_c = _step(imp, n, a, xt, h, c, rec, rbias, peep, acts, clip)
        if lens is not None:
            valid = imp.emit("less", [imp.b.constant(np.array(t, np.int64), "step"), lens])
            outs.append(imp.emit("where", [valid, new_h, zeros]))
            new_h = imp.emit("where", [valid, new_h, h])
            new_c = imp.emit("where", [valid, new_c, c]) if new_c is not None else None
        else:
            outs.append(new_h)
        h, c = new_h, new_c
    if reverse:
        outs = outs[::-1]
    steps_out = [imp.emit("reshape", [o], {"shape": (1, 1, batch, hidden)}) for o in outs]
    y = steps_out[0] if seq == 1 else imp.emit("concat", steps_out, {"axis": 0})
    return y, h, c


def _initial(imp, name, d, batch, hidden):
    return _Weights(imp, name).part(d, 0, batch)


def _pre(imp, xt, h, rec, bias, clip, inner=None):
    """xt + h R^T (+ the recurrent bias), clipped: a gate's pre-activation."""
    hr = _times(imp, h, rec)
    if bias is not None:
        hr = imp.emit("add", [hr, bias])
    if inner is not None:
        hr = imp.emit("mul", [inner, hr])
    v = imp.emit("add", [xt, hr])
    return imp.emit("clip", [v], {"min": -float(clip), "max": float(clip)}) if clip is not None else v


def _step(imp, n, a, xt, h, c, rec, rbias, peep, acts, clip):
    if n.op_type == "RNN":
        return acts[0](_pre(imp, xt[0], h, rec[0], rbias[0], clip)), None
    if n.op_type == "GRU":
        z = acts[0](_pre(imp, xt[0], h, rec[0], rbias[0], clip))
        rr = acts[0](_pre(imp, xt[1], h, rec[1], rbias[1], clip))
        if a.get("linear_before_reset", 0):
            cand = acts[1](_pre(imp, xt[2], h, rec[2], rbias[2], clip, inner=rr))
        else:
            cand = acts[1](_pre(imp, xt[2], imp.emit("mul", [rr, h]), rec[2], rbias[2], clip))
        keep = imp.emit("mul", [z, h])
        fresh = imp.emit("mul", [imp.emit("sub", [_c(imp, z, 1), z]), cand])
        return imp.emit("add", [fresh, keep]), None
    # LSTM, gates i, o, f, c; peepholes i, o, f
    pre = [_pre(imp, xt[g], h, rec[g], rbias[g], clip) for g in range(4)]
    if peep is not None:
        pre[0] = imp.emit("add", [pre[0], imp.emit("mul", [peep[0], c])])
        pre[2] = imp.emit("add", [pre[2], imp.emit("mul", [peep[2], c])])
    i = acts[0](pre[0])
    f = imp.emit("sub", [_c(imp, i, 1), i]) if a.get("input_forget", 0) else acts[0](pre[2])
    new_c = imp.emit("add", [imp.emit("mul", [f, c]), imp.emit("mul", [i, acts[1](pre[3])])])
    if peep is not None:
        pre[1] = imp.emit("add", [pre[1], imp.emit("mul", [peep[1], new_c])])
    o = acts[0](pre[1])
    return imp.emit("mul", [o, acts[2](new_c)]), new_c


def _outputs(imp, n, a, ys, finals, cells, seq, batch, hidden):
    layout = a.get("layout", 0)
    names = list(n.output) + [""] * 3
    if names[0]:
        y = ys[0] if len(ys) == 1 else imp.emit("concat", ys, {"axis": 1})
        if layout:
            y = imp.emit("permute", [y], {"dims": (2, 0, 1, 3)})
        imp.env[names[0]] = y
    for slot, states in ((1, finals), (2, cells)):
        if not names[slot]:
            continue
        if states[0] is None:
            raise imp.fail(f"output {slot} of {n.op_type}")
        parts = [imp.emit("reshape", [s], {"shape": (1, batch, hidden)}) for s in states]
        v = parts[0] if len(parts) == 1 else imp.emit("concat", parts, {"axis": 0})
        if layout:
            v = imp.emit("permute", [v], {"dims": (1, 0, 2)})
        imp.env[names[slot]] = v


RECURRENT_HANDLERS = {"RNN": recurrent, "GRU": recurrent, "LSTM": recurrent}

__all__ = ["MAX_STEPS", "RECURRENT_HANDLERS"]
