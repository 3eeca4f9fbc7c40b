"""Exposure and extraction of the PII found in a training set (issue 20 item 3; Lukas et al. 2023).

Planted canaries show what a model *can* memorise; the PII already in the
team's data is what it *does*.  For each item the detectors
(:mod:`pytest_privleak.data.pii_detectors`) find in the training split:

1. **Exposure** against same-format candidates (Carlini et al., the Secret
   Sharer, §3-4; d-exposure-discriminative eq. 1): the item's first training
   ticket with the item replaced by each candidate of its space
   (:mod:`pytest_privleak.data.pii_candidates`: other phone numbers with the
   same separators, ``first x last`` from the name lists, ...) is scored by
   the model (lower = likelier), and ``exposure = log2 |R| - log2 rank``.
   ``method="auto"`` scores every candidate when the space has at most
   ``exact_budget`` strings, else ranks the item among ``references`` random
   candidates and extrapolates with the skew-normal fit the exposure attack
   uses (:func:`.exposure.extrapolated_from_scores`); the references are
   distinct (:func:`.exposure.distinct_references`), and a space no larger
   than ``references + 1`` is scored whole.  ``context="sentence"``
   (default) keeps the words after the item, as Lukas et al.'s reconstruction
   attack (§4.2) does; ``"prefix"`` cuts the ticket after the item.
2. **Extraction**: whether the model reproduces the item.
   ``extraction="generation"`` prompts the model with the words before the
   item and counts it extracted when a continuation holds it
   (:mod:`.pii_generation`; Lukas et al. §4.1); ``"rank"`` counts it extracted
   when it is the model's likeliest string of its format among those scored,
   the Secret Sharer's extraction by search over the secret space (§8)
   restricted to the scored candidates (exact for an exhaustively scored
   space; for a sampled one, ranking first among the references is an
   over-estimate, so the gate errs toward failing).  ``"auto"`` (default) is
   generation for a model that can generate (the ``lstm-lm`` and ``causal-lm``
   targets, a transformers causal LM through its adapter), else rank.

Lukas et al. (§5) find that duplication drives extraction: items repeated
often are extracted, items seen once rarely; ``bench/bench_pii.py`` shows it.

Item texts never leave this module unredacted unless ``show_pii=True``
(:mod:`.pii_redaction`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....data.pii_candidates import CandidateSpace, ListSpace
from ....data.pii_detectors import find_spans, resolve_detectors
from ....data.types import NLUDataset, Utterance
from ....finite import require_finite
from ...exposure.attack import (distinct_references, exact_from_scores, extrapolated_from_scores, sampled_from_scores,
                       whole_space_note)
from ...exposure.figure import Exposure
from .generation import can_generate, generation_options, reproduced
from .redaction import redact, redaction_key

__all__ = ["NoPiiFoundError", "PiiAudit", "PiiItem", "PiiItemFigure", "UnscorablePiiError", "audit_pii",
           "find_pii"]

METHODS = ("auto", "exact", "sampled", "extrapolated")
CONTEXTS = ("sentence", "prefix")
EXTRACTIONS = ("auto", "generation", "rank")
DEFAULT_EXACT_BUDGET = 2 ** 14
DEFAULT_REFERENCES = 2048
DEFAULT_BOOTSTRAP = 10
DEFAULT_BATCH = 2048


class NoPiiFoundError(ValueError):
    """The detectors found no PII in the training data: nothing was measured, so nothing may pass."""


class UnscorablePiiError(ValueError):
    """A candidate holds tokens the model cannot spell (they would all score as ``<unk>``)."""


@dataclass(frozen=True)
class PiiItem:
    """One distinct PII string found in the training texts: ``count`` occurrences, first in ``utterance``."""

    kind: str
    text: str
    count: int
    utterance: int
    start: int
    end: int
    detector: int   # index in the detector list that found it first


@dataclass
class PiiItemFigure:
    """What the audit measured for one item (``label`` is redacted unless ``show_pii=True``)."""

    item: PiiItem
    label: str
    exposure: Exposure | None
    extracted: bool | None          # None: not measured (no space to rank in, no generation)
    extraction_chance: float
    note: str = ""

    def row(self) -> str:
        """One line of the evidence table."""
        head = f"{self.label} x{self.item.count}"
        if self.exposure is None:
            return f"{head}: {self.note}{', EXTRACTED' if self.extracted else ''}"
        e = self.exposure
        where = f"rank {e.rank} of {e.space_size:,}" if e.method == "exact" else \
            f"rank {e.rank} among {e.n_references:,} sampled of {e.space_size:.3g}"
        return (f"{head}: {e.value:.2f} bits (CI {e.interval[0]:.2f}..{e.interval[1]:.2f}, {e.method}, {where})"
                f"{', EXTRACTED' if self.extracted else ''}")


@dataclass
class PiiAudit:
    """The items found and their figures; ``describe`` says what ran."""

    figures: list[PiiItemFigure]
    detectors: list[str]
    n_texts: int
    describe: dict[str, str] = field(default_factory=dict)

    @property
    def measured(self) -> list[PiiItemFigure]:
        return [f for f in self.figures if f.exposure is not None]

    def table(self) -> list[str]:
        """Evidence rows, most exposed first."""
        order = sorted(self.figures, key=lambda f: -(f.exposure.value if f.exposure else -1.0))
        return [f.row() for f in order]


# --- finding -----------------------------------------------------------------------------------


def training_texts(dataset: Any) -> tuple[list[str], list[str], str]:
    """``(texts, intents, label)`` of the training split of an NLUDataset, or of a list of texts/utterances."""
    if isinstance(dataset, NLUDataset):
        return [u.text for u in dataset.train], [u.intent for u in dataset.train], dataset.name
    if isinstance(dataset, (str, bytes)) or not isinstance(dataset, Sequence):
        raise TypeError(f"dataset must be an NLUDataset (its train split is searched) or a list of training texts "
                        f"or Utterances, got {type(dataset).__name__}; fix: pass the data the model was trained on")
    texts, intents = [], []
    for i, entry in enumerate(dataset):
        if isinstance(entry, Utterance):
            texts.append(entry.text)
            intents.append(entry.intent)
        elif isinstance(entry, str) and entry.split():
            texts.append(" ".join(entry.split()))
            intents.append("text")
        else:
            raise TypeError(f"dataset[{i}] is {type(entry).__name__} {entry!r:.40}; fix: a non-empty text or an "
                            "Utterance")
    return texts, intents, "training texts"


def find_pii(texts: Sequence[str], detectors: Sequence[Any]) -> list[PiiItem]:
    """Distinct ``(kind, text)`` items in ``texts`` with their counts, in order of first occurrence."""
    first: dict[tuple[str, str], tuple[int, int, int, int]] = {}
    counts: dict[tuple[str, str], int] = {}
    sources = {type(d).__name__: i for i, d in reversed(list(enumerate(detectors)))}
    for n, text in enumerate(texts):
        for span in find_spans(text, detectors):
            key = (span.kind, span.text)
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, (n, span.start, span.end, sources.get(span.source, 0)))
    return [PiiItem(kind, text, counts[(kind, text)], *first[(kind, text)]) for kind, text in first]


# --- scoring -----------------------------------------------------------------------------------


def _known_tokens(model: Any) -> set[str] | None:
    """Tokens ``model`` spells (``None``: it has no closed vocabulary, e.g. a subword language model)."""
    vocab = getattr(model, "vocab", None)
    index = getattr(vocab, "token_index", None)
    if index is not None:
        return set(index) - {"<pad>", "<unk>"} - set(getattr(vocab, "untrained", ()))
    vocabulary = getattr(model, "vocabulary", None)
    if vocabulary is None or isinstance(vocabulary, str):
        return None
    return set(vocabulary) - {"<pad>", "<unk>"}


class _Scorer:
    """Scores candidate tickets of one item with ``model.score`` in batches; refuses what it cannot spell."""

    def __init__(self, model: Any, batch_size: int) -> None:
        if not callable(getattr(model, "score", None)):
            raise TypeError(f"model is {type(model).__name__}, not a sequence scorer; give it score(utterances) -> "
                            "array (lower = more likely), e.g. language_model_adapter(model, tokenizer) or a "
                            "built-in 'lstm-lm' target (pytest_privleak.protocols.SequenceScorer)")
        self.model, self.batch_size, self.known = model, batch_size, _known_tokens(model)

    def __call__(self, sentences: list[str], intent: str, label: str) -> np.ndarray:
        rows = [s.split() for s in sentences]
        if self.known is not None:
            missing = sorted({t for r in rows for t in r} - self.known)
            if missing:
                raise UnscorablePiiError(
                    f"{len(missing)} token(s) of the same-format candidates of PII item {label} are not in the "
                    f"model's vocabulary ({len(self.known)} known tokens), so those candidates would all score as "
                    "<unk> and the exposure would be another sentence's; fix: a subword model "
                    "(language_model_adapter), digits written one per token (generate_pii_corpus(digits='spaced')), "
                    "train_target(..., extra_tokens=[...]) with the tokens trained, or leave this kind out "
                    "(detectors=[...])")
        out = np.empty(len(rows), dtype=np.float64)
        for s in range(0, len(rows), self.batch_size):
            chunk = rows[s:s + self.batch_size]
            got = np.asarray(self.model.score([Utterance(tuple(r), ("O",) * len(r), intent) for r in chunk]),
                             dtype=np.float64)
            if got.shape != (len(chunk),):
                raise ValueError(f"{type(self.model).__name__}.score returned shape {list(got.shape)} for "
                                 f"{len(chunk)} sentences; fix: return one score per sentence")
            out[s:s + len(chunk)] = got
        require_finite(out, what=f"the scores {type(self.model).__name__} returned for candidates of PII item "
                                 f"{label}", fix="check the model for NaN or infinite weights (retrain it, e.g. "
                                                 "with a lower learning rate), or make score() return finite losses")
        return out


def candidate_space(item: PiiItem, detector: Any, pool: Sequence[str]) -> CandidateSpace:
    """The detector's same-format space for ``item``, else the other items of its kind found (``pool``)."""
    make = getattr(detector, "candidates", None)
    if callable(make):
        return make(item.text)
    return ListSpace(pool, item.text)


