"""``measure_cea`` and ``assert_cea_accuracy_at_most``: the canary extraction attack as a figure and as a gate.

canary-extraction-nlu §3-§6. The default attack is the strongest that fits
its budget (``method="auto"``, see :func:`.cea.extract`); the paper's attack
stays available as ``method="gradient"`` (``select="single"``: one start).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ...canaries import Canary, CanarySet
from ...results import LeakResult, audited, record
from ..over_canaries import CANARIES_KEY, one_canary_note, over_set
from ..candidates import DEFAULT_BUDGET
from .attack import DEFAULT_RANKED, ExtractionReport, extract
from ..inconclusive import check_covered
from ..redaction import redaction_tag, shown_text
from ..remedies import CEA_RECURRENT, CEA_TRANSFORMER, TRANSFORMER, model_family

#: §6 of the paper; Table 3: the three combined bring HDT to the random baseline.
REMEDY = CEA_RECURRENT
#: The remedy for a transformers model (issue 24 item 4): §6's character embeddings do not apply to word pieces.
TRANSFORMERS_REMEDY = CEA_TRANSFORMER


def remedy_for(target_type: str) -> str:
    """The remedy for a target class named ``target_type``: the BiLSTM paper's §6 defences, or a transformer's
    (the assertions choose by the attacked model itself, :func:`.remedies.model_family`)."""
    return TRANSFORMERS_REMEDY if target_type.startswith("Transformers") else REMEDY


#: Random starts per gradient trial unless told otherwise (``select="best_loss"``).
DEFAULT_STARTS = 8


def _describe_target(target: Any) -> dict[str, Any]:
    content_hash = getattr(target, "content_hash", None)
    if callable(content_hash):
        content_hash = content_hash()
    try:
        device = str(target.input_embeddings().device)
    except Exception:  # the attack itself reports a broken model; here we only describe it
        device = None
    describe = getattr(target, "describe", None)
    facts = describe() if callable(describe) else {}
    # the target's own facts (kind, config, DP settings and spent epsilon) let the report pair a DP model with
    # its plain twin, as exposure's results do (exposure_assertion.target_facts)
    return {**(facts if isinstance(facts, dict) else {}),
            "content_hash": content_hash if isinstance(content_hash, (str, type(None))) else str(content_hash),
            "device": device, "type": type(target).__name__}


def _label(report: ExtractionReport, name: str | None) -> str:
    if name is not None:
        return name
    if len(report.canaries) == 1:
        return report.canaries[0]
    return f"{len(report.canaries)} canaries: {report.canaries[0]!r}, ..."


def _unit(name: str, value: Any, *, none_ok: bool = False) -> float | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if none_ok and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1]{' or None' if none_ok else ''}, got {value!r}; "
                         f"fix: e.g. {name}=0.0" + (" (chance is 1 - 1/|V0|)" if name == "max_hdt_floor" else ""))
    return float(value)


def _check_name(name: Any) -> None:
    """``name`` is the result's label, its key in the report and the baseline: a non-empty string or None."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    fix = ("fix: a stable label such as name='pin said once' (it keys the result in the report and the "
           "baseline), or leave name=None to use the canary text")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a string or None, got {type(name).__name__} {name!r}; {fix}")
    if isinstance(name, str) and not name.strip():
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; {fix}")


def run_cea(target: Any, canaries: Any, *, method: str = "auto", trials: int = 10, starts: int | None = None,
            select: str = "best_loss", confidence: float = 0.95, seed: int = 0, budget: int | None = DEFAULT_BUDGET,
            ranked: int = DEFAULT_RANKED, name: str | None = None, **attack: Any) -> ExtractionReport:
    """Check the shared arguments and run :func:`.cea.extract` with the assertion's defaults."""
    _check_name(name)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")
    if method == "exhaustive":
        starts, select = 1, "single"
    elif starts is None:
        starts = DEFAULT_STARTS if select == "best_loss" else 1
    return extract(target, canaries, method=method, trials=trials, starts=starts, select=select, seed=seed,
                   budget=budget, ranked=ranked, **attack)


