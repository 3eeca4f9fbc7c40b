"""``measure_membership``, ``assert_membership_auc_at_most`` and ``assert_membership_tpr_at_most``: membership
inference as a gate.

The attacks and their figures are in :mod:`.membership` (loss, calibrated
loss, LiRA, RMIA; ``method="auto"`` the strongest the inputs allow). One
:class:`LeakResult` carries the AUC with its interval; the TPR at low FPRs
are in its ``extra`` and ``evidence``, and a second result gates the TPR
(``max_tpr_at_fpr``, or ``assert_membership_tpr_at_most`` at FPR 0.1 %, where
Carlini et al. 2022 §III say membership inference matters). The evidence
names the method that ran and why, warns of a distribution shift between
members and non-members, and lists the most exposed members (``redact=True``:
hash and length only, for a report that leaves the team).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...results import LeakResult, record, target_facts, audited
from ..remedies import UNKNOWN, remedy, remedy_for
from .attack import (_NAMES, DEFAULT_EXPOSED, DEFAULT_FPRS, MembershipMeasurement, RocPoint, check_fpr,
                     measure_methods, pick)
from ..inconclusive import check_allow_inconclusive, check_covered
from .methods import check_budget_applies
from .rmia import DEFAULT_GAMMA

_ATTACKS = {"loss": "loss threshold (Yeom et al.; mix-and-match §4.3.2)",
            "reference": "loss threshold calibrated by a reference model (Watson et al. 2022)",
            "lira": "LiRA (Carlini et al. 2022)", "rmia": "RMIA (Zarifzadeh et al. 2024)",
            "zlib": "log-perplexity / zlib entropy (Carlini et al. 2021 §5.1)",
            "min-k": "Min-K% Prob, the 20 % least likely tokens (Shi et al. 2024)",
            "base": "the pretrained base as a free reference, error-zone shifts (after EZ-MIA, Ilić et al. 2026)"}

#: The remedy for a model of no known family; the result carries the one for the attacked model's.
REMEDY = remedy("membership", UNKNOWN)


def _pct(fpr: float) -> str:
    return f"{fpr * 100:g}%"


def _label(scorer: Any, m: MembershipMeasurement, name: str | None) -> str:
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name must be a non-empty string or None, got {name!r}")
        return name
    kind = "auto" if m.contest else _NAMES.get(m.method, m.method)     # stable whichever method wins
    return f"{type(scorer).__name__} {kind}: {m.n_members} members vs {m.n_non_members} non-members"


def _point_text(p: RocPoint) -> str:
    if not p.measurable:
        return f"not measurable: {p.why}"
    return (f"{p.tpr:.3f} (CI {p.interval[0]:.3f} .. {p.interval[1]:.3f}) at achieved FPR {p.achieved_fpr:.4f}, "
            f"chance {p.fpr:g}")


def _auc_result(scorer: Any, m: MembershipMeasurement, threshold: float | None, name: str | None,
                tolerance: float | None) -> LeakResult:
    extra: dict[str, float] = {}
    evidence: dict[str, Any] = {
        "attack": _ATTACKS.get(m.method, m.method),
        "why this attack": m.why,
        **m.detail,
        "interval": m.interval_method,
        "members": m.n_members, "non_members": m.n_non_members,
        "mean loss": f"members {m.member_scores.mean():.4g}, non-members {m.non_member_scores.mean():.4g}",
    }
    if m.method in ("lira", "rmia") and m.n_references:
        extra["n_references"] = m.n_references
        extra["k_requested"] = m.k_requested
    for p in m.points:
        evidence[f"TPR @ FPR {_pct(p.fpr)}"] = _point_text(p)
        if p.measurable:
            extra[f"tpr_at_fpr_{p.fpr:g}"] = p.tpr
    if m.shift:
        evidence["distribution shift"] = m.shift
    if m.exposed:
        evidence[f"most exposed members ({m.shown_name})"] = "; ".join(f"{text!r}: {score:.4g}"
                                                                      for text, score in m.exposed)
    return LeakResult(attack="membership", metric="auc", value=m.auc, threshold=threshold, direction="at_most",
                      interval=m.interval, confidence=m.confidence, chance=0.5, ceiling=1.0,
                      label=_label(scorer, m, name), evidence=evidence, extra=extra,
                      remedy=remedy_for("membership", scorer),
                      tolerance=tolerance, target=target_facts(scorer), curve=m.roc)


def _check_limit(value: Any, name: str) -> float:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] (chance is "
                         f"{'0.5' if name == 'max_auc' else 'TPR = FPR'}), got {value!r}; fix: e.g. "
                         f"{name}={'0.6' if name == 'max_auc' else '0.05'}")
    return float(value)


def _check_tolerance(tolerance: Any) -> float | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}; fix: e.g. tolerance=0.05, "
                         "or leave it out for the gate's default")
    return float(tolerance)


def _tpr_result(auc: LeakResult, m: MembershipMeasurement, fpr: float) -> LeakResult:
    """The measured TPR-at-``fpr`` result beside the AUC result ``auc`` (``threshold=None``)."""
    p = m.point(fpr)
    tied = {"tied_non_members": float(p.tied), "tied_members": float(p.tied_members)} if p.tied_out else {}
    if m.method in ("loss", "reference"):
        rule = f"member when {'loss - reference loss' if m.calibrated else 'loss'} < {-p.threshold:.6g}"
    else:
        rule = (f"member when the {_NAMES[m.method]} statistic (higher = member) is above {p.threshold:.6g}, "
                f"the value that calls {p.achieved_fpr:.2%} of the non-members members")
    return LeakResult(attack="membership", metric=f"tpr_at_fpr_{fpr:g}", value=p.tpr, threshold=None,
                      direction="at_most", interval=p.interval, confidence=m.confidence, chance=fpr, ceiling=1.0,
                      label=auc.label, evidence={**auc.evidence, "rule": rule},
                      extra={"auc": m.auc, "achieved_fpr": p.achieved_fpr,
                             # the members called members, of all members: pooled over seeds by Clopper-Pearson
                             "successes": float(round(p.tpr * m.n_members)), "trials": float(m.n_members),
                             **tied},
                      remedy=auc.remedy, target=auc.target)


def _options(method: str, references: Any, population: Any, k: int, online: bool, gamma: float,
             offline_a: float | str, variance: str, lira_statistic: str, seed: int, exposed: int,
             redact: bool, time_budget_s: Any = None) -> dict[str, Any]:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    check_budget_applies(references, time_budget_s)      # before the result cache, which skips the measurement
    return {"method": method, "references": references, "population": population, "k": k, "online": online,
            "gamma": gamma, "offline_a": offline_a, "variance": variance, "lira_statistic": lira_statistic,
            "seed": seed, "exposed": exposed, "redact": redact, "time_budget_s": time_budget_s}


def _strongest_points(auc: LeakResult, ran: Sequence[MembershipMeasurement], fprs: Sequence[float]) -> LeakResult:
    """The AUC result with each TPR at FPR of the method strongest at that FPR, not the AUC winner's (under
    ``auto`` a held-out probe read RMIA's 0.087 at 1 % FPR as the loss attack's 0.030 in ``measure_membership``)."""
    if len(ran) < 2:
        return auc
    extra, evidence = dict(auc.extra), dict(auc.evidence)
    for fpr in fprs:
        best = pick(ran, fpr)
        p = best.point(fpr)
        if p.measurable:
            extra[f"tpr_at_fpr_{fpr:g}"] = p.tpr
            evidence[f"TPR @ FPR {_pct(fpr)}"] = f"{_point_text(p)} ({_NAMES.get(best.method, best.method)}, the " \
                                                f"strongest of {len(ran)} methods at this FPR)"
    return dataclasses.replace(auc, extra=extra, evidence=evidence)


def measured_membership(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *, reference: Any,
                        name: str | None, confidence: float, fprs: Sequence[float],
                        tpr_fpr: float | None = None, options: dict[str, Any] | None = None) -> list[LeakResult]:
    """The measured AUC result (and, with ``tpr_fpr``, the TPR result at that FPR), ``threshold=None``.

    From the result cache when ``scorer`` (and ``reference``) have a content
    hash and the same call ran before (:mod:`pytest_privleak.cache.results`);
    with reference models (their own cache entries) the figures are computed.
    """
    from ...cache.results import cached_results

    options = options or {}

    def compute() -> list[LeakResult]:
        ran = measure_methods(scorer, members, non_members, reference=reference, confidence=confidence, fprs=fprs,
                              **options)
        auc = _strongest_points(_auc_result(scorer, pick(ran, "auc"), None, name, None), ran, fprs)
        if tpr_fpr is None:
            return [auc]
        strongest = pick(ran, tpr_fpr)       # auto: the method with the highest TPR at the gated FPR
        return [auc, _tpr_result(_auc_result(scorer, strongest, None, name, None), strongest, tpr_fpr)]

    if options.get("references") is not None:
        return compute()
    models = [scorer] if reference is None else [scorer, reference]
    inputs = {"members": list(members) if isinstance(members, (list, tuple)) else members,
              "non_members": list(non_members) if isinstance(non_members, (list, tuple)) else non_members,
              "reference": reference is not None, "name": name, "confidence": confidence, "fprs": list(fprs),
              "tpr_fpr": tpr_fpr,
              **{key: value for key, value in options.items() if key not in ("references", "time_budget_s")}}
    return cached_results("membership", models, inputs, compute)


_OPTIONS_DOC = """
    Attack options (all keyword): ``method`` "auto" (default: every method the
    inputs allow runs on the same scores, loss, LiRA and RMIA with
    ``references``, the calibrated loss with ``reference``, zlib and Min-K%
    for a language model, the base reference for a model fine-tuned from a
    known base, and each figure is the strongest's, its interval at a
    Bonferroni share of ``confidence``; the evidence's ``auto`` line says which
    won and by how much), "loss", "reference", "lira", "rmia", "zlib",
    "min-k" or "base". ``references``: a ``TargetRecipe`` (how the target was
    trained: ``k`` references are trained with it, each cached like any
    target, on random halves of ``population``, default the recipe dataset's
    valid split; ``online=True`` also on the candidates) or a ``ReferenceSet``.
    ``gamma`` and ``offline_a``: RMIA's; ``variance`` and ``lira_statistic``:
    LiRA's. ``time_budget_s``: seconds the references of a ``TargetRecipe``
    may take to train: they train (or load from the cache) in order and stop
    before one that would pass the budget (at least one; online, one
    complementary pair), the first of the unbudgeted ``k``; the evidence's
    ``references`` line and ``extra["n_references"]`` say how many ran and why.
    ``exposed``: how many most exposed members the evidence lists
    (``redact=True``: their hash and length only). Records may be Utterances,
    strings, ``(text, label)`` pairs or ``{"text", "label"}`` rows.