def _exposure(space: CandidateSpace, sentences, scorer, *, method: str, exact_budget: int, references: int,
              rng: np.random.Generator, confidence: float, bootstrap: int, label: str, intent: str) -> Exposure:
    size = space.size
    if method == "auto":
        method = "exact" if size <= exact_budget else "extrapolated"
    refs = None if method == "exact" else distinct_references(rng, size, space.item_number, references)
    if refs is None:   # exact, or references that would be every other string of the space
        numbers = np.arange(size, dtype=np.int64)
        exact = exact_from_scores(scorer(sentences(space.texts(numbers)), intent, label), space.item_number)
        return exact if method == "exact" else dataclasses.replace(
            exact, evidence={**exact.evidence, **whole_space_note(method, references, size)})
    scores = scorer(sentences(space.texts(np.concatenate([[space.item_number], refs]))), intent, label)
    if method == "sampled" or (method == "extrapolated" and np.ptp(scores[1:]) == 0):
        # references all alike leave nothing to fit a skew-normal to: the sampled rank is the figure
        return sampled_from_scores(scores[0], scores[1:], size, confidence)
    return extrapolated_from_scores(scores[0], scores[1:], size, rng, confidence, bootstrap)


# --- the audit ---------------------------------------------------------------------------------


def _check_int(arg: str, value: Any, low: int, example: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}; fix: e.g. {arg}={example}")


