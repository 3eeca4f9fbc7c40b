"""Membership inference: can an attacker tell a model's training records from unseen ones?

Methods (``method=``, see :mod:`.methods`): the loss attack (Yeom et al.
2018, the attack mix-and-match-text-classifiers §4.3.2 uses), its calibration
by one reference model, LiRA (Carlini et al. 2022, :mod:`.lira`) and RMIA
(Zarifzadeh et al. 2024, :mod:`.rmia`) with reference models trained by the
target's own recipe (:mod:`.references`), the reference-free statistics of a
language model (:mod:`.reference_free`) and its pretrained base as a free
reference (:mod:`.base_reference`); ``auto`` runs every method the inputs
allow and keeps the strongest (:func:`measure_methods`, :func:`pick`).
Records may be Utterances, strings, ``(text, label)`` pairs or dataset rows
(:mod:`.records`).

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
  than ``1 / fpr`` non-members no threshold has a measurable FPR that low,
  and where more than ``fpr * n0`` non-members tie at the threshold no
  threshold has an FPR near it (issue 33: a float32 loss of exactly 0); the
  figure is then reported as not measurable, and a gate on it is inconclusive.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .figures import RocPoint, auc_from_statistics, auc_interval, delong_variance, roc_curve, tpr_at_fpr
from .methods import (METHODS, CoarseScoresWarning, DistributionShiftWarning, ScoreBook, auto_methods,
                      check_budget_applies, coarse_scores, resolve_references, statistics)
from .records import as_utterances, redacted
from .rmia import DEFAULT_GAMMA

__all__ = ["DEFAULT_FPRS", "MembershipMeasurement", "RocPoint", "auc_from_statistics", "auc_interval", "check_fpr",
           "delong_variance", "measure_methods", "membership_inference", "pick", "tpr_at_fpr"]

#: how the figures name each method
_NAMES = {"loss": "loss", "reference": "calibrated loss", "lira": "LiRA", "rmia": "RMIA", "zlib": "zlib ratio",
          "min-k": "Min-K% Prob", "base": "base reference"}

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
    contest: tuple[tuple[str, float], ...] = ()         # auto: (method, its deciding figure) of every method run

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


def measure_methods(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *,
                    reference: Any = None, method: str = "auto", references: Any = None,
                    population: Sequence[Any] | None = None, k: int = 4, online: bool = False,
                    gamma: float = DEFAULT_GAMMA, offline_a: float | str = "auto",
                    variance: str = "auto", lira_statistic: str = "logit", seed: int = 0,
                    confidence: float = 0.95, fprs: Sequence[float] = DEFAULT_FPRS,
                    exposed: int = DEFAULT_EXPOSED, redact: bool = False,
                    time_budget_s: float | None = None) -> list[MembershipMeasurement]:
    """One measurement per method run: ``method``, or every method ``auto`` runs on the model at hand
    (:func:`~.methods.auto_methods`), on the same scores; :func:`pick` keeps the strongest.

    Several methods share the confidence (Bonferroni): each interval is at
    ``1 - (1 - confidence) / m`` for ``m`` methods, so that the strongest
    one's interval still covers at ``confidence`` whichever wins.
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
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    refs = resolve_references(references, k, online, seed, members, non_members, population, time_budget_s)
    if method == "auto":
        methods, why = auto_methods(scorer, reference, refs)
    else:
        methods, why = (method,), f"method={method!r} was asked for"
    share = 1.0 - (1.0 - confidence) / len(methods)
    book = ScoreBook()
    out = []
    for name in methods:
        stats = statistics(name, scorer, members, non_members, reference=reference, references=refs, gamma=gamma,
                           offline_a=offline_a, variance=variance, lira_statistic=lira_statistic,
                           confidence=confidence, why=why, book=book)
        out.append(_measurement(stats, members, len(non_members), share, fprs, exposed, redact, refs))
    coarse = coarse_scores(np.concatenate([out[0].member_scores, out[0].non_member_scores]),
                           f"the target's losses ({type(scorer).__name__}.score)")
    if coarse:
        warnings.warn(coarse, CoarseScoresWarning, stacklevel=3)
    shift = next((m.shift for m in out if m.shift), None)       # a fact of the data, whichever method saw it
    if shift:
        warnings.warn(shift, DistributionShiftWarning, stacklevel=3)
        out = [dataclasses.replace(m, shift=shift) for m in out]
    return out