"""


@audited
def measure_membership(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *, reference: Any = None,
                       name: str | None = None, confidence: float = 0.95,
                       fprs: Sequence[float] = DEFAULT_FPRS, method: str = "auto", references: Any = None,
                       population: Sequence[Any] | None = None, k: int = 4, online: bool = False,
                       gamma: float = DEFAULT_GAMMA, offline_a: float | str = "auto", variance: str = "auto",
                       lira_statistic: str = "logit", seed: int = 0, exposed: int = DEFAULT_EXPOSED,
                       redact: bool = False, time_budget_s: float | None = None) -> LeakResult:
    """Measure the membership attack's AUC (and TPR at ``fprs``) without gating; the result is recorded.

    ``scorer`` and ``reference`` are :class:`~pytest_privleak.protocols.SequenceScorer` s
    (lower = more likely: the training loss of a classifier, the log-perplexity of a
    language model); ``members`` are training records, ``non_members`` held-out
    ones from the same distribution (e.g. ``dataset.train`` and ``dataset.test``).
    ``name``: the result's label (default: scorer class, method and set sizes).
    """
    options = _options(method, references, population, k, online, gamma, offline_a, variance, lira_statistic,
                       seed, exposed, redact, time_budget_s)
    return record(measured_membership(scorer, members, non_members, reference=reference, name=name,
                                      confidence=confidence, fprs=fprs, options=options)[0])


measure_membership.__doc__ += _OPTIONS_DOC


def _need_non_members(non_members: Any, fpr: float, argument: str) -> None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if hasattr(non_members, "__len__") and len(non_members) * fpr < 1 - 1e-9:
        raise ValueError(f"{argument} gates the TPR at FPR {_pct(fpr)}, which needs at least "
                         f"{int(round(1 / fpr))} non-members, got {len(non_members)}; fix: pass more held-out "
                         f"non_members or a larger fpr= (e.g. fpr={max(0.01, 1 / max(len(non_members), 1)):g})")


def _coverage(result: LeakResult) -> tuple[bool, str, str]:
    """Whether the references asked for all ran (a time budget may cut them short), what ran and the rest."""
    ran, asked = result.extra.get("n_references"), result.extra.get("k_requested")
    if ran is None or asked is None or ran >= asked:
        return True, "", ""
    return (False, f"{int(ran)} of k={int(asked)} reference models trained within time_budget_s (fewer references "
                   "make a weaker attack)",
            f"a larger time_budget_s or time_budget_s=None (trained references are cached, so a later run goes on "
            f"from reference {int(ran) + 1})")


def _ties(result: LeakResult) -> tuple[bool, str, str]:
    """Whether the TPR result's FPR was measurable, or ties at its threshold hid it (issue 33), and the fix."""
    tied = result.extra.get("tied_non_members")
    if not tied:
        return True, "", ""
    fpr = float(result.metric.rsplit("_", 1)[1])
    return (False, f"TPR at FPR {_pct(fpr)} is not measurable: {int(tied)} non-members and "
                   f"{int(result.extra.get('tied_members', 0))} members tie at its threshold, so the "
                   f"{result.value:.3f} shown is the TPR at FPR {result.extra['achieved_fpr']:.4f}, a lower bound",
            "scores that tell records apart: compute the loss with pytest_privleak.adapters.cross_entropy64(logits, "
            "labels), exact in float64, so that confidently fitted records do not all round to a loss of 0")


