"""Q-method (FlexTensor 5.1): start points chosen by simulated annealing; from
each, a Q-network predicts the value of every direction from the point's
features and the walk takes the best unvisited one (epsilon-greedy, epsilon
= max(0.8 * exp(-0.01 * trial), 0.1)). Rewards are relative performance
gains (E_next - E_start) / E_start with E = 1 / time; the network trains
online every `train_every` trials against a target network. No
back-tracking: a visited point is never proposed again. One network scores
the directions of all knobs (FlexTensor's code keeps one per knob; the
inputs, outputs and training are the same)."""

from __future__ import annotations

import math

import numpy as np

from .annealing import choose_starts
from .dqn import QNetwork
from .strategy import SearchStrategy


class QMethod(SearchStrategy):
    name = "q"

    def __init__(self, space, seed: int = 0, train_every: int = 40, memory: int = 1000, gamma: float = 0.5):
        super().__init__(space, seed)
        self.directions = space.directions()
        n_features = len(space.features(space.sample(self.rng)))
        self.net = QNetwork(n_features, len(self.directions), seed=seed)
        self.train_every, self.memory, self.gamma = train_every, memory, gamma
        self.transitions: list[tuple[list[float], int, float, list[float]]] = []
        self.pending: dict = {}  # proposed point -> (start point, direction index)
        self.last_train = 0

    def epsilon(self) -> float:
        return max(0.8 * math.exp(-0.01 * self.trials), 0.1)

    def _step(self, start, exclude: set):
        values = self.net.values(np.asarray(self.space.features(start)))[0]
        explore = self.rng.random() < self.epsilon()
        order = list(range(len(self.directions)))
        if explore:
            self.rng.shuffle(order)
        else:
            order.sort(key=lambda a: -values[a])
        for a in order:
            q = self.space.move(start, self.directions[a])
            if q is not None and not self.visited(q) and q not in exclude:
                return q, a
        return None, None

    def propose(self, n: int):
        out, seen = [], set()
        for start in choose_starts(self.costs, n, self.rng, self.gamma):
            q, a = self._step(start, seen)
            if q is not None:
                seen.add(q)
                out.append(q)
                self.pending[q] = (start, a)
        if len(out) < n:  # every start exhausted its neighbourhood: fall back to fresh points
            out += self.random_unvisited(n - len(out), exclude=seen)
        return out

    def discard(self, points) -> None:
        for p in points:
            self.pending.pop(p, None)

    def observe(self, points, costs) -> None:
        super().observe(points, costs)
        for p, c in zip(points, costs):
            if p not in self.pending:
                continue
            start, a = self.pending.pop(p)
            c0 = self.costs.get(start, math.inf)
            if math.isfinite(c0):
                e0 = 1.0 / c0
                e1 = 1.0 / c if math.isfinite(c) and c > 0 else 0.0
                reward = (e1 - e0) / e0
                self.transitions.append((self.space.features(start), a, reward, self.space.features(p)))
        self.transitions = self.transitions[-self.memory:]
        if self.trials - self.last_train >= self.train_every and len(self.transitions) >= 8:
            s, a, r, s2 = zip(*self.transitions)
            self.net.fit(s, a, r, s2)
            self.last_train = self.trials
