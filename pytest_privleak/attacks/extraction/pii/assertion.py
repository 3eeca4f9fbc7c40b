"""PII figures as results: ``measure_pii_exposure`` / ``assert_pii_exposure_below`` and
``measure_pii_extraction`` / ``assert_pii_extraction_at_most`` (issue 20 item 3).

The audit (:func:`.pii_exposure.audit_pii`) measures every PII item found in the
training data; the results summarise it:

- ``pii_exposure.max_exposure_bits``: the exposure of the most exposed item
  (the worst case a gate should watch), with its interval, chance and ceiling;
- ``pii_extraction.extracted_share``: the share of audited items extracted,
  with its Clopper-Pearson interval and the chance rate (the mean over items of
  the probability that a model which memorised nothing ranks the item first).

Both carry the per-item table in their evidence, most exposed first, with every
item redacted (kind, keyed hash, length) unless ``show_pii=True``.

As for a canary's exposure (:func:`.exposure_assertion.exposure_coverage`), an
exposure pass is inconclusive, not a pass, when an item whose space the default
scores in full (at most ``DEFAULT_EXACT_BUDGET`` strings) was only ranked among
sampled references: its ceiling ``log2 N`` can sit under the limit, so a
memorised item would pass.  An extraction share needs no such rule: an item
first among the whole space is first among any references, so a sampled rank
can only over-count extraction.
"""
from __future__ import annotations

import math
from typing import Any

from ....results import LeakResult, record, target_facts, audited
from ....stats import clopper_pearson
from ...exposure.assertion import capped_at_the_limit, ceiling_under_limit
from ...inconclusive import check_allow_inconclusive, check_covered
from .attack import (DEFAULT_BATCH, DEFAULT_BOOTSTRAP, DEFAULT_EXACT_BUDGET, DEFAULT_REFERENCES, PiiAudit,
                           audit_pii, exposure_summary, share_extracted)

__all__ = ["assert_pii_exposure_below", "assert_pii_extraction_at_most", "measure_pii_exposure",
           "measure_pii_extraction"]

PII_REMEDY = ("the model memorised PII of its training data: scrub or pseudonymise PII before training (replace "
              "it with placeholders or fake values), deduplicate the data (repeated PII is what leaks most, Lukas "
              "et al. 2023 §5), or train with differential privacy (DP-SGD)")


def _check_name(name: Any) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; fix: a stable label such as "
                         "name='support tickets PII', the result's key in the report and the baseline")


def _label(dataset: Any, name: str | None) -> str:
    if name is not None:
        return name
    return f"PII in {getattr(dataset, 'name', 'training texts')}"


def _evidence(audit: PiiAudit, confidence: float) -> dict[str, Any]:
    return {**audit.describe, "confidence": f"{confidence:.0%}", "items": audit.table()}


def exposure_result(model: Any, dataset: Any, audit: PiiAudit, *, threshold: float | None, confidence: float,
                    name: str | None) -> LeakResult:
    """``pii_exposure.max_exposure_bits`` of an audit."""
    top, chance = exposure_summary(audit)
    e = top.exposure
    evidence = {"most_exposed": top.row(), **_evidence(audit, confidence)}
    values = [f.exposure.value for f in audit.measured]
    extra = {"items": float(len(values)), "mean_exposure": float(sum(values) / len(values))}
    return LeakResult(attack="pii_exposure", metric="max_exposure_bits", value=e.value, threshold=threshold,
                      direction="at_most", interval=e.interval, confidence=e.confidence if e.method != "exact" else None,
                      chance=chance, ceiling=e.ceiling, label=_label(dataset, name), evidence=evidence, extra=extra,
                      remedy=PII_REMEDY, target=target_facts(model))


