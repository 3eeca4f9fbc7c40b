"""The figures of a membership attack from its statistics (higher = member): ROC AUC with DeLong's interval, and
TPR at a fixed FPR with Clopper-Pearson's (see :mod:`.membership` for the conventions and their sources)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...stats import clopper_pearson


@dataclass(frozen=True)
class RocPoint:
    """TPR at one target FPR, or why it cannot be measured."""

    fpr: float                           # the target false-positive rate
    measurable: bool
    tpr: float | None = None
    interval: tuple[float, float] | None = None
    achieved_fpr: float | None = None    # false positives / n0 at the chosen threshold
    threshold: float | None = None       # membership statistic strictly above which "member" is said
    why: str = ""
    tied: int = 0                        # non-members whose statistic equals the threshold (when more than fpr * n0)
    tied_members: int = 0                # members whose statistic equals it

    @property
    def tied_out(self) -> bool:
        """Measured, but ties hide the FPR: ``tpr`` is the TPR at the lower ``achieved_fpr``, a lower bound."""
        return not self.measurable and self.tpr is not None


def auc_from_statistics(members: np.ndarray, non_members: np.ndarray) -> float:
    """Mann-Whitney AUC: ``Pr[m > n] + 1/2 Pr[m = n]`` over all member / non-member pairs (mid-ranks)."""
    from scipy.stats import rankdata

    m, n = np.asarray(members, dtype=np.float64), np.asarray(non_members, dtype=np.float64)
    ranks = rankdata(np.concatenate([m, n]))          # average ranks: a tie counts one half
    u = ranks[:m.size].sum() - m.size * (m.size + 1) / 2.0
    return float(u / (m.size * n.size))


def delong_variance(members: np.ndarray, non_members: np.ndarray) -> float:
    """DeLong's variance of the AUC: ``S10 / n1 + S01 / n0`` from the structural components (mid-ranks)."""
    from scipy.stats import rankdata

    m, n = np.asarray(members, dtype=np.float64), np.asarray(non_members, dtype=np.float64)
    n1, n0 = m.size, n.size
    if n1 < 2 or n0 < 2:
        return 0.0
    combined = rankdata(np.concatenate([m, n]))
    v10 = (combined[:n1] - rankdata(m)) / n0            # per member: share of non-members it beats (ties 1/2)
    v01 = 1.0 - (combined[n1:] - rankdata(n)) / n1      # per non-member: share of members that beat it
    return float(np.var(v10, ddof=1) / n1 + np.var(v01, ddof=1) / n0)


def auc_interval(members: np.ndarray, non_members: np.ndarray, confidence: float) -> tuple[tuple[float, float], str]:
    """``((low, high), method)``: DeLong's normal interval, or the paired Clopper-Pearson one when it is degenerate."""
    from scipy.stats import norm

    auc = auc_from_statistics(members, non_members)
    variance = delong_variance(members, non_members)
    if variance > 0:
        half = float(norm.ppf((1.0 + confidence) / 2.0)) * math.sqrt(variance)
        return (max(0.0, auc - half), min(1.0, auc + half)), "DeLong"
    pairs = min(len(members), len(non_members))
    m, n = np.asarray(members)[:pairs], np.asarray(non_members)[:pairs]
    wins = float(np.sum(m > n) + 0.5 * np.sum(m == n))
    low, _ = clopper_pearson(int(math.floor(wins)), pairs, confidence)
    _, high = clopper_pearson(int(math.ceil(wins)), pairs, confidence)
    return (low, high), f"Clopper-Pearson over {pairs} disjoint pairs (DeLong's variance is 0)"


