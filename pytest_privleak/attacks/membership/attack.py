"""Membership inference: can an attacker tell a model's training records from unseen ones?

Methods (``method=``, see :mod:`.membership_methods`): the loss attack
(Yeom et al. 2018, the attack mix-and-match-text-classifiers §4.3.2 uses),
its calibration by one reference model, LiRA (Carlini et al. 2022,
:mod:`.membership_lira`) and RMIA (Zarifzadeh et al. 2024,
:mod:`.membership_rmia`) with reference models trained by the target's own
recipe (:mod:`.membership_references`); ``auto`` picks the strongest that
the inputs allow. Records may be Utterances, strings, ``(text, label)`` pairs
or dataset rows (:mod:`.membership_records`).

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
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .figures import RocPoint, auc_from_statistics, auc_interval, delong_variance, roc_curve, tpr_at_fpr
from .methods import DistributionShiftWarning, check_budget_applies, resolve_references, statistics
from .records import as_utterances, redacted
from .rmia import DEFAULT_GAMMA

__all__ = ["DEFAULT_FPRS", "MembershipMeasurement", "RocPoint", "auc_from_statistics", "auc_interval", "check_fpr",
           "delong_variance", "membership_inference", "tpr_at_fpr"]

#: the low false-positive rates reported by default
DEFAULT_FPRS = (0.001, 0.01)
#: how many of the most exposed members a measurement lists
DEFAULT_EXPOSED = 5


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
    member_scores: np.ndarray = field(repr=False)       # the target's losses on the members
    non_member_scores: np.ndarray = field(repr=False)
    method: str = "loss"
    why: str = ""
    detail: dict = field(default_factory=dict)
    shift: str | None = None
    exposed: tuple[tuple[str, float], ...] = ()        # (record or its redaction, shown score), most exposed first
    shown_name: str = "statistic"
    roc: dict = field(default_factory=dict)             # {"fpr": [...], "tpr": [...]} for the report's chart
    n_references: int = 0                               # reference models the figure used (0: none)
    k_requested: int = 0                                # the k asked for (more than ran when time_budget_s ran out)

    def point(self, fpr: float) -> RocPoint:
        for p in self.points:
            if math.isclose(p.fpr, fpr, rel_tol=1e-12):
                return p
        raise KeyError(f"no TPR was measured at FPR {fpr}")


# --- inputs ------------------------------------------------------------------------------


def _check_confidence(confidence: Any) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), e.g. 0.95, got {confidence!r}")
    return float(confidence)


def check_fpr(fpr: Any, name: str = "fpr") -> float:
    if isinstance(fpr, bool) or not isinstance(fpr, (int, float)) or not 0.0 < fpr < 1.0:
        raise ValueError(f"{name} must be a false-positive rate in (0, 1), e.g. 0.01 for 1 %, got {fpr!r}")
    return float(fpr)


def _check_exposed(exposed: Any) -> int:
    if isinstance(exposed, bool) or not isinstance(exposed, int) or exposed < 0:
        raise ValueError(f"exposed (how many of the most exposed members to list) must be an integer >= 0, "
                         f"got {exposed!r}")
    return exposed


def most_exposed(members: list, shown: np.ndarray, ranking: np.ndarray, count: int,
                 redact: bool) -> tuple[tuple[str, float], ...]:
    """The ``count`` members the attack finds most exposed (highest statistic), with the score shown for each."""
    order = np.argsort(-ranking, kind="stable")[:count]
    return tuple((redacted(members[i]) if redact else members[i].text, float(shown[i])) for i in order)


def membership_inference(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *,
                         reference: Any = None, method: str = "auto", references: Any = None,
                         population: Sequence[Any] | None = None, k: int = 4, online: bool = False,
                         gamma: float = DEFAULT_GAMMA, offline_a: float | str = "auto",
                         variance: str = "auto", lira_statistic: str = "logit", seed: int = 0,
                         confidence: float = 0.95, fprs: Sequence[float] = DEFAULT_FPRS,
                         exposed: int = DEFAULT_EXPOSED, redact: bool = False,
                         time_budget_s: float | None = None) -> MembershipMeasurement:
    """Run ``method`` on both sets, then AUC and TPR at each FPR in ``fprs`` (see the module docstring).

    ``references``: a :class:`~.membership_references.TargetRecipe` (``k``
    references are trained with it, ``online`` or offline, on ``population``
    or the recipe dataset's valid split; fewer when ``time_budget_s``, the
    seconds their training may take, runs out) or a ready
    :class:`~.membership_references.ReferenceSet`.
    """
    check_budget_applies(references, time_budget_s)
    confidence = _check_confidence(confidence)
    fprs = tuple(check_fpr(f, "fprs entry") for f in fprs)
    exposed = _check_exposed(exposed)
    members = as_utterances("members", members)
    non_members = as_utterances("non_members", non_members)
    inside = set(members)
    shared = [u for u in non_members if u in inside]
    if shared:
        raise ValueError(f"members and non_members share {len(shared)} utterance(s), e.g. {shared[0].text!r}; an "
                         "utterance cannot be both, and a shared one makes the AUC meaningless; fix: drop the shared "
                         "utterances from non_members (held-out data must not contain training utterances)")
    refs = resolve_references(references, k, online, seed, members, non_members, population, time_budget_s)
    stats = statistics(method, scorer, members, non_members, reference=reference, references=refs, gamma=gamma,
                       offline_a=offline_a, variance=variance, lira_statistic=lira_statistic, confidence=confidence)
    if stats.shift:
        warnings.warn(stats.shift, DistributionShiftWarning, stacklevel=3)
    stat_m, stat_n = stats.members, stats.non_members
    auc = auc_from_statistics(stat_m, stat_n)
    interval, interval_method = auc_interval(stat_m, stat_n, confidence)
    points = tuple(tpr_at_fpr(stat_m, stat_n, f, confidence) for f in fprs)
    shown = stat_m if stats.shown is None else stats.shown[:len(members)]
    return MembershipMeasurement(auc, interval, interval_method, confidence, len(members), len(non_members),
                                 stats.method == "reference", points, stats.member_losses, stats.non_member_losses,
                                 stats.method, stats.why, dict(stats.detail), stats.shift,
                                 most_exposed(members, shown, stat_m, exposed, redact), stats.shown_name,
                                 roc_curve(stat_m, stat_n), 0 if refs is None else refs.k,
                                 0 if refs is None else refs.k_requested)
