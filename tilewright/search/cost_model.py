"""The learned cost model: a small NumPy MLP that scores loop-nest features
(search/features.py) so that faster schedules score higher, trained with a
pairwise rank loss (FlexTensor's choice for its performance model).

Costs of different workloads differ by orders of magnitude, so only pairs of
the same workload are compared: each training pair says "this schedule of
workload w is faster than that one", whatever w's scale. Pairs whose costs
differ by less than `min_ratio` (measurement noise) are not used. With too
few pairs the model stays unfitted (`ready` is False) and says why."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dqn import MLP

MIN_PAIRS = 32  # fewer usable pairs than this: no model


@dataclass(frozen=True)
class FitSummary:
    ok: bool
    samples: int
    groups: int
    pairs: int
    loss: float
    reason: str = ""


class _Adam:
    def __init__(self, params: list[np.ndarray], lr: float = 3e-3, b1: float = 0.9, b2: float = 0.999):
        self.lr, self.b1, self.b2, self.t = lr, b1, b2, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, params, grads, weight_decay: float = 1e-4) -> None:
        self.t += 1
        for p, g, m, v in zip(params, grads, self.m, self.v):
            g = g + weight_decay * p
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            mh = m / (1 - self.b1 ** self.t)
            vh = v / (1 - self.b2 ** self.t)
            p -= self.lr * mh / (np.sqrt(vh) + 1e-8)


def _pairs(costs: np.ndarray, groups: np.ndarray, min_ratio: float, rng, cap: int = 700) -> np.ndarray:
    """(faster, slower) index pairs within each group whose costs differ by more than `min_ratio`:
    all of them in a group of up to `cap` schedules, a random 200 per schedule in a larger one."""
    out = []
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        c = costs[idx]
        if len(idx) <= cap:
            a, b = np.nonzero(c[:, None] * min_ratio < c[None, :])  # a clearly faster than b
        else:
            a, b = rng.integers(0, len(idx), (2, 200 * len(idx)))
            a, b = np.where(c[a] < c[b], a, b), np.where(c[a] < c[b], b, a)
            keep = c[a] * min_ratio < c[b]
            a, b = a[keep], b[keep]
        out.append(np.stack([idx[a], idx[b]], 1))
    return np.concatenate(out) if out else np.zeros((0, 2), int)


class RankModel:
    """score(features) -> higher is faster; `fit(X, costs, groups)` on measured schedules.
    A cost of inf (a schedule that timed out) ranks below every finite one of its group."""

    def __init__(self, n_features: int, hidden: int = 32, layers: int = 3, seed: int = 0):
        self.n_features, self.hidden, self.layers, self.seed = n_features, hidden, layers, seed
        self.net: MLP | None = None
        self.mean = np.zeros(n_features)
        self.scale = np.ones(n_features)
        self.summary = FitSummary(False, 0, 0, 0, math.nan, "not trained yet")

    @property
    def ready(self) -> bool:
        return self.net is not None

    def fit(self, X, costs, groups, steps: int = 300, batch: int = 256, min_ratio: float = 1.03,
            group_weights: dict | None = None) -> FitSummary:
        """Train from scratch (same seed, same data -> same model). `group_weights`: the total weight
        of each group's pairs (e.g. every workload alike, the one being tuned above the others; a
        group not named weighs 1); default: every pair alike, so a group weighs by its pair count."""
        X = np.asarray(X, float).reshape(len(costs), -1) if len(costs) else np.zeros((0, self.n_features))
        costs, groups = np.asarray(costs, float), np.asarray(groups)
        worst = np.where(np.isfinite(costs), costs, np.nan)
        if len(costs) and np.isfinite(costs).any():
            for g in np.unique(groups):  # a timeout ranks below its group's slowest finite cost
                m = groups == g
                top = np.nanmax(worst[m]) if np.isfinite(costs[m]).any() else 1.0
                costs = np.where(m & ~np.isfinite(costs), top * 10.0, costs)
        rng = np.random.default_rng(self.seed)
        pairs = _pairs(costs, groups, min_ratio, rng) if len(costs) else np.zeros((0, 2), int)
        n_groups = len(np.unique(groups)) if len(groups) else 0
        if len(pairs) < MIN_PAIRS:
            self.net = None
            self.summary = FitSummary(False, len(costs), n_groups, len(pairs), math.nan,
                                      f"only {len(pairs)} comparable pairs of schedules (needs {MIN_PAIRS})")
            return self.summary
        self.mean = X.mean(0)
        self.scale = np.where(X.std(0) > 1e-9, X.std(0), 1.0)
        Z = (X - self.mean) / self.scale
        net = MLP(self.n_features, 1, hidden=self.hidden, layers=self.layers, seed=self.seed)
        opt = _Adam(net.weights + net.biases)
        p = None
        if group_weights:  # each group's pairs share its weight
            gid = groups[pairs[:, 0]]
            names, inv, counts = np.unique(gid, return_inverse=True, return_counts=True)
            w = np.array([group_weights.get(g, 1.0) for g in names], float)[inv.ravel()] / counts[inv.ravel()]
            p = np.cumsum(w / w.sum())
        loss = math.nan
        for _ in range(steps):
            n = min(batch, len(pairs))
            pick = pairs[rng.integers(0, len(pairs), n) if p is None else
                         np.minimum(np.searchsorted(p, rng.random(n) * p[-1]), len(pairs) - 1)]
            rows, inv = np.unique(pick.ravel(), return_inverse=True)
            out, acts = net.forward(Z[rows], keep=True)
            s = out[:, 0][inv.reshape(-1, 2)]
            margin = s[:, 0] - s[:, 1]  # should be positive: the first of each pair is faster
            loss = float(np.mean(np.logaddexp(0.0, -margin)))
            g = -1.0 / (1.0 + np.exp(np.clip(margin, -50, 50))) / len(pick)  # d loss / d margin
            grad = np.zeros((len(rows), 1))
            np.add.at(grad[:, 0], inv.reshape(-1, 2)[:, 0], g)
            np.add.at(grad[:, 0], inv.reshape(-1, 2)[:, 1], -g)
            gw, gb = net.gradients(acts, grad)
            opt.step(net.weights + net.biases, gw + gb)
        self.net = net
        self.summary = FitSummary(True, len(costs), n_groups, len(pairs), loss)
        return self.summary

    def predict(self, X) -> np.ndarray:
        """Scores, higher = predicted faster; zeros (no preference) from an unfitted model."""
        X = np.atleast_2d(np.asarray(X, float))
        if self.net is None:
            return np.zeros(len(X))
        return self.net.forward((X - self.mean) / self.scale)[:, 0]


def ranks(x) -> np.ndarray:
    """Ranks 0..n-1, ties given their average rank."""
    vals, inv, counts = np.unique(np.asarray(x, float), return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts
    return (start + (counts - 1) / 2.0)[inv.ravel()]


def spearman(a, b) -> float:
    """Spearman rank correlation; nan with fewer than 3 values or a constant side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3:
        return math.nan
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


__all__ = ["FitSummary", "MIN_PAIRS", "RankModel", "ranks", "spearman"]
