"""Exact binomial confidence bounds (Clopper-Pearson) used by every statistical verdict.

A privacy gate must not flap: verdicts compare thresholds with bounds whose
confidence is stated, not with raw point estimates alone.
"""
from __future__ import annotations

from scipy.stats import beta


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
