"""Exposure figures as results: ``measure_exposure`` / ``assert_exposure_below``.

Their d-exposure siblings live in :mod:`.d_exposure_assertion` (which shares
this module's checks and ``target_facts``).

Two siblings rather than one function with a class argument, because the two
measurements take different things: exposure needs a sequence scorer and a
random canary (its space ``V0^n`` is the reference set), d-exposure needs a
token scorer, an ambiguous word per entity class and the words each class
owns.  With one function, half of the arguments would be meaningless in each
mode and a wrong mix would only fail at run time; two signatures make each
call complete and checkable, and both results share the metric unit (bits),
the chance baseline (``log2 e`` for large reference sets) and the message.

Each ``measure_*`` returns the recorded :class:`~pytest_privleak.results.LeakResult`
with ``threshold=None`` (verdict "measured"); the ``assert_*`` helper takes the
same arguments plus the limit and fails above it.  ``name=`` labels the result
(its key in the report and the baseline); by default the label is the canary's
text, or the inserted words with their classes.

A target from ``train_target`` measured the same way before is not attacked
again: the result comes from the result cache (:mod:`pytest_privleak.cache.results`;
``--privleak-rerun`` recomputes), identical to a recomputed one but for an
evidence line saying it was loaded.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...cache.results import cached_results
from ...canaries import Canary, CanarySet
from ...results import LeakResult, audited, record, target_facts
from .attack import DEFAULT_BATCH, DEFAULT_EXACT_BUDGET, DEFAULT_REFERENCES, compute_exposure
from .canary_set import compute_set_exposure
from ..over_canaries import CANARIES_KEY, one_canary_note, over_set
from ..inconclusive import check_allow_inconclusive, check_covered
from ..redaction import redaction_note, redaction_tag, shown_text
from ..remedies import UNKNOWN, remedy, remedy_for

#: The metric of a canary set's figure (issue 37): the mean of its members' exposures, a statistic of its own
#: (its gate tolerance is a mean's, ``report.gate.MEAN_EXPOSURE_TOLERANCE``), as d-exposure's mean is.
SET_METRIC = "mean_exposure_bits"

#: Methods that score a sample of the secret space instead of all of it.
_SAMPLING_METHODS = ("sampled", "extrapolated")

#: The remedy for a model of no known family; the result carries the one for the attacked model's
#: (:func:`.remedies.remedy_for`).
EXPOSURE_REMEDY = remedy("exposure", UNKNOWN)


def _check_bits(max_bits: float) -> float:
    """The limit in bits: a finite number >= 0 (``inf`` would pass every figure, so it is no limit)."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(max_bits, bool) or not isinstance(max_bits, (int, float)) or not 0 <= max_bits < math.inf:
        raise ValueError(f"max_bits must be a finite number >= 0 (exposure is measured in bits; an infinite limit "
                         f"passes every figure), got {max_bits!r}; fix: e.g. max_bits=4.0 (a canary the model never "
                         "memorised shows about 1.44 bits), or measure without a limit with measure_*(...)")
    return float(max_bits)


def _check_tolerance(tolerance: float | None) -> float | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ValueError(f"tolerance must be a number of bits >= 0 or None, got {tolerance!r}; fix: e.g. "
                         "tolerance=1.0, or leave it out for the gate's default")
    return float(tolerance)


def _check_name(name: Any) -> None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; fix: a stable label such as "
                         "name='pin said 100 times', used as the result's key in the report and the baseline")


def exposure_result(target: Any, canary: Any, *, threshold: float | None, tolerance: float | None = None,
                    name: str | None = None, **options: Any) -> LeakResult:
    """Measure the exposure of ``canary`` (:func:`.exposure.compute_exposure`) as an ``exposure_bits`` result.

    A :class:`~pytest_privleak.canaries.CanarySet` is scored once and each member ranked among the
    non-members (:func:`.canary_set.compute_set_exposure`); the figure is their mean (issue 37)."""
    _check_name(name)
    if isinstance(canary, CanarySet):
        return set_exposure_result(target, canary, threshold=threshold, tolerance=tolerance, name=name, **options)
    m = compute_exposure(target, canary, **options)
    shown = shown_text(canary)   # a secret from the team's data stays out of messages, reports, baselines
    evidence: dict[str, Any] = {
        "canary": shown, "method": m.method,
        "rank": f"{m.rank} of {m.space_size} secrets" if m.method == "exact"
                else f"{m.rank} among {m.n_references} sampled references",
        "space_size": m.space_size, "score": round(float(m.canary_score), 6)}
    evidence.update(m.evidence)  # the attack's own lines (a Mix And Match canary: which attack ran, its rank)
    evidence.update(redaction_note([canary]))
    extra = dict(m.extra)
    if m.fit:
        evidence["fit"] = f"skew-normal a={m.fit['a']:.3g} loc={m.fit['loc']:.4g} scale={m.fit['scale']:.4g}, " \
                          f"KS statistic {m.fit['ks']:.3f}"
        extra["fit_ks"] = m.fit["ks"]
    if isinstance(canary, Canary):
        evidence[CANARIES_KEY] = one_canary_note(shown)
    return LeakResult(
        attack="exposure", metric="exposure_bits", value=m.value, threshold=threshold, direction="at_most",
        interval=m.interval, confidence=m.confidence if m.method != "exact" else None, chance=m.chance,
        ceiling=m.ceiling, label=shown if name is None else name, evidence=evidence, extra=extra,
        remedy=remedy_for("exposure", target), tolerance=tolerance, target=target_facts(target))


