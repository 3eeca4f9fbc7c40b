"""The largest privacy parameter a test rejects, found by refining a grid (vectorised over candidates).

Both one-run tests reject a claim at parameter θ (ε, or the Gaussian μ) when the observed guesses are
too good for it.  A mechanism private at θ is private at every θ' > θ, so the claim at θ is rejected
whenever some θ' >= θ is, and the supremum of the rejected θ is a valid lower bound.  The tests are
monotone in θ in practice; the search takes the lower end of the first non-rejected bracket, so a
numerical wobble can only make the bound smaller.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

#: Grid points per refinement round and number of rounds: resolution upper / (POINTS - 1) ** ROUNDS.
POINTS = 48
ROUNDS = 4


def largest_rejected_rows(rejects: Callable[[np.ndarray], np.ndarray], rows: int, *, upper: float) -> np.ndarray:
    """For each of ``rows`` candidates, the largest θ in [0, upper] with ``rejects`` true below it.

    ``rejects(theta)`` takes a (rows, G) array and returns a (rows, G) bool array.  A row rejected
    everywhere on the first grid gets ``upper`` (the bound is capped there); one not rejected at 0 gets 0.
    """
    lo = np.zeros(rows)
    hi = np.full(rows, float(upper))
    done = np.zeros(rows, dtype=bool)
    out = np.zeros(rows)
    for round_ in range(ROUNDS):
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, POINTS)[None, :]
        hit = np.asarray(rejects(grid), dtype=bool)
        if round_ == 0:
            out[hit.all(axis=1)] = upper
            done |= hit.all(axis=1) | ~hit[:, 0]
        first_miss = np.argmin(hit, axis=1)                    # first grid point not rejected
        k = np.maximum(first_miss, 1)
        rows_idx = np.arange(rows)
        lo = np.where(done, lo, grid[rows_idx, k - 1])
        hi = np.where(done, hi, grid[rows_idx, k])
    return np.where(done, out, lo)


def largest_rejected(rejects: Callable[[float], bool], *, upper: float, tol: float = 1e-6) -> float:
    """One candidate, by bisection: the largest θ in [0, upper] with ``rejects`` true below it (to ``tol``).

    Returns 0 when θ = 0 is not rejected and ``upper`` when ``upper`` is; otherwise the bracket's
    lower end, which is rejected.
    """
    if not rejects(0.0):
        return 0.0
    lo, hi = 0.0, min(1.0, upper)
    while rejects(hi):
        if hi >= upper:
            return float(upper)
        lo, hi = hi, min(2.0 * hi, upper)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo
