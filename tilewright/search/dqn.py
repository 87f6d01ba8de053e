"""A small Q-network in NumPy: four fully connected layers with ReLU, trained
by AdaDelta on the squared error of the chosen action's value (FlexTensor's
walker network; the paper's hyperparameters are the defaults)."""

from __future__ import annotations

import numpy as np


class MLP:
    def __init__(self, n_in: int, n_out: int, hidden: int = 64, layers: int = 4, seed: int = 0):
        rng = np.random.default_rng(seed)
        sizes = [n_in] + [hidden] * (layers - 1) + [n_out]
        self.weights = [rng.normal(0, np.sqrt(2.0 / a), (a, b)) for a, b in zip(sizes[:-1], sizes[1:])]
        self.biases = [np.zeros(b) for b in sizes[1:]]

    def copy_from(self, other: MLP) -> None:
        self.weights = [w.copy() for w in other.weights]
        self.biases = [b.copy() for b in other.biases]

    def forward(self, x: np.ndarray, keep: bool = False):
        acts = [x]
        h = x
        for n, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w + b
            if n < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
            acts.append(h)
        return (h, acts) if keep else h

    def gradients(self, acts: list[np.ndarray], grad_out: np.ndarray):
        gw, gb = [], []
        g = grad_out
        for n in range(len(self.weights) - 1, -1, -1):
            gw.append(acts[n].T @ g)
            gb.append(g.sum(0))
            if n > 0:
                g = (g @ self.weights[n].T) * (acts[n] > 0)
        return gw[::-1], gb[::-1]


class AdaDelta:
    def __init__(self, params: list[np.ndarray], lr: float = 0.02, rho: float = 0.9, eps: float = 1e-6):
        self.lr, self.rho, self.eps = lr, rho, eps
        self.sq_grad = [np.zeros_like(p) for p in params]
        self.sq_step = [np.zeros_like(p) for p in params]

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        for p, g, sg, ss in zip(params, grads, self.sq_grad, self.sq_step):
            sg *= self.rho
            sg += (1 - self.rho) * g * g
            delta = np.sqrt(ss + self.eps) / np.sqrt(sg + self.eps) * g
            ss *= self.rho
            ss += (1 - self.rho) * delta * delta
            p -= self.lr * delta


class QNetwork:
    """Online network + target network; `fit` runs minibatch passes over recent
    transitions (state, action, reward, next_state) toward
    reward + discount * max_a' target(next_state)[a']."""

    def __init__(self, n_features: int, n_actions: int, seed: int = 0, lr: float = 0.02, discount: float = 0.9):
        self.online = MLP(n_features, n_actions, seed=seed)
        self.target = MLP(n_features, n_actions, seed=seed)
        self.target.copy_from(self.online)
        self.opt = AdaDelta(self.online.weights + self.online.biases, lr=lr)
        self.discount = discount
        self.rng = np.random.default_rng(seed)

    def values(self, states: np.ndarray) -> np.ndarray:
        return self.online.forward(np.atleast_2d(states))

    def fit(self, states, actions, rewards, next_states, passes: int = 20, batch: int = 32) -> float:
        states, next_states = np.asarray(states, float), np.asarray(next_states, float)
        actions, rewards = np.asarray(actions, int), np.asarray(rewards, float)
        targets = rewards + self.discount * self.target.forward(next_states).max(1)
        loss = 0.0
        for _ in range(passes):
            order = self.rng.permutation(len(states))
            for start in range(0, len(order), batch):
                idx = order[start:start + batch]
                out, acts = self.online.forward(states[idx], keep=True)
                chosen = out[np.arange(len(idx)), actions[idx]]
                err = chosen - targets[idx]
                loss = float(np.mean(err ** 2))
                grad = np.zeros_like(out)
                grad[np.arange(len(idx)), actions[idx]] = 2 * err / len(idx)
                gw, gb = self.online.gradients(acts, grad)
                self.opt.step(self.online.weights + self.online.biases, gw + gb)
        self.target.copy_from(self.online)
        return loss