def _measurement(stats: Any, members: list, n_non_members: int, confidence: float, fprs: tuple,
                 exposed: int, redact: bool, refs: Any) -> MembershipMeasurement:
    stat_m, stat_n = stats.members, stats.non_members
    auc = auc_from_statistics(stat_m, stat_n)
    interval, interval_method = auc_interval(stat_m, stat_n, confidence)
    points = tuple(tpr_at_fpr(stat_m, stat_n, f, confidence) for f in fprs)
    shown = stat_m if stats.shown is None else stats.shown[:len(members)]
    return MembershipMeasurement(auc, interval, interval_method, confidence, len(members), n_non_members,
                                 stats.method == "reference", points, stats.member_losses, stats.non_member_losses,
                                 stats.method, stats.why, dict(stats.detail), stats.shift,
                                 most_exposed(members, shown, stat_m, exposed, redact), stats.shown_name,
                                 roc_curve(stat_m, stat_n), 0 if refs is None else refs.k,
                                 0 if refs is None else refs.k_requested)


def _strength(m: MembershipMeasurement, select: str | float) -> tuple[float, float]:
    """How strong ``m`` is by ``select`` ("auc", or the FPR whose TPR decides), the AUC breaking ties; a TPR that
    ties hide counts its lower bound, one with too few non-members nothing."""
    if select == "auc":
        return (m.auc, 0.0)
    p = m.point(select)
    return ((p.tpr if p.tpr is not None else -1.0), m.auc)


def _figure_text(m: MembershipMeasurement, select: str | float) -> str:
    if select == "auc":
        return f"AUC {m.auc:.3f}"
    p = m.point(select)
    return "not measurable" if p.tpr is None else f"TPR {p.tpr:.3f}" + (" (a lower bound: ties)" if p.tied_out else "")


def pick(measurements: Sequence[MembershipMeasurement], select: str | float = "auc") -> MembershipMeasurement:
    """The strongest of ``measurements`` by ``select`` ("auc" or an FPR: its TPR), saying which won and by how much.

    With one measurement it is returned as it is. Ties go to the earlier
    method (:func:`~.methods.auto_methods` lists the cheapest first).
    """
    if len(measurements) == 1:
        return measurements[0]
    order = sorted(range(len(measurements)), key=lambda i: (-_strength(measurements[i], select)[0],
                                                             -_strength(measurements[i], select)[1], i))
    best, rest = measurements[order[0]], [measurements[i] for i in order[1:]]
    what = "AUC" if select == "auc" else f"TPR at FPR {select:.1%}"
    lead = _strength(best, select)[0] - _strength(rest[0], select)[0]
    others = ", ".join(f"{_NAMES.get(m.method, m.method)} {_figure_text(m, select)}" for m in rest)
    contest = (f"{len(measurements)} methods ran on the same scores; {_NAMES.get(best.method, best.method)} has the "
               f"highest {what}, {_figure_text(best, select)}, {lead:+.3f} over the next ({others}); intervals at "
               f"{best.confidence:.2%} confidence, the 95 % family share of {len(measurements)} methods (Bonferroni)")
    detail = dict(best.detail)
    for m in rest:
        detail.update({key: value for key, value in m.detail.items() if key not in detail})
    detail["auto"] = contest
    return dataclasses.replace(best, detail=detail, contest=tuple((m.method, _strength(m, select)[0])
                                                                  for m in measurements))


def membership_inference(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *,
                         select: str | float = "auc", **options: Any) -> MembershipMeasurement:
    """Run ``method`` on both sets, then AUC and TPR at each FPR in ``fprs`` (see the module docstring);
    ``options`` are :func:`measure_methods`'s (``reference``, ``method``, ``references``, ``k``, ``fprs``, ...).

    ``references``: a :class:`~.references.TargetRecipe` (``k``
    references are trained with it, ``online`` or offline, on ``population``
    or the recipe dataset's valid split; fewer when ``time_budget_s``, the
    seconds their training may take, runs out) or a ready
    :class:`~.references.ReferenceSet`. ``method="auto"`` runs every method the
    inputs allow and returns the strongest by ``select`` ("auc", or an FPR of
    ``fprs``: the highest TPR there), its intervals at a Bonferroni share of
    ``confidence`` (:func:`measure_methods`, :func:`pick`).
    """
    return pick(measure_methods(scorer, members, non_members, **options), select)