def exposure_coverage(audit: PiiAudit, threshold: float | None = None) -> tuple[bool, str, str]:
    """``(complete, what was covered, what covers the rest)``: incomplete when an item whose space the default
    scores in full was ranked among sampled references (``method="sampled"`` / ``"extrapolated"``, or an
    ``exact_budget`` below the default), or when a sampled item's ceiling is at or under the limit."""
    short = [f for f in audit.measured
             if f.exposure.method != "exact" and f.exposure.space_size <= DEFAULT_EXACT_BUDGET]
    capped = [f for f in audit.measured
              if f.exposure.method == "sampled" and ceiling_under_limit(f.exposure.ceiling, threshold)]
    if capped and not short:
        e = capped[0].exposure
        return False, *capped_at_the_limit(f"{len(capped)} item(s), e.g. {capped[0].label},", e.ceiling, threshold,
                                           e.space_size)
    if not short:
        return True, "", ""
    largest = max(f.exposure.space_size for f in short)
    e = short[0].exposure
    covered = (f"{len(short)} of {len(audit.measured)} item(s) were ranked among sampled references in spaces the "
               f"default scores in full (e.g. {short[0].label}: {e.method}, {e.n_references:,} references of "
               f"{e.space_size:,} strings, ceiling {e.ceiling:.3g} bits)")
    rest = (f"method='auto' (or 'exact') with exact_budget >= {largest:,} scores every string (the default "
            f"exact_budget is {DEFAULT_EXACT_BUDGET:,})")
    return False, covered, rest


def extraction_result(model: Any, dataset: Any, audit: PiiAudit, *, threshold: float | None, confidence: float,
                      name: str | None) -> LeakResult:
    """``pii_extraction.extracted_share`` of an audit, with its Clopper-Pearson interval."""
    k, n, chance = share_extracted(audit)
    evidence = {"audited": f"{k} of {n} item(s) extracted", **_evidence(audit, confidence)}
    return LeakResult(attack="pii_extraction", metric="extracted_share", value=k / n, threshold=threshold,
                      direction="at_most", interval=clopper_pearson(k, n, confidence), confidence=confidence,
                      chance=chance, ceiling=1.0, label=_label(dataset, name), evidence=evidence,
                      extra={"extracted": float(k), "items": float(n)}, remedy=PII_REMEDY, target=target_facts(model))


def _audit(model: Any, dataset: Any, detectors: Any, options: dict[str, Any], name: str | None) -> PiiAudit:
    _check_name(name)
    return audit_pii(model, dataset, detectors, **options)


