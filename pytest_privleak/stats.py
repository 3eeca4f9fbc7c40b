"""Exact binomial confidence bounds (Clopper-Pearson) used by every statistical verdict, and the variance
components of a seeds x canaries table (issue 37), shared by the assertions over seeds and the gate.

A privacy gate must not flap: verdicts compare thresholds with bounds whose
confidence is stated, not with raw point estimates alone.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import beta
from scipy.stats import t as student


def _check(k: int, n: int, confidence: float) -> None:
    if n <= 0:
        raise ValueError(f"n must be positive, got n={n}")
    if not 0 <= k <= n:
        raise ValueError(f"k must lie in [0, n], got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def clopper_pearson_lower(k: int, n: int, confidence: float) -> float:
    """One-sided lower bound: Pr[p >= bound] >= confidence."""
    _check(k, n, confidence)
    return 0.0 if k == 0 else float(beta.ppf(1.0 - confidence, k, n - k + 1))


def clopper_pearson_upper(k: int, n: int, confidence: float) -> float:
    """One-sided upper bound: Pr[p <= bound] >= confidence."""
    _check(k, n, confidence)
    return 1.0 if k == n else float(beta.ppf(confidence, k + 1, n - k))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact interval with total coverage ``confidence`` (alpha split evenly)."""
    _check(k, n, confidence)
    tail = (1.0 + confidence) / 2.0
    return clopper_pearson_lower(k, n, tail), clopper_pearson_upper(k, n, tail)


@dataclass(frozen=True)
class Crossed:
    """The mean of a ``k x m`` table, its variance components and the t interval they give."""

    mean: float
    variance: float          # estimated Var(mean)
    df: float                # Satterthwaite degrees of freedom
    seed: float              # s_seed^2 (>= 0)
    canary: float            # s_canary^2 (>= 0)
    residual: float          # s_resid^2

    def bounds(self, confidence: float) -> tuple[tuple[float, float], float, float]:
        """``(two-sided interval, one-sided lower, one-sided upper)`` at ``confidence``."""
        se = math.sqrt(max(self.variance, 0.0))
        if se == 0.0 or not math.isfinite(self.df):
            return (self.mean, self.mean), self.mean, self.mean
        two = float(student.ppf((1 + confidence) / 2, self.df)) * se
        one = float(student.ppf(confidence, self.df)) * se
        return (self.mean - two, self.mean + two), self.mean - one, self.mean + one


def crossed_components(table: Sequence[Sequence[float]]) -> Crossed:
    """Variance components of a ``k x m`` table (rows: seeds, columns: canaries), one figure per cell.

    Mean squares: ``MS_seed = m sum_i (r_i - g)^2 / (k-1)``, ``MS_canary = k sum_j (c_j - g)^2 / (m-1)``,
    ``MS_resid = sum_ij (y_ij - r_i - c_j + g)^2 / ((k-1)(m-1))`` (``r``, ``c``: row and column means,
    ``g``: the grand mean). Expected values ``s_e^2 + m s_seed^2``, ``s_e^2 + k s_canary^2`` and ``s_e^2``
    give the components (cut at 0), and ``Var(g) = s_seed^2/k + s_canary^2/m + s_e^2/(k m)``. Its degrees
    of freedom are Satterthwaite's for the mean squares it is made of. ``k = 1`` or ``m = 1`` is one-way:
    the variance of the row (or column) mean over its ``n - 1`` degrees of freedom.
    """
    rows = [[float(v) for v in row] for row in table]
    k, m = len(rows), len(rows[0]) if rows else 0
    if k == 0 or m == 0 or any(len(r) != m for r in rows):
        raise ValueError(f"a crossed table needs k >= 1 rows of the same m >= 1 figures, got {[len(r) for r in rows]}")
    if k * m < 2:
        raise ValueError("an interval over canaries and seeds needs at least 2 figures")
    grand = math.fsum(v for r in rows for v in r) / (k * m)
    row_means = [math.fsum(r) / m for r in rows]
    col_means = [math.fsum(r[j] for r in rows) / k for j in range(m)]
    if k == 1 or m == 1:
        values = rows[0] if k == 1 else [r[0] for r in rows]
        n = len(values)
        s2 = math.fsum((v - grand) ** 2 for v in values) / (n - 1)
        one = (0.0, s2, 0.0) if k == 1 else (s2, 0.0, 0.0)
        return Crossed(grand, s2 / n, float(n - 1), *one)
    ms_seed = m * math.fsum((r - grand) ** 2 for r in row_means) / (k - 1)
    ms_canary = k * math.fsum((c - grand) ** 2 for c in col_means) / (m - 1)
    ms_resid = math.fsum((rows[i][j] - row_means[i] - col_means[j] + grand) ** 2
                         for i in range(k) for j in range(m)) / ((k - 1) * (m - 1))
    seed = max(0.0, (ms_seed - ms_resid) / m)
    canary = max(0.0, (ms_canary - ms_resid) / k)
    variance = seed / k + canary / m + ms_resid / (k * m)
    # Var(g) as a sum of mean squares: (MS_seed + MS_canary - MS_resid)/(k m) when both components are
    # positive; a component cut at 0 drops its mean square (and the MS_resid it would cancel)
    terms = [(ms_resid, (k - 1) * (m - 1), 1.0 - (seed > 0) - (canary > 0))]
    if seed > 0:
        terms.append((ms_seed, k - 1, 1.0))
    if canary > 0:
        terms.append((ms_canary, m - 1, 1.0))
    denominator = math.fsum((c * ms / (k * m)) ** 2 / df for ms, df, c in terms if c != 0.0)
    df = variance ** 2 / denominator if denominator > 0 else math.inf
    return Crossed(grand, variance, df, seed, canary, ms_resid)