def _reversed(auc: LeakResult) -> tuple[bool, str, str]:
    """Whether the scores rank members as LESS likely than non-members beyond chance (the AUC's whole interval
    below 0.5): a scorer that returns a log-probability or a probability (higher = member) where the
    ``SequenceScorer`` protocol asks for a loss (lower = member) reads an AUC of 0.13 for a model that leaks at
    0.87 and passed every limit (held-out probe, session 7). Either way the records are told apart."""
    low, high = auc.interval if auc.interval else (auc.value, auc.value)
    if auc.value is None or high is None or not high < 0.5:
        return True, "", ""
    return (False, f"the scores rank members as LESS likely than non-members (AUC {auc.value:.3f}, interval "
                   f"{low:.3f} .. {high:.3f}, all below chance 0.5): the attack reads them the wrong way round, "
                   "so its figures say nothing about how well they tell the two apart",
            "a scorer that returns a loss, lower = more likely a member (SequenceScorer.score: e.g. the "
            "cross-entropy, not the log-probability or the probability of the label)")


def _gate(measured: list[LeakResult], threshold: float | None, tpr_limit: float | None,
          tolerance: float | None, allow_inconclusive: bool = False) -> LeakResult:
    """Record both results and raise for the gated one: a leak, or a pass with fewer references than asked or
    with a TPR whose FPR ties hide (inconclusive, as every budgeted audit of the plugin, unless
    ``allow_inconclusive``)."""
    __tracebackhide__ = True
    complete, covered, rest = _coverage(measured[0])
    oriented, turned_what, turned_how = _reversed(measured[0])

    def check(result: LeakResult) -> LeakResult:
        __tracebackhide__ = True
        done, what, how = complete, covered, rest
        for ok, more_what, more_how in (_ties(result), (oriented, turned_what, turned_how)):
            if not ok:
                done = False
                what = "; ".join(x for x in (what, more_what) if x)
                how = "; ".join(x for x in (how, more_how) if x)
        return check_covered(result, complete=done, covered=what, rest=how, allow_inconclusive=allow_inconclusive)

    auc = dataclasses.replace(measured[0], threshold=threshold, tolerance=tolerance)
    if tpr_limit is None:
        return check(auc)
    tpr = dataclasses.replace(measured[1], threshold=tpr_limit, tolerance=tolerance)
    if threshold is None:
        record(auc)
        return check(tpr)
    if auc.passed and (not tpr.passed or not _ties(tpr)[0]):
        record(auc)
        return check(tpr)
    record(tpr)
    return check(auc)