def accuracy_result(report: ExtractionReport, target: Any, *, threshold: float | None, confidence: float,
                    name: str | None, tolerance: float | None) -> LeakResult:
    """The ``cea.accuracy`` result of a report: figure, interval, chance, attack, ranks, evidence."""
    targets = list(target) if isinstance(target, (list, tuple)) else [target]
    described = [_describe_target(t) for t in targets]
    remedy = TRANSFORMERS_REMEDY if model_family(targets[0]) == TRANSFORMER else REMEDY
    target_info: dict[str, Any] = described[0] if len(described) == 1 else {
        "content_hash": [d["content_hash"] for d in described], "device": described[0]["device"],
        "type": described[0]["type"]}
    ranks = report.describe_ranks()
    evidence = {
        "true": list(report.canaries) if len(report.canaries) > 1 else report.canaries[0],
        "reconstructed": report.reconstructed_texts(),
        "attack": report.describe_attack(),
        "trials": report.describe_trials(),
        "rank_of_truth": ranks if len(ranks) > 1 else ranks[0],
        "method": report.method,
        "starts": report.starts,
        **report.redaction,
    }
    target_info = {**target_info, "attacks": list(report.attacks), "space_sizes": list(report.space_sizes or ())}
    extra = {"hdt": report.hdt, "hdt_chance": report.chance_hdt, "correct": float(report.correct),
             "n_trials": float(report.n_trials)}
    exact = [r for r, e in zip(report.ranks or (), report.ranks_exact) if e]
    if exact:
        extra["best_rank_of_truth"] = float(min(exact))
    return LeakResult(
        attack="cea", metric="accuracy", value=report.accuracy, threshold=threshold, direction="at_most",
        interval=report.accuracy_interval(confidence), confidence=confidence, chance=report.chance_accuracy,
        ceiling=1.0, label=_label(report, name), evidence=evidence, extra=extra,
        remedy=remedy,
        tolerance=tolerance, target=target_info)


def measured_cea(target, canaries, *, method: str = "auto", trials: int = 10, starts: int | None = None,
                 select: str = "best_loss", confidence: float = 0.95, seed: int = 0,
                 budget: int | None = DEFAULT_BUDGET, ranked: int = DEFAULT_RANKED, name: str | None = None,
                 **attack: Any) -> LeakResult:
    """The measured ``cea.accuracy`` result (``threshold=None``), from the result cache when the target(s)
    have a content hash and the same call ran before (:mod:`pytest_privleak.cache.results`), else computed."""
    from ...cache.results import cached_results

    _check_name(name)
    models = list(target) if isinstance(target, (list, tuple)) else [target]
    items = list(canaries) if isinstance(canaries, (list, tuple)) else [canaries]
    inputs = {"canaries": items,
              "method": method, "trials": trials, "starts": starts, "select": select, "confidence": confidence,
              "seed": seed, "budget": budget, "ranked": ranked, "name": name, "attack": attack,
              "secrets": redaction_tag(c for c in items if hasattr(c, "pattern"))}

    def compute() -> list[LeakResult]:
        report = run_cea(target, canaries, method=method, trials=trials, starts=starts, select=select,
                         confidence=confidence, seed=seed, budget=budget, ranked=ranked, name=name, **attack)
        result = accuracy_result(report, target, threshold=None, confidence=confidence, name=name, tolerance=None)
        return [over_canaries(result, report, canaries, name)]

    return cached_results("cea", models, inputs, compute, threads_matter=not _scores_every_secret(canaries, method,
                                                                                                  budget))[0]


def over_canaries(result: LeakResult, report: ExtractionReport, canaries: Any, name: str | None) -> LeakResult:
    """The accuracy over a canary set (issue 37): pooled over its members (each attacked among the
    non-members), with each member's accuracy, the worst, and the set's label; one canary says so."""
    if isinstance(canaries, Canary):
        return dataclasses.replace(result, evidence={**result.evidence, CANARIES_KEY: one_canary_note(shown_text(canaries))})
    if not isinstance(canaries, CanarySet):
        return result
    hits = [0] * len(canaries)
    seen = [0] * len(canaries)
    for i, t, r in zip(report.canary_index, report.true, report.reconstructed):
        hits[i] += t == r
        seen[i] += 1
    figures = [h / n for h, n in zip(hits, seen)]
    listed = ", ".join(f"{shown_text(c)!r}: {h}/{n}" for c, h, n in zip(canaries, hits, seen))
    labelled = result if name is not None else dataclasses.replace(result, label=canaries.label)
    labelled = dataclasses.replace(labelled, target={**labelled.target, "canary_set": canaries.fingerprint()})
    return over_set(labelled, canaries, figures, per_canary=f"secrets recovered: {listed}", rate=True)


