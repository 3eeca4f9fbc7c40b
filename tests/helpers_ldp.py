"""Mechanisms used by the LDP tests: string inputs, a leak at one rare input, irreproducible randomness."""
from __future__ import annotations

import math

import numpy as np

from pytest_privleak.ldp import FiniteDomain


class WordRR:
    """k-ary randomised response over words (one-hot report); ``leak`` is reported truthfully w.p. ``p_leak``.

    Exact ε: ln(e^ε) = ε for every pair without the leaking word; with it,
    ln(p_leak / q) where q = 1 / (e^ε + k - 1) is the chance another word reports it.
    """

    def __init__(self, words, epsilon: float = 1.0, leak=None, p_leak: float = 0.9) -> None:
        self.words = list(words)
        self.epsilon = float(epsilon)
        self.leak = leak
        self.p_leak = float(p_leak)
        self.domain = FiniteDomain(np.array(self.words))
        self.p_true = math.exp(self.epsilon) / (math.exp(self.epsilon) + len(self.words) - 1)

    def __call__(self, inputs, rng):
        words = np.asarray(inputs).reshape(-1)
        index = {w: i for i, w in enumerate(self.words)}
        v = np.array([index[str(w)] for w in words], dtype=np.int64)  # KeyError on a word it does not know
        k = len(self.words)
        p = np.full(len(v), self.p_true)
        if self.leak is not None:
            p[v == index[self.leak]] = self.p_leak
        keep = rng.random(len(v)) < p
        report = np.where(keep, v, (v + rng.integers(1, k, size=len(v))) % k)
        out = np.zeros((len(v), k), dtype=np.uint8)
        out[np.arange(len(v)), report] = 1
        return out


class RareLeak:
    """k-ary randomised response at ``epsilon`` over 0..k-1, except input ``leak`` is reported truthfully w.p.
    ``p_leak`` (0.5): exact ε = ln(p_leak (e^ε + k - 1)), 3.9 at k = 100, 6.2 at k = 1000 (claim: 1)."""

    def __init__(self, k: int = 100, epsilon: float = 1.0, leak: int = 37, p_leak: float = 0.5) -> None:
        self.k, self.epsilon, self.leak, self.p_leak = int(k), float(epsilon), int(leak), float(p_leak)
        self.domain = FiniteDomain(np.arange(self.k))
        self.p_true = math.exp(self.epsilon) / (math.exp(self.epsilon) + self.k - 1)

    @property
    def exact_epsilon(self) -> float:
        return math.log(self.p_leak * (math.exp(self.epsilon) + self.k - 1))

    def __call__(self, inputs, rng):
        v = np.asarray(inputs).reshape(-1).astype(np.int64)
        keep = rng.random(len(v)) < np.where(v == self.leak, self.p_leak, self.p_true)
        report = np.where(keep, v, (v + rng.integers(1, self.k, size=len(v))) % self.k)
        out = np.zeros((len(v), self.k), dtype=np.uint8)
        out[np.arange(len(v)), report] = 1
        return out


class GlobalRandom:
    """Randomised response that ignores its ``rng`` and draws from numpy's global generator."""

    epsilon = 1.0
    domain = FiniteDomain(np.arange(3))

    def __call__(self, inputs, rng):
        v = np.asarray(inputs).reshape(-1).astype(np.int64)
        keep = np.random.random(len(v)) < math.exp(1.0) / (math.exp(1.0) + 2)
        report = np.where(keep, v, (v + np.random.randint(1, 3, size=len(v))) % 3)
        return np.eye(3, dtype=np.uint8)[report]
