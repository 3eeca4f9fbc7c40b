"""RMIA, the robust membership inference attack of Zarifzadeh, Liu and Shokri 2024 (ICML, "Low-cost high-power
membership inference attacks").

RMIA compares the likelihood ratio of a candidate ``x`` with that of
population records ``z`` the target never saw (§3, eq. 2-4):

    LR(x, z) = (Pr(x | theta) / Pr(x)) / (Pr(z | theta) / Pr(z))
    Score(x) = Pr_z[ LR(x, z) >= gamma ]

``Pr(x | theta)`` is the target's probability of ``x`` (``exp(-loss)``) and
``Pr(x)`` its average over reference models (online: references trained with
and without ``x``, §3). Offline (no reference trained on ``x``, §3 "offline"
/ Appendix), the average of in and out models is approximated from the out
models alone: ``Pr(x) = 1/2 ((1 + a) Pr_OUT(x) + (1 - a))``, where ``a`` is
chosen by simulating the attack on the reference models themselves
(:func:`tune_offline_a`: each reference in turn plays the target, the others
the references, on population records whose membership is known);
:data:`DEFAULT_OFFLINE_A` when a single reference leaves nothing to simulate.
With sequence losses of many nats ``Pr_OUT(x)`` is tiny, the constant
``(1 - a)`` dominates and the offline score falls back to the target's loss
alone; the simulation then picks a larger ``a`` where that helps.

Everything is in log space (``-loss`` is ``log Pr``), and batched: the
score of N candidates against M population records is a sorted search,
``O((N + M) log M)``, not an ``N x M`` matrix.

For one population set, ``Score(x)`` is a non-decreasing function of the
candidate's own ratio ``log Pr(x | theta) - log Pr(x)``: it ranks candidates
as that ratio does, except that the fraction ties candidates the population
cannot tell apart (fewer than ``1 / FPR`` population records). The figures
therefore rank on (score, ratio), which is the score with ties broken by the ratio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ...finite import require_finite
from .figures import auc_from_statistics

#: gamma, the threshold on the pairwise likelihood ratio (Zarifzadeh et al. §3, eq. 4). Checked on
#: 2026-11-24 against the authors' released attack configurations (privacytrustlab/ml_privacy_meter,
#: research/2023_rmia/attack_configs: ``gamma: 2.0`` online and offline, every reference count).
DEFAULT_GAMMA = 2.0
#: a, the slope of the offline approximation of Pr(x) from out models only (Zarifzadeh et al. §3, offline).
#: The authors' CIFAR-10 configurations use 0.33 and Privacy Meter's library default is 0.3; both are
#: per-setting tunings, which is why :func:`tune_offline_a` picks ``a`` by simulation whenever two or
#: more references allow it and this value serves only a single reference.
DEFAULT_OFFLINE_A = 0.3


def log_marginal(ref_losses: np.ndarray, offline_a: float | None = None) -> np.ndarray:
    """``log Pr(x)`` per record from ``ref_losses[k, n]``: the log of the mean over references of ``exp(-loss)``.

    With ``offline_a`` (all references trained without the records), the
    offline approximation ``log(1/2 ((1 + a) Pr_OUT(x) + (1 - a)))``.
    """
    losses = np.asarray(ref_losses, dtype=np.float64)
    if losses.ndim != 2 or losses.shape[0] < 1:
        raise ValueError(f"ref_losses must be [references, records] with at least one reference, got {losses.shape}")
    require_finite(losses, what="the reference models' losses (ref_losses)",
                   fix="check the reference models for NaN/inf outputs (a diverged training run) and retrain them")
    log_mean = logsumexp(-losses, axis=0) - math.log(losses.shape[0])
    if offline_a is None:
        return log_mean
    a = float(offline_a)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"offline_a must lie in [0, 1] (the paper tunes it per setting), got {offline_a!r}")
    # log(((1 + a) p_out + (1 - a)) / 2), stable for tiny p_out
    return np.logaddexp(math.log1p(a) + log_mean, math.log1p(-a) if a < 1 else -np.inf) - math.log(2.0)


#: the values of ``a`` the simulation tries
A_GRID = tuple(round(0.1 * i, 1) for i in range(11))


def tune_offline_a(ref_losses: np.ndarray, in_mask: np.ndarray, grid: tuple[float, ...] = A_GRID) -> float:
    """The ``a`` whose offline attack best separates each reference's own members, the others as references.

    ``ref_losses[k, n]``: reference ``k``'s loss on population record ``n``;
    ``in_mask[k, n]``: reference ``k`` trained on it. For pseudo-target ``j``
    the candidates are the records no other reference trained on (so they
    are offline for the others), its members those it trained on; the
    criterion is the AUC (Mann-Whitney) averaged over pseudo-targets; ties
    go to the smaller ``a``. Needs ``k >= 2``.
    """
    losses = np.asarray(ref_losses, dtype=np.float64)
    mask = np.asarray(in_mask, dtype=bool)
    k = losses.shape[0]
    if k < 2:
        raise ValueError("tuning the offline a needs at least 2 references (one plays the target)")
    best, best_auc = grid[0], -1.0
    for a in grid:
        aucs = []
        for j in range(k):
            others = [i for i in range(k) if i != j]
            offline = ~mask[others].any(axis=0)
            members, non_members = offline & mask[j], offline & ~mask[j]
            if members.sum() < 2 or non_members.sum() < 2:
                continue
            ratio = log_ratio(losses[j], losses[others], a)
            aucs.append(auc_from_statistics(ratio[members], ratio[non_members]))
        if aucs and float(np.mean(aucs)) > best_auc + 1e-12:
            best, best_auc = a, float(np.mean(aucs))
    return float(best)


def log_ratio(target_losses: np.ndarray, ref_losses: np.ndarray, offline_a: float | None = None) -> np.ndarray:
    """``log(Pr(x | theta) / Pr(x))`` per record: the target's log-probability minus the references' marginal."""
    target = np.asarray(target_losses, dtype=np.float64)
    require_finite(target, what="the target model's losses (target_losses)",
                   fix="check the target model for NaN/inf outputs (a diverged training run) and retrain it")
    marginal = log_marginal(ref_losses, offline_a)
    if marginal.shape != target.shape:
        raise ValueError(f"ref_losses cover {marginal.size} records, target_losses {target.size}; fix: score the "
                         "same records with the target and every reference")
    return -target - marginal


@dataclass(frozen=True)
class RmiaScores:
    """RMIA's score per candidate (the paper's fraction) and its own ratio (the tie-breaker)."""

    score: np.ndarray         # Pr_z[LR(x, z) >= gamma], in [0, 1]
    ratio: np.ndarray         # log Pr(x | theta) - log Pr(x)
    gamma: float
    n_population: int

    def ranking(self) -> np.ndarray:
        """Dense rank of each candidate by (score, ratio): the score with ties broken by the ratio; equal pairs tie."""
        keys = np.stack([self.score, self.ratio], axis=1)
        _, inverse = np.unique(keys, axis=0, return_inverse=True)   # rows sorted by score, then ratio
        return inverse.reshape(-1).astype(np.float64)


def rmia_scores(candidate_ratio: np.ndarray, population_ratio: np.ndarray,
                gamma: float = DEFAULT_GAMMA) -> RmiaScores:
    """``Score(x) = Pr_z[LR(x, z) >= gamma]`` (§3, eq. 4) from the log ratios of candidates and population records.

    ``LR(x, z) >= gamma`` is ``ratio(z) <= ratio(x) - log gamma``: a count of
    the sorted population ratios at or below that bound.
    """
    x = np.asarray(candidate_ratio, dtype=np.float64)
    z = np.sort(np.asarray(population_ratio, dtype=np.float64))
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma > 0 or not math.isfinite(gamma):
        raise ValueError(f"gamma must be a positive number (the paper's default is {DEFAULT_GAMMA:g}), got {gamma!r}")
    if z.size == 0:
        raise ValueError("RMIA needs population records z (records neither member nor candidate); fix: pass "
                         "population= with held-out records from the same distribution")
    require_finite(x, what="the candidates' log ratios", fix="check the target and reference losses")
    require_finite(z, what="the population records' log ratios", fix="check the target and reference losses")
    dominated = np.searchsorted(z, x - math.log(gamma), side="right")
    return RmiaScores(dominated / z.size, x, float(gamma), int(z.size))