def set_exposure_result(target: Any, canaries: CanarySet, *, threshold: float | None, tolerance: float | None,
                        name: str | None, **options: Any) -> LeakResult:
    """The ``exposure_bits`` result of a canary set: the mean over its members, each ranked among the
    non-members of one scoring (:mod:`.canary_set`), with the worst member and every member's figure."""
    figures = compute_set_exposure(target, canaries, **options)
    first = figures[0]
    ranks = ", ".join(str(f.rank) for f in figures)
    among = (f"of {first.space_size:,} secrets (the {len(canaries) - 1} other canaries of the set left out)"
             if first.method == "exact" else f"among {first.n_references} sampled references")
    per_canary = ", ".join(f"{c.text!r}: {f.value:.3g}" for c, f in zip(canaries, figures))
    evidence: dict[str, Any] = {"method": first.method, "rank": f"ranks {ranks} {among}",
                                "space_size": canaries.pattern.space_size}
    for f in figures:
        evidence.update(f.evidence)
    extra = {}
    if first.fit:
        extra["fit_ks_max"] = max(f.fit["ks"] for f in figures)
    base = LeakResult(
        attack="exposure", metric=SET_METRIC, value=first.value, threshold=threshold, direction="at_most",
        interval=None, confidence=None, chance=first.chance, ceiling=first.ceiling,
        label=canaries.label if name is None else name, evidence=evidence, extra=extra,
        remedy=remedy_for("exposure", target), tolerance=tolerance,
        target={**target_facts(target), "canary_set": canaries.fingerprint()})
    confidence = options.get("confidence", 0.95)
    return over_set(base, canaries, [f.value for f in figures], per_canary=per_canary, confidence=confidence)


def ceiling_under_limit(ceiling: float | None, threshold: float | None) -> bool:
    """A sampled figure can read at most its ceiling ``log2 N``; at or under the limit it can never fail."""
    return ceiling is not None and threshold is not None and ceiling <= threshold + 1e-12


def capped_at_the_limit(what: str, ceiling: float, threshold: float, size: Any) -> tuple[str, str]:
    """``(covered, rest)`` of a sampled exposure whose ceiling cannot pass the limit (review 6b N5: a memorised
    house number of a 10^5 space read 11.0 bits, its sampled ceiling, and passed a 12-bit limit; exact 16.6)."""
    need = 2 ** math.ceil(threshold + 1)
    space = f" of its space of {size:,}" if isinstance(size, int) else ""
    return (f"{what} was ranked among sampled references{space} whose ceiling, {ceiling:.3g} bits, is at or under "
            f"the limit {threshold:g}, so this measurement could not have failed",
            f"references >= {need:,} (a ceiling above the limit), or method='exact' / 'extrapolated'")


def exposure_coverage(result: LeakResult) -> tuple[bool, str, str]:
    """``(complete, what was covered, what covers the rest)`` of an exposure result (issue 23 item 4).

    The default (``method="auto"``) scores every secret of a space of up to
    ``DEFAULT_EXACT_BUDGET`` secrets; a sampled or extrapolated figure for such
    a space covers only the references drawn, and its ceiling
    (``log2`` of the references) can sit under the limit, so a memorised
    canary would pass.  A Mix And Match pruned figure is an upper bound and
    so is conclusive when it passes.
    """
    method, size = result.evidence.get("method"), result.evidence.get("space_size")
    if method not in _SAMPLING_METHODS or not isinstance(size, int) or size > DEFAULT_EXACT_BUDGET:
        if method == "sampled" and ceiling_under_limit(result.ceiling, result.threshold):
            return False, *capped_at_the_limit("the canary", result.ceiling, result.threshold, size)
        return True, "", ""
    covered = (f"method={method!r} ranked the canary among {result.evidence.get('rank', 'a sample').split(' among ')[-1]}"
               f" of its space of {size:,} secrets (ceiling {result.ceiling:.3g} bits), where the default scores "
               f"all {size:,}")
    rest = (f"method='auto' (or 'exact') with exact_budget >= {size:,} scores every secret "
            f"(the default exact_budget is {DEFAULT_EXACT_BUDGET:,})")
    return False, covered, rest


