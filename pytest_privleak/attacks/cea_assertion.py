"""``assert_cea_accuracy_at_most``: the canary extraction attack as a test assertion (canary-extraction-nlu §3-§6)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..assertions import check
from ..results import LeakResult, record
from .cea import ExtractionReport, extract

#: §6 of the paper; Table 3: the three combined bring HDT to the random baseline.
REMEDY = ("train with the defences of canary-extraction-nlu §6: dropout 0.2, early stopping on the validation "
          "loss (patience 20 epochs) and character embeddings concatenated to the word embeddings; combined, "
          "all three brought HDT to the random baseline in the paper (Table 3). Better still, keep secrets "
          "such as this one out of the training data, or de-duplicate them")

DEFAULT_STARTS = 8


def _describe_target(target: Any) -> dict[str, Any]:
    content_hash = getattr(target, "content_hash", None)
    if callable(content_hash):
        content_hash = content_hash()
    try:
        device = str(target.input_embeddings().device)
    except Exception:  # the attack itself reports a broken model; here we only describe it
        device = None
    return {"content_hash": content_hash if isinstance(content_hash, (str, type(None))) else str(content_hash),
            "device": device, "type": type(target).__name__}


def _label(report: ExtractionReport) -> str:
    if len(report.canaries) == 1:
        return report.canaries[0]
    return f"{len(report.canaries)} canaries: {report.canaries[0]!r}, ..."


def assert_cea_accuracy_at_most(target, canaries, max_accuracy: float, *, trials: int = 10,
                                starts: int | None = None, select: str = "best_loss",
                                max_hdt_floor: float | None = None, confidence: float = 0.95, seed: int = 0,
                                method: str = "gradient", tolerance: float | None = None,
                                **attack: Any) -> LeakResult:
    """Fail when the canary extraction attack recovers secrets more often than ``max_accuracy``.

    ``target``: a model implementing ``SoftInputModel`` (protocols.py), or a
    sequence of them, one per canary. ``canaries``: one ``Canary`` or a sequence
    aligned with ``target``; each must have been in that model's training data.

    A *trial* is one independent attack run on one canary: its own random
    initial logits (seeded by ``seed``, the canary's index and the trial
    number), optimised as in §3.1 / Appendix B. With ``select="best_loss"``
    (default) a run tries ``starts`` (default 8) random starts in one batch and keeps the guess whose
    discrete reconstruction has the lowest model loss (the attacker needs no
    secret for this); ``select="single"`` (one start) is the paper's attack.
    There are ``len(canaries) * trials`` trials; accuracy is the fraction that
    recover the whole secret in order (§4.3), reported with a Clopper-Pearson
    interval at ``confidence``.

    The verdict compares the *point* accuracy with ``max_accuracy``, not the
    interval's lower bound: deliberately conservative for a privacy gate, a
    model is flagged when the attack succeeded at the observed rate, not only
    once the lower confidence bound exceeds the limit. The interval is printed
    alongside so a reader can judge how many trials back the figure.

    For the paper's trial (a different canary in
    a freshly trained model), pass one model per canary and ``trials=1``:
    pins sharing a prefix interfere when injected into one model.

    ``method="exhaustive"`` scores every secret of V0^n instead (deterministic:
    one trial per canary; ``trials``/``starts`` do not apply).
    ``max_hdt_floor``: also fail when the mean Hamming distance per token is
    below this floor (chance is ``1 - 1/|V0|``). Other keyword arguments go to
    :func:`pytest_privleak.attacks.cea.extract` (``epochs``, ``lr``,
    ``init_scale``, ``temperature0``, ...). ``tolerance``: how far the accuracy
    may grow against a stored baseline before the baseline gate fails (default:
    the gate's own, 0.05); it applies to the HDT result too.
    """
    __tracebackhide__ = True
    if not 0.0 <= max_accuracy <= 1.0:
        raise ValueError(f"max_accuracy must lie in [0, 1], got {max_accuracy!r}")
    if max_hdt_floor is not None and not 0.0 <= max_hdt_floor <= 1.0:
        raise ValueError(f"max_hdt_floor must lie in [0, 1] or be None, got {max_hdt_floor!r}")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool)
                                      and tolerance >= 0):
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}")
    tolerance = None if tolerance is None else float(tolerance)
    if method == "exhaustive":
        starts, select = 1, "single"
    elif starts is None:
        starts = DEFAULT_STARTS if select == "best_loss" else 1
    report = extract(target, canaries, method=method, trials=trials, starts=starts, select=select, seed=seed,
                     **attack)
    targets = list(target) if isinstance(target, (list, tuple)) else [target]
    described = [_describe_target(t) for t in targets]
    target_info: dict[str, Any] = described[0] if len(described) == 1 else {
        "content_hash": [d["content_hash"] for d in described], "device": described[0]["device"],
        "type": described[0]["type"]}
    evidence = {
        "true": list(report.canaries) if len(report.canaries) > 1 else report.canaries[0],
        "reconstructed": report.reconstructed_texts(),
        "trials": report.describe_trials(),
        "method": method,
        "starts": report.starts,
    }
    extra = {"hdt": report.hdt, "hdt_chance": report.chance_hdt, "correct": float(report.correct),
             "n_trials": float(report.n_trials)}
    if report.ranks is not None:
        extra["best_rank_of_truth"] = float(min(report.ranks))
    accuracy = LeakResult(
        attack="cea", metric="accuracy", value=report.accuracy, threshold=float(max_accuracy),
        direction="at_most", interval=report.accuracy_interval(confidence), confidence=confidence,
        chance=report.chance_accuracy, ceiling=1.0, label=_label(report), evidence=evidence, extra=extra,
        remedy=REMEDY, tolerance=tolerance, target=target_info)
    if max_hdt_floor is not None:
        hdt = LeakResult(
            attack="cea", metric="hdt", value=report.hdt, threshold=float(max_hdt_floor), direction="at_least",
            chance=report.chance_hdt, label=_label(report), evidence=evidence,
            extra={"accuracy": report.accuracy, "chance_accuracy": report.chance_accuracy},
            remedy=REMEDY, tolerance=tolerance, target=target_info)
        if accuracy.passed and not hdt.passed:
            record(accuracy)
            return check(hdt)
        record(hdt)
    return check(accuracy)