@audited
def assert_membership_auc_at_most(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], max_auc: float, *,
                                  max_tpr_at_fpr: float | None = None, fpr: float = 0.01, reference: Any = None,
                                  name: str | None = None, confidence: float = 0.95,
                                  tolerance: float | None = None, method: str = "auto", references: Any = None,
                                  population: Sequence[Any] | None = None, k: int = 4, online: bool = False,
                                  gamma: float = DEFAULT_GAMMA, offline_a: float | str = "auto",
                                  variance: str = "auto", lira_statistic: str = "logit", seed: int = 0,
                                  exposed: int = DEFAULT_EXPOSED, redact: bool = False,
                                  time_budget_s: float | None = None, allow_inconclusive: bool = False) -> LeakResult:
    """Fail when the membership attack tells members from non-members with ROC AUC above ``max_auc``.

    AUC chance is 0.5; the verdict compares the point AUC with ``max_auc`` and
    prints DeLong's interval beside it. The TPR at FPR 0.1 % and 1 % are
    reported with Clopper-Pearson intervals (chance: TPR = FPR).
    ``max_tpr_at_fpr``: also fail when the TPR at ``fpr`` exceeds it; that
    needs at least ``1 / fpr`` non-members (an error says so).
    ``tolerance``: how far the AUC may grow against a stored baseline.
    Returns the recorded AUC result.
    """
    __tracebackhide__ = True
    threshold = _check_limit(max_auc, "max_auc")
    tpr_limit = None if max_tpr_at_fpr is None else _check_limit(max_tpr_at_fpr, "max_tpr_at_fpr")
    fpr = check_fpr(fpr)
    tolerance = _check_tolerance(tolerance)
    allowed = check_allow_inconclusive(allow_inconclusive)
    fprs = tuple(dict.fromkeys((*DEFAULT_FPRS, fpr)))
    if tpr_limit is not None:
        _need_non_members(non_members, fpr, "max_tpr_at_fpr")
    options = _options(method, references, population, k, online, gamma, offline_a, variance, lira_statistic,
                       seed, exposed, redact, time_budget_s)
    measured = measured_membership(scorer, members, non_members, reference=reference, name=name,
                                   confidence=confidence, fprs=fprs, tpr_fpr=None if tpr_limit is None else fpr,
                                   options=options)
    return _gate(measured, threshold, tpr_limit, tolerance, allowed)