def tpr_at_fpr(members: np.ndarray, non_members: np.ndarray, fpr: float, confidence: float = 0.95) -> RocPoint:
    """TPR of the threshold whose FPR is at most ``fpr``: members strictly above the ``k+1``-th highest non-member.

    ``k = floor(fpr * n0)``; ties at the threshold are called non-members, so
    the achieved FPR never exceeds ``fpr``. Not measurable when ``fpr * n0 < 1``,
    nor when more than ``fpr * n0`` non-members tie with the threshold: every
    threshold then calls none of that block or all of it members, so no
    threshold has an FPR near ``fpr``, and the TPR read at the lower achieved
    FPR (kept in the point, a lower bound of the TPR at ``fpr``) would pass a
    gate that the scores cannot judge (a float32 loss of exactly 0 for many
    records, issue 33).
    """
    m, n = np.asarray(members, dtype=np.float64), np.asarray(non_members, dtype=np.float64)
    k = int(math.floor(fpr * n.size + 1e-9))
    if k < 1:
        need = math.ceil(1.0 / fpr - 1e-9)
        return RocPoint(fpr, False, why=f"needs at least {need} non-members to measure a {fpr:.1%} FPR, "
                                         f"have {n.size}")
    threshold = float(np.sort(n)[::-1][k])               # the (k+1)-th highest non-member statistic
    false_pos = int(np.sum(n > threshold))
    hits = int(np.sum(m > threshold))
    tied = int(np.sum(n == threshold))
    tied_members = int(np.sum(m == threshold))
    if tied <= fpr * n.size + 1e-9:
        return _randomised(fpr, m.size, n.size, hits, false_pos, tied, tied_members, threshold, confidence)
    point = RocPoint(fpr, True, hits / m.size, clopper_pearson(hits, m.size, confidence), false_pos / n.size,
                     threshold)
    why = (f"{tied} of {n.size} non-members ({tied / n.size:.1%}) and {tied_members} of {m.size} members share the "
           f"statistic {threshold:.6g} at the threshold, more than the {fpr:.1%} FPR allows ({fpr * n.size:g}): no "
           f"threshold calls {fpr:.1%} of the non-members members (the nearest below calls {false_pos / n.size:.2%}, "
           f"with TPR {hits / m.size:.3f}, a lower bound); the scores are too coarse to tell these records apart, e.g. "
           "a loss computed in float32 that rounds to exactly 0")
    return dataclasses.replace(point, measurable=False, why=why, tied=tied, tied_members=tied_members)


def _randomised(fpr: float, n1: int, n0: int, hits: int, false_pos: int, tied: int, tied_members: int,
                threshold: float, confidence: float) -> RocPoint:
    """The TPR at exactly ``fpr`` of the randomised threshold (Fawcett 2006, ROC analysis §5: tied scores make a
    diagonal segment of the ROC curve): members strictly above ``threshold``, and of the block tied AT it (``tied``
    non-members, ``tied_members`` members) the share ``q`` that brings the FPR to ``fpr``. Reading only the
    members strictly above would be the TPR at a lower FPR: a block of members tied with the threshold (a
    float32 loss of exactly 0) then passed a gate it should fail (held-out probe, session 7). The interval is
    Clopper-Pearson's at the count rounded down (low end) and up (high end)."""
    q = min(1.0, max(0.0, (fpr * n0 - false_pos) / tied)) if tied else 0.0
    called = hits + q * tied_members
    low = clopper_pearson(int(math.floor(called + 1e-9)), n1, confidence)[0]
    high = clopper_pearson(int(math.ceil(called - 1e-9)), n1, confidence)[1]
    return RocPoint(fpr, True, called / n1, (low, high), (false_pos + q * tied) / n0, threshold)


def roc_curve(members: np.ndarray, non_members: np.ndarray, max_points: int = 64) -> dict[str, list[float]]:
    """The ROC curve ``{"fpr": [...], "tpr": [...]}`` for a log-log chart (Carlini et al. 2022 §IV draw it so).

    Every point is a threshold "member when the statistic is strictly above
    ``t``", swept over the distinct non-member statistics from the highest
    down (so each FPR is ``k / n0``, ``k = 0 .. n0``). At most ``max_points``
    are kept, spaced evenly in ``log FPR`` from ``1 / n0`` to 1, plus the
    points at FPR 0 and 1; the highest TPR at each kept FPR is the one drawn.
    """
    m = np.sort(np.asarray(members, dtype=np.float64))
    n = np.sort(np.asarray(non_members, dtype=np.float64))[::-1]
    n0 = n.size
    if m.size == 0 or n0 == 0:
        return {"fpr": [], "tpr": []}
    ks = np.arange(n0 + 1)
    # threshold for k false positives: the (k+1)-th highest non-member (k < n0), or -inf for k = n0
    thresholds = np.concatenate([n, [-np.inf]])
    fprs = (n0 - np.searchsorted(n[::-1], thresholds, side="right")) / n0
    tprs = (m.size - np.searchsorted(m, thresholds, side="right")) / m.size
    if n0 + 1 > max_points:
        wanted = np.unique(np.round(np.geomspace(1, n0, max(2, max_points - 2))).astype(int))
        keep = np.unique(np.concatenate([[0], wanted, [n0]]))
        ks = ks[np.isin(ks, keep)]
    kept_f, kept_t = [], []
    for k in ks:
        f = float(fprs[k])
        if kept_f and math.isclose(kept_f[-1], f):
            kept_t[-1] = max(kept_t[-1], float(tprs[k]))
        else:
            kept_f.append(f)
            kept_t.append(float(tprs[k]))
    return {"fpr": kept_f, "tpr": kept_t}
