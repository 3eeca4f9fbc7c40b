"""``measure_extraction`` and ``assert_extraction_at_most``: targeted extraction by generation as a figure and a gate.

The figure (:mod:`.extraction`, the Secret Sharer, Carlini et al. 2019) is the
fraction of canaries whose secret the model generates from the canary's
prefix within the guess budget, with its Clopper-Pearson interval and the
rate a uniform guesser with the same budget reaches.  The default method is
the shortest-path search; the others stay available by name.  A pass that did
not cover what the default covers is inconclusive (:mod:`.inconclusive`): the
search stopped by ``max_expansions`` before listing its guesses, or a weaker
method (sampling, beam, greedy) where the default searches the most likely
secrets exactly.

A target from ``train_target`` measured the same way before is not attacked
again: the result comes from the result cache (:mod:`pytest_privleak.cache.results`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...cache.results import cached_results
from ...canaries import Canary, CanarySet
from ...results import LeakResult, audited, record, target_facts
from ...stats import clopper_pearson
from .attack import DEFAULT_BEAMS, DEFAULT_SAMPLES, DEFAULT_TOP_K, ExtractionMeasurement, extract_by_generation
from .search import DEFAULT_MAX_EXPANSIONS, DEFAULT_SEARCH_BATCH
from ..inconclusive import check_allow_inconclusive, check_covered
from ..redaction import redaction_note, redaction_tag, shown_text
from ...canaries import as_canary_list
from ..over_canaries import CANARIES_KEY, one_canary_note, over_set

REMEDY = ("the model completes the canary's prefix with its secret: keep such secrets out of the training data "
          "(scrub or mask them, de-duplicate repeated records: repetition drives memorisation), train fewer epochs "
          "with early stopping on a validation split, or train with differential privacy (DP-SGD)")


def _check_name(name: Any) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; fix: a stable label such as "
                         "name='pin said 100 times', the result's key in the report and the baseline")


def _check_rate(max_rate: Any) -> float:
    if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)) or not 0.0 <= max_rate <= 1.0:
        raise ValueError(f"max_rate must be a number in [0, 1] (the fraction of canaries extracted), got "
                         f"{max_rate!r}; fix: e.g. max_rate=0.0 (no canary may be extracted)")
    return float(max_rate)


def _check_confidence(confidence: Any) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")
    return float(confidence)


def _line(c) -> str:
    head = f"rank {c.rank} of {len(c.guesses)} distinct guesses" if c.extracted else \
        f"not among {len(c.guesses)} distinct guesses"
    best = f"; best guess {c.guesses[0]!r}" if c.guesses else ""
    search = f"; {c.expansions} partial secrets expanded" + (" (cut short by max_expansions)" if c.cut_short else "") \
        if c.expansions else ""
    return f"secret {c.secret!r}: {head}{best}{search}"


def extraction_result(model: Any, canaries: Any, m: ExtractionMeasurement, *, confidence: float,
                      name: str | None) -> LeakResult:
    n, k = len(m.canaries), m.extracted
    evidence: dict[str, Any] = {"method": m.method, "why": m.why}
    for i, c in enumerate(m.canaries):
        evidence["canary" if n == 1 else f"canary {i + 1}"] = f"{c.canary!r}: {_line(c)}"
    evidence.update(redaction_note(as_canary_list(canaries)))
    if n == 1 and k == 0:
        low, high = clopper_pearson(0, 1, confidence)
        evidence["what a pass shows"] = (f"one canary, not extracted: the rate's {confidence:.0%} interval is "
                                         f"{low:.3g} .. {high:.3g}, so a pass rests on this one secret and bounds the "
                                         "rate of others hardly at all; give several canaries (one list) to bound it")
    budgets = sorted({c.budget for c in m.canaries})
    evidence["budget"] = f"{', '.join(map(str, budgets))} distinct guess(es) per canary over spaces of " \
                         f"{', '.join(f'{s:,}' for s in sorted({c.space_size for c in m.canaries}))} secrets"
    ranks = [c.rank for c in m.canaries if c.rank is not None]
    extra = {"extracted": float(k), "canaries": float(n)}
    if ranks:
        extra["best_rank"] = float(min(ranks))
    label = name if name is not None else (m.canaries[0].canary if n == 1 else
                                           f"{n} canaries: {m.canaries[0].canary!r}, ...")
    short = [c for c in m.canaries if c.cut_short and not c.extracted]
    facts = {"extraction": m.method, "cut_short": [[c.canary, c.expansions, len(c.guesses)] for c in short]}
    if isinstance(canaries, CanarySet):
        label, facts["canary_set"] = (canaries.label if name is None else name), canaries.fingerprint()
    elif isinstance(canaries, Canary):
        evidence[CANARIES_KEY] = one_canary_note(shown_text(canaries))
    result = LeakResult(attack="extraction", metric="extraction_rate", value=k / n, threshold=None,
                        direction="at_most", interval=clopper_pearson(k, n, confidence), confidence=confidence,
                        chance=m.chance, ceiling=1.0, label=label, evidence=evidence, extra=extra, remedy=REMEDY,
                        target={**target_facts(model), **facts})
    if not isinstance(canaries, CanarySet):
        return result
    listed = ", ".join(f"{c.canary!r}: {'extracted' if c.extracted else 'not extracted'}" for c in m.canaries)
    return over_set(result, canaries, [float(c.extracted) for c in m.canaries], per_canary=listed, rate=True)


def _measured(model, canaries, *, name, confidence, **options) -> LeakResult:
    """The measured result: from the result cache when ``model`` has a content hash and the call ran before."""
    _check_name(name)
    confidence = _check_confidence(confidence)

    def compute() -> list[LeakResult]:
        m = extract_by_generation(model, canaries, **options)
        return [extraction_result(model, canaries, m, confidence=confidence, name=name)]

    inputs = {"canaries": canaries, "name": name, "confidence": confidence,
              "secrets": redaction_tag(as_canary_list(canaries)),
              **{k: v for k, v in options.items() if k != "tokenizer"}}
    models = [model] if options.get("tokenizer") is None else [model, options["tokenizer"]]
    return cached_results("extraction", models, inputs, compute)[0]


@audited(resolved=("method",))
def measure_extraction(model: Any, canaries: Any, *, tokenizer: Any = None, method: str = "auto",
                       samples: int = DEFAULT_SAMPLES, top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None,
                       beams: int = DEFAULT_BEAMS, max_expansions: int = DEFAULT_MAX_EXPANSIONS,
                       batch_size: int = DEFAULT_SEARCH_BATCH, seed: int = 0, confidence: float = 0.95,
                       name: str | None = None) -> LeakResult:
    """Measure the fraction of ``canaries`` whose secret ``model`` generates from their prefix; recorded.

    Same arguments as :func:`assert_extraction_at_most` without the limit. Returns the
    ``extraction.extraction_rate`` :class:`LeakResult` (``threshold=None``).
    """
    result = _measured(model, canaries, name=name, confidence=confidence, tokenizer=tokenizer, method=method,
                          samples=samples, top_k=top_k, top_p=top_p, beams=beams, max_expansions=max_expansions,
                          batch_size=batch_size, seed=seed)
    return record(result)


def coverage(result: LeakResult, samples: int) -> tuple[bool, str, str]:
    """``(complete, what was covered, what covers the rest)`` of an extraction result (issue 23 item 4)."""
    short = result.target.get("cut_short") or []
    if short:
        text, expansions, listed = short[0]
        return (False, f"the shortest-path search for {text!r} stopped after {expansions:,} expanded partial "
                       f"secrets with {listed} of its {samples} guesses listed",
                f"raise max_expansions (now {expansions:,}) so the search lists all {samples} guesses")
    method = result.target.get("extraction")
    if method != "shortest-path":
        return (False, f"method={method!r} spent the budget on likely continuations, where the default "
                       f"(method='auto') lists each canary's {samples} most likely secrets exactly",
                "method='auto' (the shortest-path search)")
    return True, "", ""


@audited(resolved=("method",))
def assert_extraction_at_most(model: Any, canaries: Any, max_rate: float, *, tokenizer: Any = None,
                              method: str = "auto", samples: int = DEFAULT_SAMPLES,
                              top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None,
                              beams: int = DEFAULT_BEAMS, max_expansions: int = DEFAULT_MAX_EXPANSIONS,
                              batch_size: int = DEFAULT_SEARCH_BATCH, seed: int = 0, confidence: float = 0.95,
                              name: str | None = None, tolerance: float | None = None,
                              allow_inconclusive: bool = False) -> LeakResult:
    """Fail when more than ``max_rate`` of ``canaries`` are extracted by generation from their prefix.

    ``model``: the ``lstm-lm`` or ``causal-lm`` target, a transformers causal LM with ``tokenizer=``, any
    wrapper holding both as ``.model`` and ``.tokenizer`` without ``tokenizer=`` (the causal-LM adapter
    ``from_transformers(model, tokenizer)``, e.g. the ``wrap`` of an own model from ``train_own_model``), or a
    :class:`~pytest_privleak.adapters.generation.TokenGenerator`. ``method``: ``"auto"`` (the Secret Sharer's
    shortest-path search over the canary's format: its ``samples`` guesses are the model's most likely
    secrets), ``"shortest-path"``, ``"beam"`` (``beams`` beams), ``"sampling"`` (``samples`` draws, top-k
    ``top_k``, nucleus ``top_p``, seeded by ``seed``) or ``"greedy"``. The figure is the fraction extracted
    with its Clopper-Pearson interval at ``confidence``; the chance rate is a uniform guesser's with the same
    budget. A pass by a search cut short by ``max_expansions``, or by a method weaker than the default, is
    inconclusive (``InconclusiveAuditError``) unless ``allow_inconclusive=True``. A prefix the model cannot
    spell raises ``OutOfVocabularyError``; NaN logits ``NonFiniteError``; ``samples=0`` ``ValueError``.
    ``tolerance``: how far the rate may grow against a stored baseline. Returns the recorded result.
    """
    __tracebackhide__ = True
    threshold = _check_rate(max_rate)
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 <= tolerance < math.inf):
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}; fix: e.g. tolerance=0.1")
    allow = check_allow_inconclusive(allow_inconclusive)
    result = _measured(model, canaries, name=name, confidence=confidence, tokenizer=tokenizer, method=method,
                          samples=samples, top_k=top_k, top_p=top_p, beams=beams, max_expansions=max_expansions,
                          batch_size=batch_size, seed=seed)
    complete, covered, rest = coverage(result, samples)
    return check_covered(dataclasses.replace(result, threshold=threshold, tolerance=tolerance),
                         complete=complete, covered=covered, rest=rest, allow_inconclusive=allow)