assert_membership_auc_at_most.__doc__ += _OPTIONS_DOC


@audited
def assert_membership_tpr_at_most(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], max_tpr: float, *,
                                  fpr: float = 0.001, reference: Any = None, name: str | None = None,
                                  confidence: float = 0.95, tolerance: float | None = None, method: str = "auto",
                                  references: Any = None, population: Sequence[Any] | None = None, k: int = 4,
                                  online: bool = False, gamma: float = DEFAULT_GAMMA,
                                  offline_a: float | str = "auto", variance: str = "auto",
                                  lira_statistic: str = "logit", seed: int = 0, exposed: int = DEFAULT_EXPOSED,
                                  redact: bool = False, time_budget_s: float | None = None,
                                  allow_inconclusive: bool = False) -> LeakResult:
    """Fail when the attack's TPR at ``fpr`` (default 0.1 %) exceeds ``max_tpr``.

    Carlini et al. 2022 §III: membership inference matters at low FPR, where
    an attacker is confidently right about some records; the AUC averages
    those few away. Chance is TPR = ``fpr``; the TPR carries a Clopper-Pearson
    interval over the members. Needs at least ``1 / fpr`` non-members (1000
    at 0.1 %). The AUC result is recorded beside it, ungated. Returns the
    recorded TPR result.
    """
    __tracebackhide__ = True
    tpr_limit = _check_limit(max_tpr, "max_tpr")
    fpr = check_fpr(fpr)
    tolerance = _check_tolerance(tolerance)
    allowed = check_allow_inconclusive(allow_inconclusive)
    _need_non_members(non_members, fpr, "assert_membership_tpr_at_most")
    options = _options(method, references, population, k, online, gamma, offline_a, variance, lira_statistic,
                       seed, exposed, redact, time_budget_s)
    measured = measured_membership(scorer, members, non_members, reference=reference, name=name,
                                   confidence=confidence, fprs=tuple(dict.fromkeys((*DEFAULT_FPRS, fpr))),
                                   tpr_fpr=fpr, options=options)
    return _gate(measured, None, tpr_limit, tolerance, allowed)


assert_membership_tpr_at_most.__doc__ += _OPTIONS_DOC