def _scores_every_secret(canaries: Any, method: str, budget: int | None) -> bool:
    """The attack only scores (no gradient search), so its figure does not depend on torch's thread count."""
    items = list(canaries) if isinstance(canaries, (list, tuple)) else [canaries]
    sizes = [getattr(getattr(c, "pattern", None), "space_size", None) for c in items]
    if any(size is None for size in sizes):
        return False
    return method == "exhaustive" or (method == "auto" and (budget is None or max(sizes) <= budget))


def hdt_result(accuracy: LeakResult, floor: float, tolerance: float | None) -> LeakResult:
    """The ``cea.hdt`` gate (at least ``floor``) of a measured accuracy result (its ``extra`` holds the HDT)."""
    return LeakResult(
        attack="cea", metric="hdt", value=accuracy.extra["hdt"], threshold=floor, direction="at_least",
        chance=accuracy.extra["hdt_chance"], label=accuracy.label, evidence=accuracy.evidence,
        extra={"accuracy": accuracy.value, "chance_accuracy": accuracy.chance},
        remedy=accuracy.remedy, tolerance=tolerance, target=accuracy.target)


@audited(resolved=("method",))
def measure_cea(target, canaries, *, method: str = "auto", trials: int = 10, starts: int | None = None,
                select: str = "best_loss", confidence: float = 0.95, seed: int = 0,
                budget: int | None = DEFAULT_BUDGET, ranked: int = DEFAULT_RANKED, name: str | None = None,
                **attack: Any) -> LeakResult:
    """Measure the canary extraction accuracy without gating; the result (verdict "measured") is recorded.

    Same arguments as :func:`assert_cea_accuracy_at_most` without the limits.
    Returns the ``cea.accuracy`` :class:`LeakResult` (``threshold=None``) with
    the HDT, the attack that ran and the rank of each true secret. A target
    from ``train_target`` attacked the same way before is not attacked again:
    the result comes from the result cache (``--privleak-rerun`` recomputes).
    """
    return record(measured_cea(target, canaries, method=method, trials=trials, starts=starts, select=select,
                               confidence=confidence, seed=seed, budget=budget, ranked=ranked, name=name,
                               **attack))