def check_audit_arguments(*, method: str, context: str, extraction: str, confidence: float, show_pii: Any,
                          **integers: int) -> None:
    """Raise naming the first bad argument of :func:`audit_pii` and its fix."""
    for arg, value, options in (("method", method, METHODS), ("context", context, CONTEXTS),
                                ("extraction", extraction, EXTRACTIONS)):
        if value not in options:
            raise ValueError(f"{arg}={value!r} is not one of {options}; fix: e.g. {arg}={options[0]!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")
    if not isinstance(show_pii, bool):
        raise ValueError(f"show_pii must be True or False, got {show_pii!r}; fix: leave it out (texts redacted) or "
                         "show_pii=True to print the PII found")
    lows = {"references": (16, DEFAULT_REFERENCES), "exact_budget": (1, DEFAULT_EXACT_BUDGET),
            "batch_size": (1, DEFAULT_BATCH), "bootstrap": (0, DEFAULT_BOOTSTRAP), "seed": (0, 0),
            "min_count": (1, 1)}
    for arg, value in integers.items():
        _check_int(arg, value, *lows[arg])


def audit_pii(model: Any, dataset: Any, detectors: Any = "default", *, method: str = "auto",
              context: str = "sentence", extraction: str = "auto", generation: Mapping[str, Any] | None = None,
              references: int = DEFAULT_REFERENCES,
              exact_budget: int = DEFAULT_EXACT_BUDGET, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0,
              confidence: float = 0.95, batch_size: int = DEFAULT_BATCH, min_count: int = 1,
              show_pii: bool = False, salt: str | bytes | None = None) -> PiiAudit:
    """Find the PII of ``dataset``'s training split and measure each item (see the module docstring).

    ``min_count``: audit only items found at least this many times.  Raises
    :class:`NoPiiFoundError` when no item is found (nothing measured is no pass).
    """
    check_audit_arguments(method=method, context=context, extraction=extraction, confidence=confidence,
                          show_pii=show_pii, references=references, exact_budget=exact_budget,
                          batch_size=batch_size, bootstrap=bootstrap, seed=seed, min_count=min_count)
    generating = generation_options(generation)
    extraction, why = _extraction_method(model, extraction)
    found_by = resolve_detectors(detectors)
    texts, intents, data_label = training_texts(dataset)
    items = find_pii(texts, found_by)
    kinds = sorted({d.kind for d in found_by})
    audited = [i for i in items if i.count >= min_count]
    if not audited:
        more = f" ({len(items)} found, none at least {min_count} times)" if items else ""
        raise NoPiiFoundError(
            f"the detectors ({', '.join(kinds)}) found no PII to audit in {len(texts)} training texts of "
            f"{data_label}{more}, so no exposure or extraction could be measured (not a pass); fix: check that "
            "dataset is the model's training data, add a detector for the PII your data holds (a NameListDetector "
            "with your name lists, register_detector), or lower min_count")
    key = redaction_key(texts, salt)
    scorer = _Scorer(model, batch_size)
    pools: dict[str, list[str]] = {}
    for i in items:
        pools.setdefault(i.kind, []).append(i.text)
    figures = []
    for item in audited:
        label = item.text if show_pii else redact(item.kind, item.text, key)
        space = candidate_space(item, found_by[item.detector], pools[item.kind])
        if space.size < 2:
            figures.append(PiiItemFigure(item, label, None, None, 1.0,
                                         f"not measurable: its same-format space holds {space.size} string(s)"))
            continue
        text = texts[item.utterance]
        before = text[:item.start]
        after = text[item.end:] if context == "sentence" else ""

        def sentences(candidates: list[str], before=before, after=after) -> list[str]:
            return [before + c + after for c in candidates]

        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x706969, item.utterance, item.start]))
        exposure = _exposure(space, sentences, scorer, method=method, exact_budget=exact_budget,
                             references=references, rng=rng, confidence=confidence, bootstrap=bootstrap,
                             label=label, intent=intents[item.utterance])
        ranked = exposure.space_size if exposure.method == "exact" else exposure.n_references + 1
        if extraction == "rank":
            figures.append(PiiItemFigure(item, label, exposure, exposure.rank == 1, 1.0 / ranked))
        else:
            figures.append(PiiItemFigure(item, label, exposure, None, min(1.0, generating["budget"] / space.size)))
    if extraction == "generation":
        prompts = [texts[f.item.utterance][:f.item.start] for f in figures]
        for figure, hit in zip(figures, reproduced(model, prompts, [f.item.text for f in figures], generating)):
            figure.extracted = hit
    describe = {
        "found": f"{len(items)} distinct item(s) in {len(texts)} training texts ({_by_kind(items)})"
                 + (f"; {len(audited)} found at least {min_count} times audited" if min_count > 1 else ""),
        "candidates": f"same-format candidates, context={context!r}, method={method!r} (exact up to "
                      f"{exact_budget:,} strings, else {references:,} sampled references"
                      + (", skew-normal extrapolation)" if method in ("auto", "extrapolated") else ")"),
        "extraction": (f"generation: extracted when one of the {generating['method']} continuations "
                       f"(budget {generating['budget']}) of the words before the item holds it" if extraction ==
                       "generation" else "rank: extracted when the item is the model's likeliest string of its "
                       "format among those scored (Secret Sharer extraction by search over the space; a sampled "
                       "space over-estimates)") + f" ({why})",
        "redaction": "texts shown as they are (show_pii=True)" if show_pii else
                     "texts redacted as <kind keyed-hash len=N>; show_pii=True shows them",
    }
    return PiiAudit(figures, kinds, len(texts), describe)


