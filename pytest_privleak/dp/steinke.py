"""The (ε, δ) one-run bound of Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run".

m canaries are each included with probability 1/2; an auditor makes r guesses (abstaining on the
rest) and v of them are right.  For an (ε, 0)-DP algorithm the number of correct guesses is
stochastically dominated by Binomial(r, e^ε / (1 + e^ε)) (Sec. 3, Theorem 3.1).  With δ > 0 the tail
gains a term (the paper's approximate-DP theorem, and the p-value routine of its appendix):

    P[W >= v] <= F(v) + 2 m δ · max_{1 <= i <= v} (F(v - i) - F(v)) / i,   F(u) = P[Binomial(r, q) >= u].

The right-hand side, evaluated at the observed v, is a p-value for the claim "(ε, δ)-DP"; ε_lcb is the
largest ε it rejects at the given significance (the claim at ε implies it at every larger ε, so the
supremum of the rejected ε is a valid lower bound; see ``search``).
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit
from scipy.stats import binom

from .bound_search import largest_rejected

#: ε above which the search stops (no realistic number of canaries certifies more).
EPSILON_CAP = 50.0


def p_value(m: int, guesses: int, correct: int, epsilon, delta: float) -> np.ndarray:
    """Steinke et al.'s bound on P[W >= correct] for an (ε, δ)-DP algorithm, for each ε in ``epsilon``."""
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    q = expit(eps)[:, None]                                       # (G, 1)
    if correct <= 0:
        return np.ones(len(eps))
    tail = binom.sf(correct - 1, guesses, q[:, 0])                # F(v)
    if delta == 0.0:
        return np.minimum(tail, 1.0)
    i = np.arange(1, correct + 1)[None, :]                       # (1, v)
    lower_tails = binom.sf(correct - i - 1, guesses, q)          # F(v - i), (G, v)
    worst = np.max((lower_tails - tail[:, None]) / i, axis=1)
    return np.minimum(tail + 2.0 * m * delta * worst, 1.0)


def epsilon_lcb(m: int, guesses: int, correct: int, *, significance: float, delta: float) -> float:
    """Largest ε whose (ε, δ)-DP claim the observed ``correct`` of ``guesses`` rejects at ``significance``."""
    if guesses <= 0 or correct <= 0:
        return 0.0
    return largest_rejected(lambda eps: bool(p_value(m, guesses, correct, eps, delta)[0] <= significance),
                            upper=EPSILON_CAP)


def best_epsilon_lcb(m: int, guesses, correct, *, significance: float, delta: float) -> tuple[float, int]:
    """(largest ε_lcb over the candidates, its index); a candidate that cannot reject the best ε so far
    is skipped (its own bound is then no larger), candidates tried from the highest precision down."""
    guesses, correct = np.asarray(guesses), np.asarray(correct)
    best, best_j = 0.0, 0
    for j in np.argsort(-(correct / np.maximum(guesses, 1)), kind="stable"):
        g, c = int(guesses[j]), int(correct[j])
        if g <= 0 or c <= 0 or p_value(m, g, c, best, delta)[0] > significance:
            continue
        eps = epsilon_lcb(m, g, c, significance=significance, delta=delta)
        if eps > best:
            best, best_j = eps, int(j)
    return best, best_j