@audited(resolved=("method",))
def assert_cea_accuracy_at_most(target, canaries, max_accuracy: float, *, method: str = "auto", trials: int = 10,
                                starts: int | None = None, select: str = "best_loss",
                                max_hdt_floor: float | None = None, confidence: float = 0.95, seed: int = 0,
                                budget: int | None = DEFAULT_BUDGET, ranked: int = DEFAULT_RANKED,
                                name: str | None = None, tolerance: float | None = None,
                                allow_inconclusive: bool = False, **attack: Any) -> LeakResult:
    """Fail when the canary extraction attack recovers secrets more often than ``max_accuracy``.

    ``target``: a model implementing ``SoftInputModel`` (protocols.py), or a
    list of them aligned with a list of ``canaries``: model ``i`` was trained
    with canary ``i``. That is the paper's protocol (§4.2: each trial a
    different canary in a freshly trained model) in one call:
    ``assert_cea_accuracy_at_most([m1, m2, m3], [pin1, pin2, pin3], 0.0)``.
    One model with several canaries attacks each in that model.

    ``method="auto"`` (default): the strongest attack that fits the budget.
    A canary whose secret space ``|V0|^n`` is at most ``budget`` (default
    10^5: 4-digit pins, 4-colour canaries, 5-digit pins) is scored exhaustively:
    every secret's loss is computed, the guess is the lowest (ties: the first
    in V0 order), and the rank of the true secret is exact (ties counted
    against it). That is deterministic: one trial per canary, ``trials`` and
    ``starts`` do not apply, and the accuracy is the fraction of canaries whose
    top-1 reconstruction is the secret. A larger space gets ``trials``
    gradient runs, each of ``starts`` (default 8) random starts, after which
    the ``ranked`` (256) most probable secrets of each start's final logits are
    scored and the lowest loss kept; the accuracy is then over
    ``len(canaries) * trials`` trials, and the message gives a lower bound on
    the truth's rank. ``method="gradient"`` is the paper's attack (§3.1, App. B;
    ``select="single"`` for one start per trial), ``"exhaustive"`` forces full
    scoring, ``"trivial"`` the continuous baseline.

    Inconclusive is not a pass (issue 23 item 4): a run within the limit that covered less than the
    default (``method="gradient"`` or ``"trivial"`` on a space the default scores in full, or fewer
    than the paper's 250 epochs) raises ``InconclusiveAuditError`` naming what covers the rest, unless
    ``allow_inconclusive=True``; a leak found by a partial run still fails as a leak.

    The verdict compares the *point* accuracy with ``max_accuracy``, not the
    interval's lower bound: deliberately conservative for a privacy gate, a
    model is flagged when the attack succeeded at the observed rate. The
    Clopper-Pearson interval at ``confidence`` is printed beside it.
    ``max_hdt_floor``: also fail when the mean Hamming distance per token is
    below this floor (chance is ``1 - 1/|V0|``). ``name``: the result's label
    (default: the canary text). ``tolerance``: how far the accuracy may grow
    against a stored baseline before the baseline gate fails. Other keyword
    arguments go to :func:`pytest_privleak.attacks.cea.attack.extract` (``epochs``,
    ``lr``, ``init_scale``, ``temperature0``, ...). A model whose embeddings
    or losses are NaN or infinite raises ``NonFiniteError``, never passes.
    Results of targets with a content hash (from ``train_target``) are cached
    (:mod:`pytest_privleak.cache.results`): the same call on the same target
    loads the figure, and the message says so; ``--privleak-rerun`` recomputes.
    """
    __tracebackhide__ = True
    from ...assertions import check

    threshold = _unit("max_accuracy", max_accuracy)
    floor = _unit("max_hdt_floor", max_hdt_floor, none_ok=True)
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not tolerance >= 0):
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}; fix: leave tolerance=None "
                         "(the baseline gate takes its tolerance from the saved baseline or the ini "
                         "privleak_tolerance), or give e.g. tolerance=0.1 to store with the next saved baseline")
    tolerance = None if tolerance is None else float(tolerance)
    measured = measured_cea(target, canaries, method=method, trials=trials, starts=starts, select=select,
                            confidence=confidence, seed=seed, budget=budget, ranked=ranked, name=name, **attack)
    accuracy = dataclasses.replace(measured, threshold=threshold, tolerance=tolerance)
    complete, covered, rest = coverage(accuracy, attack.get("epochs", PAPER_EPOCHS))
    if floor is not None:
        hdt = hdt_result(accuracy, floor, tolerance)
        if accuracy.passed and not hdt.passed:
            record(accuracy)
            return check(hdt)
        record(hdt)
    return check_covered(accuracy, complete=complete, covered=covered, rest=rest, allow_inconclusive=allow_inconclusive)


#: The paper's gradient budget (canary-extraction-nlu App. B): 250 epochs.
PAPER_EPOCHS = 250


def coverage(result: LeakResult, epochs: int) -> tuple[bool, str, str]:
    """Did the attack cover what ``method="auto"`` covers? ``(complete, what it covered, what covers the rest)``.

    The default scores every secret of a space of at most ``DEFAULT_BUDGET`` (10^5); a canary of such a
    space attacked otherwise (the gradient search or the trivial baseline) was not covered, nor was a larger
    space whose gradient search ran fewer epochs than the paper's 250 (issue 23 item 4).
    """
    attacks = result.target.get("attacks") or []
    sizes = result.target.get("space_sizes") or []
    short = [(a, n) for a, n in zip(attacks, sizes) if a != "exhaustive" and n <= DEFAULT_BUDGET]
    if short:
        size = max(n for _, n in short)
        how = ", ".join(sorted({a for a, _ in short}))
        return (False, f"{len(short)} of {len(attacks)} canary(ies) searched by {how} instead of scoring all "
                       f"{size:,} secrets of their space",
                f"method='auto' (or 'exhaustive') with budget >= {size:,} scores every secret")
    gradient = [n for a, n in zip(attacks, sizes) if a.startswith("gradient")]
    if gradient and epochs < PAPER_EPOCHS:
        return (False, f"a gradient search of {epochs} epochs (the paper's App. B runs {PAPER_EPOCHS})",
                f"epochs={PAPER_EPOCHS} (the default)")
    return True, "", ""
