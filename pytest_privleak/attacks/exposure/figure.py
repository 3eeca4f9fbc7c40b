"""The exposure formula and one exposure figure (d-exposure-discriminative eq. 1; Carlini et al., the Secret Sharer).

Kept apart from :mod:`.exposure` (which scores secrets) so that every attack that reports an
exposure (the Mix And Match canary's among them) builds the same figure without importing
the scoring code.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...stats import clopper_pearson

__all__ = ["LOG2E", "Exposure", "chance_exposure", "exposure_from_rank", "exposure_from_scores",
           "sampled_interval", "skewnorm_exposure"]

LOG2E = 1.0 / math.log(2.0)


# --- the formula -------------------------------------------------------------------------


def exposure_from_rank(rank: int, space_size: float) -> float:
    """``log2 |R| - log2 rank`` (d-exposure-discriminative eq. 1, Carlini et al.)."""
    if not 1 <= rank <= max(space_size, 1) + 1:
        raise ValueError(f"rank {rank} must lie in 1..|R|+1 (|R| = {space_size})")
    return max(0.0, math.log2(space_size) - math.log2(rank))


def exposure_from_scores(canary_score: float, reference_scores: Sequence[float],
                         space_size: float | None = None) -> tuple[float, int]:
    """``(exposure, rank)`` of a canary among references; ``|R|`` defaults to the number of references.

    The rank counts ties against the canary (``rank_of(..., ties="against")``), as the
    Secret Sharer defines it. Example derived by hand: references 1..16 and canary
    score 3.5 -> 3 references at or below it, rank 4, exposure ``log2 16 - log2 4 = 2``.
    """
    from ..candidates import rank_of  # torch stays unimported until a rank is needed

    refs = np.asarray(reference_scores, dtype=np.float64).ravel()
    if refs.size == 0:
        raise ValueError("exposure needs at least one reference score")
    rank = rank_of(canary_score, refs, ties="against")
    return exposure_from_rank(rank, float(refs.size if space_size is None else space_size)), rank


def chance_exposure(n_ranks: int, log2_size: float | None = None) -> float:
    """Expected exposure when the rank is uniform on ``1..n_ranks`` (a canary the model never saw).

    ``E[log2|R| - log2 rank] = log2|R| - log2(n_ranks!)/n_ranks`` with ``log2|R|`` defaulting to
    ``log2 n_ranks``; Stirling gives the limit ``log2 e ~= 1.443`` bits for large spaces.
    """
    if n_ranks < 1:
        raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
    from scipy.special import gammaln

    log2_size = math.log2(n_ranks) if log2_size is None else log2_size
    return max(0.0, log2_size - float(gammaln(n_ranks + 1.0)) * LOG2E / n_ranks)


def sampled_interval(below: int, n_references: int, space_size: float,
                     confidence: float = 0.95) -> tuple[float, float]:
    """Interval on the exposure left by sampling: Clopper-Pearson on ``below / N``, mapped through ``-log2``.

    The true exposure is ``-log2 q`` with ``q = rank/|R|``, the fraction of the space at or
    below the canary (the canary itself counted, hence the ``1/|R|`` floor).
    """
    lo, hi = clopper_pearson(below, n_references, confidence)
    floor = 1.0 / space_size
    top = min(1.0, hi + floor)
    return max(0.0, -math.log2(top)), -math.log2(min(1.0, lo + floor))


def skewnorm_exposure(canary_score: float, reference_scores: np.ndarray) -> tuple[float, dict[str, float]]:
    """``-log2 CDF(canary)`` under a skew-normal fitted to the references (scipy MLE), and the fit.

    Returns the raw (uncapped) exposure and ``{"ks": KS statistic, "a", "loc", "scale"}``.
    """
    from scipy.stats import kstest, skewnorm

    refs = np.asarray(reference_scores, dtype=np.float64)
    if refs.size < 16 or np.ptp(refs) == 0:
        raise ValueError(f"a skew-normal fit needs at least 16 distinct-valued references, got {refs.size} "
                         "(all equal or too few); fix: pass more references or use method='exact'")
    a, loc, scale = skewnorm.fit(refs)
    raw = max(0.0, -float(skewnorm.logcdf(canary_score, a, loc, scale)) * LOG2E)
    ks = float(kstest(refs, skewnorm(a, loc, scale).cdf).statistic)
    return raw, {"ks": ks, "a": float(a), "loc": float(loc), "scale": float(scale)}


# --- the figure --------------------------------------------------------------------------


@dataclass
class Exposure:
    """One exposure measurement; ``value`` is capped at ``ceiling`` (the largest measurable).

    ``rank`` is among the whole space (exact) or among the ``n_references`` sampled
    references (sampled, extrapolated: there it is shown beside the fit).
    """

    value: float
    method: str
    rank: int | None
    space_size: int
    n_references: int
    ceiling: float
    chance: float
    interval: tuple[float, float]
    canary_score: float
    confidence: float | None = 0.95   # None: the interval is a sure bound, not a statistical one
    fit: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)   # lines the message adds (which attack ran, ...)
