"""ε lower bound from many runs: T trained with one worst-case canary, T without (the ``distinguish`` method).

The classic distinguishing audit (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021, Sec. 3 and 2023,
"Tight auditing"): a score per run (higher = more likely trained WITH the canary) and a threshold t
make a test "with iff score >= t".  (ε, δ)-DP bounds both of its error rates against each other
(Kairouz et al. 2015; Nasr et al. 2021, Eq. 1):

    1 - FNR <= e^ε FPR + δ    and    1 - FPR <= e^ε FNR + δ,

so ε >= max(ln((1 - δ - FNR) / FPR), ln((1 - δ - FPR) / FNR)).  One-sided Clopper-Pearson upper
bounds on FPR and FNR, each at 1 - (1 - confidence)/2 (union bound over the two), make it a lower
bound at ``confidence``.

Honest threshold and the two-replicate rule (as ``ldp.auditor``): runs are independent, so the runs
of each group are split into two halves (a fixed permutation); the threshold is chosen on one half
(the one maximising that half's own bound) and the bound computed on the other, and the same the
other way round.  Each of the two is a lower bound valid at ``confidence`` (its threshold did not
see its data), so their minimum is too, and a correct pipeline is over-bounded only when both
replicates are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from ..stats import clopper_pearson_upper
from .inputs import check_confidence, check_delta, check_scores

#: Seed of the fixed permutation that splits each group of runs into halves.
SPLIT_SEED = 0x5EED


@dataclass(frozen=True)
class DistinguishBound:
    """ε lower bound from T runs with and T without a canary, and the test behind it."""

    epsilon_lcb: float
    threshold: float
    fpr_upper: float
    fnr_upper: float
    runs_with: int
    runs_without: int
    confidence: float
    delta: float
    rule: str
    replicate_bounds: tuple[float, ...] = ()
    ceiling: float = 0.0          # the largest ε these numbers of runs could certify (perfect separation)


def audit_distinguish(scores_with, scores_without, *, delta: float, confidence: float = 0.95) -> DistinguishBound:
    """Distinguishing ε lower bound at ``confidence`` from one score per run (higher = trained with it)."""
    with_ = check_scores(scores_with, "scores_with")
    without = check_scores(scores_without, "scores_without")
    check_delta(delta)
    check_confidence(confidence)
    for name, arr in (("scores_with", with_), ("scores_without", without)):
        if len(arr) < 2:
            raise ValueError(f"{name} holds {len(arr)} run(s); the distinguishing audit needs at least 2 runs "
                             f"per group (a threshold is chosen on half the runs and checked on the other half); "
                             f"fix: train more runs (tens to hundreds give useful bounds)")
    tail = 1.0 - (1.0 - confidence) / 2.0
    w1, w2 = _halves(with_, 0)
    o1, o2 = _halves(without, 1)
    replicates = []
    for (pick_w, pick_o), (test_w, test_o) in (((w1, o1), (w2, o2)), ((w2, o2), (w1, o1))):
        t = choose_threshold(pick_w, pick_o, tail=tail, delta=delta)
        replicates.append((*bound_at(test_w, test_o, t, tail=tail, delta=delta), t))
    eps, fpr, fnr, t = min(replicates, key=lambda rep: rep[0])
    ceiling = min(bound_from_counts(0, len(tw), 0, len(to), tail=tail, delta=delta)[0]
                  for tw, to in ((w2, o2), (w1, o1)))
    rule = (f"cross-fitted halves: the threshold was chosen on one half of each group's runs and the bound "
            f"computed on the other, both ways; the smaller of the two bounds is reported (each is valid at "
            f"{confidence:g}); Clopper-Pearson upper bounds on FPR and FNR at {tail:g} each")
    return DistinguishBound(epsilon_lcb=eps, threshold=t, fpr_upper=fpr, fnr_upper=fnr, runs_with=len(with_),
                            runs_without=len(without), confidence=confidence, delta=delta, rule=rule,
                            replicate_bounds=tuple(rep[0] for rep in replicates), ceiling=ceiling)


def _halves(scores: np.ndarray, salt: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng([SPLIT_SEED, salt]).permutation(len(scores))
    half = len(scores) // 2
    return scores[perm[:half]], scores[perm[half:]]


def bound_from_counts(fp: int, n_without: int, fn: int, n_with: int, *, tail: float,
                      delta: float) -> tuple[float, float, float]:
    """(ε_lcb, FPR upper, FNR upper) from false-positive and false-negative counts."""
    fpr = clopper_pearson_upper(fp, n_without, tail)
    fnr = clopper_pearson_upper(fn, n_with, tail)
    return max(0.0, _log_ratio(1.0 - delta - fnr, fpr), _log_ratio(1.0 - delta - fpr, fnr)), fpr, fnr


def bound_at(with_: np.ndarray, without: np.ndarray, t: float, *, tail: float, delta: float):
    """(ε_lcb, FPR upper, FNR upper) of the test "with iff score >= t" on these runs."""
    return bound_from_counts(int(np.sum(without >= t)), len(without), int(np.sum(with_ < t)), len(with_),
                             tail=tail, delta=delta)


def choose_threshold(with_: np.ndarray, without: np.ndarray, *, tail: float, delta: float) -> float:
    """The threshold (midpoints between the pooled sorted scores, and both ends) with the best bound on these runs."""
    pooled = np.unique(np.concatenate([with_, without]))
    cands = np.concatenate([[pooled[0] - 1.0], (pooled[:-1] + pooled[1:]) / 2.0, [pooled[-1] + 1.0]])
    fp = len(without) - np.searchsorted(np.sort(without), cands, side="left")
    fn = np.searchsorted(np.sort(with_), cands, side="left")
    fpr, fnr = _cp_upper(fp, len(without), tail), _cp_upper(fn, len(with_), tail)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.maximum(np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr),
                         np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr))
    eps = np.maximum(np.nan_to_num(eps, nan=0.0, neginf=0.0), 0.0)
    tied = np.flatnonzero(eps >= eps.max() - 1e-12)
    return float(cands[tied[len(tied) // 2]])  # the middle of the best thresholds: farthest from both groups


def _cp_upper(k: np.ndarray, n: int, tail: float) -> np.ndarray:
    """``stats.clopper_pearson_upper`` for many counts at once (used only to choose the threshold)."""
    k = np.asarray(k)
    return np.where(k >= n, 1.0, beta.ppf(tail, k + 1, np.maximum(n - k, 1)))


def _log_ratio(num: float, den: float) -> float:
    if num <= 0.0:
        return 0.0
    return math.inf if den <= 0.0 else math.log(num) - math.log(den)