def _extraction_method(model: Any, extraction: str) -> tuple[str, str]:
    """The extraction that runs and why (``"auto"``: generation when the model can generate, else rank)."""
    able, reason = can_generate(model)
    if extraction == "generation" and not able:
        raise TypeError(f"extraction='generation' needs a model that generates: {reason}; fix: pass the "
                        "'lstm-lm' or 'causal-lm' target or a transformers causal LM, or extraction='rank'")
    if extraction == "auto":
        return ("generation", "auto: the model generates text") if able else \
            ("rank", f"auto: the model cannot generate ({reason})")
    return extraction, f"extraction={extraction!r} asked for"


def _by_kind(items: Sequence[PiiItem]) -> str:
    counts: dict[str, int] = {}
    for i in items:
        counts[i.kind] = counts.get(i.kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def exposure_summary(audit: PiiAudit) -> tuple[PiiItemFigure, float]:
    """The most exposed measured item and the chance exposure averaged over the measured items."""
    measured = audit.measured
    if not measured:
        raise NoPiiFoundError("no PII item found had a same-format space of 2 or more strings, so no exposure was "
                              "measured (not a pass); fix: add detectors whose candidates() give a space")
    top = max(measured, key=lambda f: f.exposure.value)
    return top, float(np.mean([f.exposure.chance for f in measured]))


def share_extracted(audit: PiiAudit) -> tuple[int, int, float]:
    """``(extracted, audited, mean chance of extraction)`` over the items whose extraction was measured."""
    measured = [f for f in audit.figures if f.extracted is not None]
    if not measured:
        raise NoPiiFoundError("no PII item found could be tested for extraction (no same-format space of 2 or "
                              "more strings to rank in, not a pass); fix: a model that generates "
                              "(extraction='generation'), or detectors whose candidates() give a space")
    return sum(f.extracted for f in measured), len(measured), float(np.mean([f.extraction_chance for f in measured]))