def measured_exposure(target: Any, canary: Any, *, name: str | None = None, **options: Any) -> LeakResult:
    """The measured ``exposure_bits`` result (``threshold=None``): from the result cache when ``target`` has a
    content hash and the same call ran before (:mod:`pytest_privleak.cache.results`), else computed."""
    _check_name(name)
    inputs = {"canary": canary, "name": name, "secrets": redaction_tag([canary]), **options}
    return cached_results("exposure", [target], inputs,
                          lambda: [exposure_result(target, canary, threshold=None, name=name, **options)])[0]


@audited(resolved=("method",))
def measure_exposure(target: Any, canary: Any, *, method: str = "auto", references: int = DEFAULT_REFERENCES,
                     exact_budget: int = DEFAULT_EXACT_BUDGET, seed: int = 0, confidence: float = 0.95,
                     batch_size: int = DEFAULT_BATCH, bootstrap: int = 30, name: str | None = None) -> LeakResult:
    """Measure the exposure of ``canary`` under ``target`` without gating; the result is recorded.

    Same arguments as :func:`assert_exposure_below` without the limit. Returns the
    ``exposure.exposure_bits`` :class:`LeakResult` (``threshold=None``) with the
    rank of the canary, the method that ran and, when extrapolated, the fit.
    """
    return record(measured_exposure(target, canary, name=name, method=method, references=references,
                                    exact_budget=exact_budget, seed=seed, confidence=confidence,
                                    batch_size=batch_size, bootstrap=bootstrap))


@audited(resolved=("method",))
def assert_exposure_below(target: Any, canary: Any, max_bits: float, *, method: str = "auto",
                          references: int = DEFAULT_REFERENCES, exact_budget: int = DEFAULT_EXACT_BUDGET,
                          seed: int = 0, confidence: float = 0.95, batch_size: int = DEFAULT_BATCH,
                          bootstrap: int = 30, name: str | None = None,
                          tolerance: float | None = None, allow_inconclusive: bool = False) -> LeakResult:
    """Fail when the exposure of ``canary`` under ``target`` exceeds ``max_bits``.

    ``canary``: one canary, or a :class:`~pytest_privleak.canaries.CanarySet` (the ``canary``
    fixture's default: 8 distinct secrets of the pattern, issue 37), whose figure
    ``mean_exposure_bits`` is the mean of its members' exposures, each ranked among the secrets
    that are not in the set from ONE scoring of the space; the worst member and every member's
    figure are in the message, the per-canary figures in ``result.per_canary``.

    Exposure (Secret Sharer, d-exposure-discriminative eq. 1) is
    ``log2 |R| - log2 rank`` of the canary's score among its space ``V0^n``;
    ``target`` is a :class:`~pytest_privleak.protocols.SequenceScorer` (lower
    score = likelier: log-perplexity for a language model, the training loss
    with the canary's intent and tags for the joint NLU model). ``method``:
    ``"exact"`` (enumerate), ``"sampled"`` (rank among ``references`` random
    secrets, ceiling ``log2 references``), ``"extrapolated"`` (skew-normal fit)
    or ``"auto"`` (exact when ``|V0|^n <= exact_budget``, else extrapolated).
    The chance figure is the expected exposure of a canary the model never
    memorised (about ``log2 e = 1.44`` bits). A Mix And Match canary
    (``mask_canary("i bought new towels .", "Intent")``) on a ``transformer-classifier``
    target or ``mix_and_match_model(...)`` is ranked over the classifier's vocabulary
    (mix-and-match-text-classifiers §4.3): ``"auto"``/``"exact"`` search it exhaustively,
    ``"mix-and-match"`` prunes the generator's top ``references`` candidates (an upper
    bound). ``name``: the result's label (default: the
    canary's text). ``tolerance``: bits this figure may grow against a stored baseline
    before the baseline gate fails (default: the gate's own, 1 bit). Canary tokens outside
    the target's vocabulary raise ``OutOfVocabularyError`` and non-finite scores
    ``NonFiniteError``. A sampled or extrapolated figure within the limit for a space
    the default would score in full (at most ``DEFAULT_EXACT_BUDGET`` secrets) is
    inconclusive and fails with ``InconclusiveAuditError`` unless
    ``allow_inconclusive=True``. Returns the recorded result.
    """
    __tracebackhide__ = True
    threshold = _check_bits(max_bits)
    tolerance = _check_tolerance(tolerance)
    allow = check_allow_inconclusive(allow_inconclusive)
    measured = measured_exposure(target, canary, name=name, method=method, references=references,
                                 exact_budget=exact_budget, seed=seed, confidence=confidence, batch_size=batch_size,
                                 bootstrap=bootstrap)
    gated = dataclasses.replace(measured, threshold=threshold, tolerance=tolerance)
    complete, covered, rest = exposure_coverage(gated)
    return check_covered(gated, complete=complete, covered=covered, rest=rest, allow_inconclusive=allow)
