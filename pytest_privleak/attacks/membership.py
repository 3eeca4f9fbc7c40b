"""Loss-based membership inference (Yeom et al. 2020, the attack mix-and-match-text-classifiers §4.3.2 uses).

The attacker guesses that an utterance was a training member when the model's
loss on it is low: the membership statistic is ``-loss`` (higher = member).
With a reference model (trained on similar data without the members) the
statistic is calibrated, ``-(loss - reference loss)``, which removes how hard
an utterance is in itself (the "difficulty calibration" of Watson et al. 2022).
Scores come from a :class:`~pytest_privleak.protocols.SequenceScorer`.

Figures, each with its chance baseline:

- ROC AUC = ``Pr[stat(member) > stat(non-member)] + 1/2 Pr[tie]`` (the
  Mann-Whitney statistic; ties count one half, computed with mid-ranks), with
  DeLong's interval (DeLong et al. 1988, in the mid-rank form of Sun & Xu
  2014). Where DeLong's variance estimate is 0 (perfect separation, or all
  scores tied) the interval is Clopper-Pearson over ``min(n1, n0)`` disjoint
  member / non-member pairs, which are independent trials of the same
  probability. Chance: 0.5.
- TPR at a fixed FPR (0.1 % and 1 %, the low-FPR figures of Carlini et al.
  2022, "Membership inference attacks from first principles"): the threshold
  is the ``k+1``-th highest non-member statistic, ``k = floor(fpr * n0)``, and
  an utterance is called a member when its statistic is strictly above it, so
  ties never push the false-positive rate over ``fpr``. TPR gets a
  Clopper-Pearson interval over the members; chance: TPR = FPR. With fewer
  than ``1 / fpr`` non-members no threshold has a measurable FPR that low;
  the figure is then reported as not measurable.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..finite import require_finite
from ..stats import clopper_pearson

#: the low false-positive rates reported by default
DEFAULT_FPRS = (0.001, 0.01)


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


@dataclass(frozen=True)
class MembershipMeasurement:
    """Everything one membership measurement found."""

    auc: float
    interval: tuple[float, float]
    interval_method: str
    confidence: float
    n_members: int
    n_non_members: int
    calibrated: bool
    points: tuple[RocPoint, ...]
    member_scores: np.ndarray = field(repr=False)
    non_member_scores: np.ndarray = field(repr=False)

    def point(self, fpr: float) -> RocPoint:
        for p in self.points:
            if math.isclose(p.fpr, fpr, rel_tol=1e-12):
                return p
        raise KeyError(f"no TPR was measured at FPR {fpr}")


# --- the maths ---------------------------------------------------------------------------


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
    the achieved FPR never exceeds ``fpr``. Not measurable when ``fpr * n0 < 1``.
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
    return RocPoint(fpr, True, hits / m.size, clopper_pearson(hits, m.size, confidence), false_pos / n.size,
                    threshold)


# --- inputs ------------------------------------------------------------------------------


def _items(name: str, items: Any) -> list:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"{name} must be a sequence of utterances (e.g. dataset.train), got {type(items).__name__}")
    items = list(items)
    if not items:
        raise ValueError(f"{name} is empty; fix: pass at least one utterance (a few hundred give a useful AUC)")
    return items


def _overlap(members: list, non_members: list) -> list:
    try:
        inside = set(members)
        return [u for u in non_members if u in inside]
    except TypeError:  # unhashable items: compare their text
        inside_text = {repr(u) for u in members}
        return [u for u in non_members if repr(u) in inside_text]


def _scores(scorer: Any, items: list, what: str) -> np.ndarray:
    if not hasattr(scorer, "score"):
        raise TypeError(f"{what} scorer {type(scorer).__name__} is not a SequenceScorer; give it score(utterances) -> "
                        "array (lower = more likely), e.g. pytest_privleak.adapters.from_transformers(model, tokenizer)")
    values = np.asarray(scorer.score(items), dtype=np.float64).reshape(-1)
    if values.size != len(items):
        raise ValueError(f"the {what} scorer returned {values.size} scores for {len(items)} utterances; fix: "
                         "score() must return one score per utterance")
    require_finite(values, what=f"the {what} model's losses ({type(scorer).__name__}.score)",
                   fix="check the model for NaN/inf weights or outputs (a diverged training run) and retrain it")
    return values


def _check_confidence(confidence: Any) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), e.g. 0.95, got {confidence!r}")
    return float(confidence)


def check_fpr(fpr: Any, name: str = "fpr") -> float:
    if isinstance(fpr, bool) or not isinstance(fpr, (int, float)) or not 0.0 < fpr < 1.0:
        raise ValueError(f"{name} must be a false-positive rate in (0, 1), e.g. 0.01 for 1 %, got {fpr!r}")
    return float(fpr)


def membership_inference(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *,
                         reference: Any = None, confidence: float = 0.95,
                         fprs: Sequence[float] = DEFAULT_FPRS) -> MembershipMeasurement:
    """Run the loss attack: score both sets (and with ``reference``), then AUC and TPR at each FPR in ``fprs``."""
    confidence = _check_confidence(confidence)
    fprs = tuple(check_fpr(f, "fprs entry") for f in fprs)
    members = _items("members", members)
    non_members = _items("non_members", non_members)
    shared = _overlap(members, non_members)
    if shared:
        sample = getattr(shared[0], "text", repr(shared[0]))
        raise ValueError(f"members and non_members share {len(shared)} utterance(s), e.g. {sample!r}; an utterance "
                         "cannot be both, and a shared one makes the AUC meaningless; fix: drop the shared "
                         "utterances from non_members (held-out data must not contain training utterances)")
    stat_m = -_scores(scorer, members, "target")
    stat_n = -_scores(scorer, non_members, "target")
    if reference is not None:
        stat_m = stat_m + _scores(reference, members, "reference")
        stat_n = stat_n + _scores(reference, non_members, "reference")
    auc = auc_from_statistics(stat_m, stat_n)
    interval, method = auc_interval(stat_m, stat_n, confidence)
    points = tuple(tpr_at_fpr(stat_m, stat_n, f, confidence) for f in fprs)
    return MembershipMeasurement(auc, interval, method, confidence, len(members), len(non_members),
                                 reference is not None, points, -stat_m, -stat_n)