def _limit(arg: str, value: Any, high: float, example: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
        raise ValueError(f"{arg} must be a number in [0, {high}], got {value!r}; fix: e.g. {example}")
    return float(value)


@audited
def measure_pii_exposure(model: Any, dataset: Any, detectors: Any = "default", *, extraction: str = "auto",
                         generation: dict | None = None, method: str = "auto",
                         context: str = "sentence", references: int = DEFAULT_REFERENCES,
                         exact_budget: int = DEFAULT_EXACT_BUDGET, bootstrap: int = DEFAULT_BOOTSTRAP,
                         seed: int = 0, confidence: float = 0.95, batch_size: int = DEFAULT_BATCH,
                         min_count: int = 1, show_pii: bool = False, salt: str | bytes | None = None,
                         name: str | None = None) -> LeakResult:
    """Measure the exposure of every PII item in ``dataset``'s training split under ``model``; recorded.

    ``model``: a :class:`~pytest_privleak.protocols.SequenceScorer` (lower =
    likelier). ``detectors``: ``"default"`` (phone, email, card, address), names
    from the registry, detector objects or a list of them. Returns the
    ``pii_exposure.max_exposure_bits`` result (``threshold=None``); its evidence
    holds the per-item table (redacted unless ``show_pii=True``).
    """
    options = dict(method=method, context=context, extraction=extraction, generation=generation,
                   references=references, exact_budget=exact_budget, bootstrap=bootstrap, seed=seed,
                   confidence=confidence, batch_size=batch_size, min_count=min_count, show_pii=show_pii,
                   salt=salt)
    audit = _audit(model, dataset, detectors, options, name)
    return record(exposure_result(model, dataset, audit, threshold=None, confidence=confidence, name=name))


@audited
def assert_pii_exposure_below(model: Any, dataset: Any, max_bits: float, detectors: Any = "default", *,
                              extraction: str = "auto", generation: dict | None = None, method: str = "auto",
                              context: str = "sentence", references: int = DEFAULT_REFERENCES,
                              exact_budget: int = DEFAULT_EXACT_BUDGET, bootstrap: int = DEFAULT_BOOTSTRAP,
                              seed: int = 0, confidence: float = 0.95, batch_size: int = DEFAULT_BATCH,
                              min_count: int = 1, show_pii: bool = False, salt: str | bytes | None = None,
                              name: str | None = None, allow_inconclusive: bool = False) -> LeakResult:
    """Fail when any PII item of the training data has an exposure above ``max_bits``.

    Same arguments as :func:`measure_pii_exposure` plus the limit in bits. The
    maximum over many items of a model that memorised nothing is above the
    per-item chance (about 1.44 bits): choose the limit against the ceiling.
    A pass where an item of a space the default scores in full (at most
    ``DEFAULT_EXACT_BUDGET`` strings) was ranked among sampled references is
    inconclusive (``InconclusiveAuditError``) unless ``allow_inconclusive=True``,
    as for a canary's exposure.
    """
    __tracebackhide__ = True
    allow = check_allow_inconclusive(allow_inconclusive)
    if isinstance(max_bits, bool) or not isinstance(max_bits, (int, float)) or not 0 <= max_bits < math.inf:
        raise ValueError(f"max_bits must be a finite number >= 0, got {max_bits!r}; fix: e.g. max_bits=10.0")
    options = dict(method=method, context=context, extraction=extraction, generation=generation,
                   references=references, exact_budget=exact_budget, bootstrap=bootstrap, seed=seed,
                   confidence=confidence, batch_size=batch_size, min_count=min_count, show_pii=show_pii,
                   salt=salt)
    audit = _audit(model, dataset, detectors, options, name)
    result = exposure_result(model, dataset, audit, threshold=float(max_bits), confidence=confidence, name=name)
    complete, covered, rest = exposure_coverage(audit, float(max_bits))
    return check_covered(result, complete=complete, covered=covered, rest=rest, allow_inconclusive=allow)


@audited
def measure_pii_extraction(model: Any, dataset: Any, detectors: Any = "default", *, extraction: str = "auto",
                           generation: dict | None = None, method: str = "auto", context: str = "sentence",
                           references: int = DEFAULT_REFERENCES,
                           exact_budget: int = DEFAULT_EXACT_BUDGET, seed: int = 0, confidence: float = 0.95,
                           batch_size: int = DEFAULT_BATCH, min_count: int = 1, show_pii: bool = False,
                           salt: str | bytes | None = None, name: str | None = None) -> LeakResult:
    """Measure the share of the training data's PII items the model extracts; recorded.

    ``extraction``: ``"generation"`` (the words before the item prompt the
    model; extracted when a continuation holds it; ``generation={"method":
    "beam", "budget": 10}`` by default, or greedy / sampling), ``"rank"``
    (extracted when the model ranks it first among the same-format candidates
    scored) or ``"auto"`` (generation when the model can generate). See
    :mod:`.pii_exposure`.
    Returns the ``pii_extraction.extracted_share`` result (``threshold=None``).
    """
    options = dict(method=method, context=context, extraction=extraction, generation=generation,
                   references=references, exact_budget=exact_budget, bootstrap=0, seed=seed,
                   confidence=confidence, batch_size=batch_size, min_count=min_count, show_pii=show_pii,
                   salt=salt)
    audit = _audit(model, dataset, detectors, options, name)
    return record(extraction_result(model, dataset, audit, threshold=None, confidence=confidence, name=name))


@audited
def assert_pii_extraction_at_most(model: Any, dataset: Any, max_share: float, detectors: Any = "default", *,
                                  extraction: str = "auto", generation: dict | None = None, method: str = "auto",
                                  context: str = "sentence", references: int = DEFAULT_REFERENCES,
                                  exact_budget: int = DEFAULT_EXACT_BUDGET,
                                  seed: int = 0, confidence: float = 0.95, batch_size: int = DEFAULT_BATCH,
                                  min_count: int = 1, show_pii: bool = False, salt: str | bytes | None = None,
                                  name: str | None = None) -> LeakResult:
    """Fail when the share of PII items extracted from ``model`` exceeds ``max_share``.

    The figure is ``extracted / audited`` with its Clopper-Pearson interval and
    the chance rate; the evidence lists every item (redacted unless
    ``show_pii=True``). Same arguments as :func:`measure_pii_extraction`.
    """
    __tracebackhide__ = True
    threshold = _limit("max_share", max_share, 1.0, "max_share=0.0 (no item may be extracted)")
    options = dict(method=method, context=context, extraction=extraction, generation=generation,
                   references=references, exact_budget=exact_budget, bootstrap=0, seed=seed,
                   confidence=confidence, batch_size=batch_size, min_count=min_count, show_pii=show_pii,
                   salt=salt)
    audit = _audit(model, dataset, detectors, options, name)
    result = extraction_result(model, dataset, audit, threshold=threshold, confidence=confidence, name=name)
    return check_covered(result, complete=True, covered="", rest="")
