"""``measure_mix_and_match`` and ``assert_mix_and_match_rank_at_least``: token reconstruction as a gate.

The attack is in :mod:`.mix_and_match` (mix-and-match-text-classifiers §4.3,
exhaustive baseline §5.1.4). The gate's figure is the *rank* of the canary's
true token among the attack's guesses, for the most exposed canary (the
smallest rank): a rank of 1 means the attack reconstructs it first. It must
stay at least ``min_rank``; a model that has not memorised the canary gives a
rank near chance, ``(|V| + 1) / 2``. The message adds the exposure
``log2 |V| - log2 rank`` (bits, ties counted against the secret), the
candidates Mix And Match needs against the vocabulary size (§5.1.5), and the
top-k accuracy over the canaries with its Clopper-Pearson interval and chance
``k / |V|``. To gate on the exposure instead of the rank,
``assert_exposure_below(model, canary, max_bits)`` takes the same model and
canary (:func:`..exposure.mask_canary.mask_canary_exposure`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...results import LeakResult, record, target_facts, audited
from ...stats import clopper_pearson
from ..remedies import TRANSFORMER, remedy, remedy_for
from .attack import (ATTACK_NAMES, DEFAULT_BATCH, DEFAULT_BUDGET, NO_GENERATOR, CanaryRanking,
                            MixAndMatchMeasurement, check_options, mix_and_match)
from .canaries import as_mask_canaries

#: The attacked classifier is a fine-tuned transformer (§4.1); the result carries the remedy of its family.
REMEDY = remedy("mix-and-match", TRANSFORMER)


def _check_name(name: Any) -> str | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name={name!r} must be a non-empty string or None; fix: pass a stable label such as "
                         "name='towels canary'")
    return name


def _check_top_k(top_k: Any) -> int:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k={top_k!r} must be an integer >= 1 (the k of the top-k accuracy); fix: e.g. top_k=10")
    return top_k


def _check_min_rank(min_rank: Any) -> float:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(min_rank, bool) or not isinstance(min_rank, (int, float)) or not min_rank >= 1 \
            or math.isinf(min_rank):
        raise ValueError(f"min_rank={min_rank!r} must be a finite number >= 1 (rank 1 = reconstructed first; chance "
                         "is about half the vocabulary); fix: e.g. min_rank=10")
    return float(min_rank)


def _check_confidence(confidence: Any) -> float:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r} must be a number in (0, 1) (the top-k accuracy interval's "
                         "coverage); fix: e.g. confidence=0.95")
    return float(confidence)


def _line(r: CanaryRanking) -> str:
    rank = "not among the candidates pruned" if math.isinf(r.rank) else f"rank {r.rank:g} of {r.vocabulary}"
    if r.candidates_needed is None:
        return (f"{r.canary.masked_text!r} [{r.canary.intent}] secret {r.canary.target!r}: {rank} ({r.method}); "
                f"candidates Mix And Match needed: {NO_GENERATOR}; guesses {', '.join(r.guesses)}")
    mm = "" if r.mix_and_match_rank is None else f", rank {r.mix_and_match_rank:g} after pruning them"
    other = "base" if r.generator == "frankenstein" else "frankenstein"
    return (f"{r.canary.masked_text!r} [{r.canary.intent}] secret {r.canary.target!r}: {rank} ({r.method}); "
            f"{r.generator} LM: {r.candidates_needed:g} candidates needed{mm} ({other} LM: "
            f"{r.candidates_needed_other:g}); guesses {', '.join(r.guesses)}")


def _result(model: Any, m: MixAndMatchMeasurement, threshold: float | None, top_k: int, name: str | None,
            confidence: float) -> LeakResult:
    worst = min(m.rankings, key=lambda r: (r.rank, r.canary.text))
    vocab = worst.vocabulary
    hits = m.top_k_hits(top_k)
    n = len(m.rankings)
    low, high = clopper_pearson(hits, n, confidence)
    value = float(worst.rank) if not math.isinf(worst.rank) else float(worst.rank_range[0])
    extra = {"exposure_bits": worst.exposure, "vocabulary": float(vocab),
             f"top{top_k}_accuracy": hits / n, f"top{top_k}_ci_low": low, f"top{top_k}_ci_high": high,
             f"top{top_k}_chance": min(1.0, top_k / vocab), "seconds": m.seconds}
    evidence: dict[str, Any] = {"attack": ATTACK_NAMES[worst.method],
                                "rank": "mid-rank over ties; the interval is the tie range",
                                f"top-{top_k}": f"{hits}/{n} canaries (CI {low:.3f} .. {high:.3f}, chance "
                                               f"{min(1.0, top_k / vocab):.3g})"}
    if worst.candidates_needed is None:
        evidence["candidates Mix And Match needed"] = NO_GENERATOR
    else:
        extra.update(candidates_needed=float(worst.candidates_needed), candidate_ratio=worst.candidate_ratio)
    for i, r in enumerate(m.rankings):
        evidence[f"canary {i + 1}"] = _line(r)
    label = name if name is not None else "; ".join(f"{r.canary.masked_text} -> {r.canary.target}"
                                                    for r in m.rankings)
    return LeakResult(attack="mix-and-match", metric="rank", value=value, threshold=threshold, direction="at_least",
                      interval=worst.rank_range, confidence=None, chance=(vocab + 1) / 2, ceiling=float(vocab),
                      label=label, evidence=evidence, extra=extra, remedy=remedy_for("mix-and-match", model),
                      target=target_facts(model))


def measured_mix_and_match(model: Any, canaries: Any, *, method: str, budget: int, top_k: int, name: str | None,
                           confidence: float, batch_size: int, generator: str) -> LeakResult:
    """The measured ``mix-and-match.rank`` result (``threshold=None``): from the result cache when ``model``
    has a content hash (a ``train_target`` classifier) and the same call ran before, else computed."""
    from ...cache.results import cached_results

    inputs = {"canaries": canaries, "method": method, "budget": budget, "top_k": top_k, "name": name,
              "confidence": confidence, "batch_size": batch_size, "generator": generator}

    def compute() -> list[LeakResult]:
        m = mix_and_match(model, canaries, method=method, budget=budget, batch_size=batch_size, generator=generator)
        return [_result(model, m, None, top_k, name, confidence)]

    return cached_results("mix-and-match", [model], inputs, compute)[0]


@audited
def measure_mix_and_match(model: Any, canaries: Any, *, method: str = "auto", budget: int = DEFAULT_BUDGET,
                          top_k: int = 10, name: str | None = None, confidence: float = 0.95,
                          batch_size: int = DEFAULT_BATCH, generator: str = "frankenstein") -> LeakResult:
    """Measure the rank of each canary's secret token (the smallest in ``value``) without gating; recorded.

    ``model``: a ``transformer-classifier`` target or ``mix_and_match_model(classifier, base_mlm, tokenizer)``;
    ``canaries``: one :class:`~.mix_and_match_canaries.MaskCanary` or several.
    ``method='auto'`` runs the strongest attack within ``budget`` classifier
    forwards per canary (exhaustive search when the vocabulary fits, else
    Mix And Match); ``'exhaustive'`` and ``'mix-and-match'`` force one.
    ``generator``: candidates from the ``"frankenstein"`` model (§4.3.1) or the ``"base"`` pretrained LM.
    """
    __tracebackhide__ = True   # a usage error shows at the caller's line
    top_k = _check_top_k(top_k)
    name = _check_name(name)
    confidence = _check_confidence(confidence)
    check_options(method, generator, budget, batch_size)
    as_mask_canaries(canaries)
    return record(measured_mix_and_match(model, canaries, method=method, budget=budget, top_k=top_k, name=name,
                                         confidence=confidence, batch_size=batch_size, generator=generator))


@audited
def assert_mix_and_match_rank_at_least(model: Any, canaries: Any, min_rank: float, *, method: str = "auto",
                                       budget: int = DEFAULT_BUDGET, top_k: int = 10, name: str | None = None,
                                       confidence: float = 0.95, batch_size: int = DEFAULT_BATCH,
                                       generator: str = "frankenstein") -> LeakResult:
    """Fail when an attacker ranks some canary's secret token better than ``min_rank`` (§4.3).

    Rank 1 means the secret is the attacker's first guess; guessing blindly
    gives about ``(|V| + 1) / 2``. Same arguments as :func:`measure_mix_and_match`.
    Returns the recorded result.
    """
    __tracebackhide__ = True
    from ...assertions import check

    threshold = _check_min_rank(min_rank)
    top_k = _check_top_k(top_k)
    name = _check_name(name)
    confidence = _check_confidence(confidence)
    check_options(method, generator, budget, batch_size)    # before any work, at the caller's line
    as_mask_canaries(canaries)
    measured = measured_mix_and_match(model, canaries, method=method, budget=budget, top_k=top_k, name=name,
                                      confidence=confidence, batch_size=batch_size, generator=generator)
    return check(dataclasses.replace(measured, threshold=threshold))
