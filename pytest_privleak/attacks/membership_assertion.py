"""``measure_membership`` and ``assert_membership_auc_at_most``: loss-based membership inference as a gate.

The attack and its figures are in :mod:`.membership` (mix-and-match-text-
classifiers §4.3.2 uses this loss attack to rank candidates; here it asks the
question teams ask first: can an attacker tell the training utterances from
unseen ones?). One :class:`LeakResult` carries the AUC with its interval; the
TPR at low FPRs are in its ``extra`` and ``evidence``, and a second result
gates the TPR when ``max_tpr_at_fpr`` is given.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..results import LeakResult, record
from .exposure_assertion import target_facts
from .membership import DEFAULT_FPRS, MembershipMeasurement, RocPoint, check_fpr, membership_inference

REMEDY = ("the model's loss tells its training utterances from unseen ones (it memorised them): train fewer epochs "
          "or with early stopping on a validation split, add dropout or weight decay, deduplicate the training data, "
          "or train with differential privacy (DP-SGD)")


def _pct(fpr: float) -> str:
    return f"{fpr * 100:g}%"


def _label(scorer: Any, m: MembershipMeasurement, name: str | None) -> str:
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name must be a non-empty string or None, got {name!r}")
        return name
    kind = "calibrated loss" if m.calibrated else "loss"
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
        "attack": "loss threshold (Yeom et al.; mix-and-match §4.3.2)"
                  + (", calibrated by a reference model" if m.calibrated else ""),
        "interval": m.interval_method,
        "members": m.n_members, "non_members": m.n_non_members,
        "mean loss": f"members {m.member_scores.mean():.4g}, non-members {m.non_member_scores.mean():.4g}",
    }
    for p in m.points:
        evidence[f"TPR @ FPR {_pct(p.fpr)}"] = _point_text(p)
        if p.measurable:
            extra[f"tpr_at_fpr_{p.fpr:g}"] = p.tpr
    return LeakResult(attack="membership", metric="auc", value=m.auc, threshold=threshold, direction="at_most",
                      interval=m.interval, confidence=m.confidence, chance=0.5, ceiling=1.0,
                      label=_label(scorer, m, name), evidence=evidence, extra=extra, remedy=REMEDY,
                      tolerance=tolerance, target=target_facts(scorer))


def _check_limit(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] (chance is "
                         f"{'0.5' if name == 'max_auc' else 'TPR = FPR'}), got {value!r}")
    return float(value)


def _check_tolerance(tolerance: Any) -> float | None:
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}")
    return float(tolerance)


def _tpr_result(auc: LeakResult, m: MembershipMeasurement, fpr: float) -> LeakResult:
    """The measured TPR-at-``fpr`` result beside the AUC result ``auc`` (``threshold=None``)."""
    p = m.point(fpr)
    rule = f"member when {'loss - reference loss' if m.calibrated else 'loss'} < {-p.threshold:.6g}"
    return LeakResult(attack="membership", metric=f"tpr_at_fpr_{fpr:g}", value=p.tpr, threshold=None,
                      direction="at_most", interval=p.interval, confidence=m.confidence, chance=fpr, ceiling=1.0,
                      label=auc.label, evidence={**auc.evidence, "rule": rule},
                      extra={"auc": m.auc, "achieved_fpr": p.achieved_fpr}, remedy=REMEDY, target=auc.target)


def measured_membership(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *, reference: Any,
                        name: str | None, confidence: float, fprs: Sequence[float],
                        tpr_fpr: float | None = None) -> list[LeakResult]:
    """The measured AUC result (and, with ``tpr_fpr``, the TPR result at that FPR), ``threshold=None``.

    From the result cache when ``scorer`` (and ``reference``) have a content
    hash and the same call ran before (:mod:`pytest_privleak.cache.results`).
    """
    from ..cache.results import cached_results

    def compute() -> list[LeakResult]:
        m = membership_inference(scorer, members, non_members, reference=reference, confidence=confidence,
                                 fprs=fprs)
        auc = _auc_result(scorer, m, None, name, None)
        return [auc] if tpr_fpr is None else [auc, _tpr_result(auc, m, tpr_fpr)]

    models = [scorer] if reference is None else [scorer, reference]
    inputs = {"members": list(members) if isinstance(members, (list, tuple)) else members,
              "non_members": list(non_members) if isinstance(non_members, (list, tuple)) else non_members,
              "reference": reference is not None, "name": name, "confidence": confidence, "fprs": list(fprs),
              "tpr_fpr": tpr_fpr}
    return cached_results("membership", models, inputs, compute)


def measure_membership(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], *, reference: Any = None,
                       name: str | None = None, confidence: float = 0.95,
                       fprs: Sequence[float] = DEFAULT_FPRS) -> LeakResult:
    """Measure the loss attack's AUC (and TPR at ``fprs``) without gating; the result is recorded.

    ``scorer`` and ``reference`` are :class:`~pytest_privleak.protocols.SequenceScorer` s
    (lower = more likely: the training loss of a classifier, the log-perplexity of a
    language model); ``members`` are training utterances, ``non_members`` held-out
    ones from the same distribution (e.g. ``dataset.train`` and ``dataset.test``).
    With ``reference`` the attack uses ``loss - reference loss``. ``name``: the
    result's label (default: scorer class and set sizes).
    """
    return record(measured_membership(scorer, members, non_members, reference=reference, name=name,
                                      confidence=confidence, fprs=fprs)[0])


def assert_membership_auc_at_most(scorer: Any, members: Sequence[Any], non_members: Sequence[Any], max_auc: float, *,
                                  max_tpr_at_fpr: float | None = None, fpr: float = 0.01, reference: Any = None,
                                  name: str | None = None, confidence: float = 0.95,
                                  tolerance: float | None = None) -> LeakResult:
    """Fail when the loss attack tells members from non-members with ROC AUC above ``max_auc``.

    The attack (Yeom et al., as in mix-and-match-text-classifiers §4.3.2) calls
    an utterance a member when the model's loss on it is low; with
    ``reference`` (a model trained without the members) it uses the loss minus
    the reference's loss. AUC chance is 0.5; the verdict compares the point
    AUC with ``max_auc`` and prints DeLong's interval beside it. The TPR at
    FPR 0.1 % and 1 % are reported with Clopper-Pearson intervals (chance:
    TPR = FPR). ``max_tpr_at_fpr``: also fail when the TPR at ``fpr`` exceeds
    it; that needs at least ``1 / fpr`` non-members (an error says so).
    ``tolerance``: how far the AUC may grow against a stored baseline.
    Returns the recorded AUC result.
    """
    __tracebackhide__ = True
    from ..assertions import check

    threshold = _check_limit(max_auc, "max_auc")
    tpr_limit = None if max_tpr_at_fpr is None else _check_limit(max_tpr_at_fpr, "max_tpr_at_fpr")
    fpr = check_fpr(fpr)
    tolerance = _check_tolerance(tolerance)
    fprs = tuple(dict.fromkeys((*DEFAULT_FPRS, fpr)))
    if tpr_limit is not None and hasattr(non_members, "__len__") and len(non_members) * fpr < 1 - 1e-9:
        raise ValueError(f"max_tpr_at_fpr gates the TPR at FPR {_pct(fpr)}, which needs at least "
                         f"{int(round(1 / fpr))} non-members, got {len(non_members)}; fix: pass more held-out "
                         f"non_members or a larger fpr= (e.g. fpr={max(0.01, 1 / max(len(non_members), 1)):g})")
    measured = measured_membership(scorer, members, non_members, reference=reference, name=name,
                                   confidence=confidence, fprs=fprs, tpr_fpr=None if tpr_limit is None else fpr)
    auc = dataclasses.replace(measured[0], threshold=threshold, tolerance=tolerance)
    if tpr_limit is None:
        return check(auc)
    tpr = dataclasses.replace(measured[1], threshold=tpr_limit, tolerance=tolerance)
    if auc.passed and not tpr.passed:
        record(auc)
        return check(tpr)
    record(tpr)
    return check(auc)
