"""Targeted extraction by generation: does the model say a canary's secret when given its prefix?

The Secret Sharer (Carlini et al. 2019) asks a generative model to complete
a canary's known prefix (``"my pin code is"``) and counts the canary as
extracted when the secret comes out.  Four ways to ask, all from the prefix:

- ``"shortest-path"``: the Secret Sharer's search over the format's slots
  (:mod:`.extraction_search`), whose ``samples`` guesses are the model's
  ``samples`` most likely secrets, exactly, in order;
- ``"beam"``: beam search with ``beams`` beams over the model's whole vocabulary;
- ``"sampling"``: ``samples`` continuations drawn with top-k (``top_k``, 40
  as in Carlini et al. 2021 §4) and nucleus (``top_p``) filtering;
- ``"greedy"``: the single most likely next token at each step.

``"auto"`` runs the shortest-path search: every canary has a format (its V0
and length), so its secret space is enumerable slot by slot, and no other
method turns the same number of guesses into the model's most likely secrets.

A generation's guess is its first ``n`` words (the secret's length); the
canary is extracted when its secret is among the distinct guesses, and its
rank is its 1-based position among them (search and beam order; sampling:
most frequent first, ties by first draw).  The figure is the fraction of
canaries extracted; the chance rate is what a uniform guesser with the same
number of distinct guesses gets, ``min(g, |V0|^n) / |V0|^n`` per canary.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...adapters.generation import DEFAULT_TOP_K, check_sampling, check_seed, generate, generator_for
from ...canaries import Canary, CanarySet, as_canary_list
from ..redaction import shown_secret, shown_text
from .search import DEFAULT_MAX_EXPANSIONS, DEFAULT_SEARCH_BATCH, shortest_path_search

METHODS = ("auto", "shortest-path", "beam", "sampling", "greedy")
#: Guesses per canary unless told otherwise: the chance rate of a 4-digit pin is then 1e-3.
DEFAULT_SAMPLES = 10
DEFAULT_BEAMS = 5


@dataclass
class CanaryExtraction:
    """What generation from one canary's prefix produced."""

    canary: str
    secret: str
    guesses: list[str]            # distinct guesses, best first
    rank: int | None              # 1-based rank of the secret among ``guesses``; None when absent
    budget: int                   # distinct guesses the method may make (the chance rate's g)
    space_size: int
    cut_short: bool = False       # the search's expansion budget ran out first
    expansions: int = 0

    @property
    def extracted(self) -> bool:
        return self.rank is not None

    @property
    def chance(self) -> float:
        return min(self.budget, self.space_size) / self.space_size


@dataclass
class ExtractionMeasurement:
    method: str
    why: str
    canaries: list[CanaryExtraction] = field(default_factory=list)

    @property
    def extracted(self) -> int:
        return sum(c.extracted for c in self.canaries)

    @property
    def chance(self) -> float:
        return sum(c.chance for c in self.canaries) / len(self.canaries)


def _positive(name: str, value: Any, example: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}; fix: e.g. {name}={example} "
                         "(a budget of 0 generates nothing, so it would pass every model)")
    return value


def check_arguments(method: str, samples: Any, beams: Any, top_k: Any, top_p: Any, max_expansions: Any,
                    batch_size: Any, seed: Any) -> None:
    """Raise naming the first bad argument of :func:`extract_by_generation` and its fix."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {METHODS}; fix: e.g. method='auto'")
    _positive("samples", samples, DEFAULT_SAMPLES)
    _positive("beams", beams, DEFAULT_BEAMS)
    _positive("max_expansions", max_expansions, DEFAULT_MAX_EXPANSIONS)
    _positive("batch_size", batch_size, DEFAULT_SEARCH_BATCH)
    check_sampling(top_k, top_p)
    check_seed(seed)


def _ranked(guesses: Sequence[tuple[str, ...]], by_frequency: bool) -> list[tuple[str, ...]]:
    if by_frequency:
        counts = Counter(guesses)
        first = {g: i for i, g in reversed(list(enumerate(guesses)))}
        return sorted(counts, key=lambda g: (-counts[g], first[g]))
    return list(dict.fromkeys(guesses))


def _outcome(canary: Canary, ranked: list[tuple[str, ...]], budget: int, **search: Any) -> CanaryExtraction:
    rank = ranked.index(canary.secret) + 1 if canary.secret in ranked else None
    # texts as messages show them: a secret from the team's data and every guess of it redacted
    return CanaryExtraction(shown_text(canary), shown_secret(canary), [shown_secret(canary, g) for g in ranked], rank,
                            budget, canary.pattern.space_size, **search)


def why_auto() -> str:
    return ("method='auto' ran the Secret Sharer's shortest-path search: every canary's secret space is its "
            "format's V0^n, enumerable slot by slot, and the search's guesses are the model's most likely "
            "secrets in order, where sampling, beam or greedy decoding spend the same budget on likely "
            "continuations of any form")


def extract_by_generation(model: Any, canaries: Canary | Sequence[Canary], *, tokenizer: Any = None,
                          method: str = "auto", samples: int = DEFAULT_SAMPLES, top_k: int | None = DEFAULT_TOP_K,
                          top_p: float | None = None, beams: int = DEFAULT_BEAMS,
                          max_expansions: int = DEFAULT_MAX_EXPANSIONS, batch_size: int = DEFAULT_SEARCH_BATCH,
                          seed: int = 0) -> ExtractionMeasurement:
    """Generate from each canary's prefix with ``method`` and find its secret among the guesses.

    ``model``: the ``lstm-lm`` (or ``causal-lm``) target, a transformers causal LM with ``tokenizer=``,
    or a :class:`~pytest_privleak.adapters.generation.TokenGenerator`. ``samples``: guesses per canary
    (shortest-path: the most likely secrets it lists; sampling: draws). A prefix or V0 word the model
    cannot spell raises ``OutOfVocabularyError``; NaN logits raise ``NonFiniteError``.
    """
    check_arguments(method, samples, beams, top_k, top_p, max_expansions, batch_size, seed)
    items = as_canary_list(canaries)
    # a canary set's other members are training data, not guesses: each member is looked for among the
    # guesses that are not members, and the search lists m - 1 more so that `samples` of those remain
    members = {c.secret for c in items} if isinstance(canaries, CanarySet) else set()
    generator = generator_for(model, tokenizer)
    chosen, why = method, f"method={method!r} was asked for"
    if method == "auto":
        chosen, why = "shortest-path", why_auto()
    prefixes = [generator.encode_prefix(c.pattern.prefix) for c in items]
    pieces = [generator.encode_words(c.pattern.vocabulary) for c in items]
    out = ExtractionMeasurement(chosen, why)
    if chosen == "shortest-path":
        searched: dict[tuple, Any] = {}   # canaries of one pattern share their search
        for c, prefix, words in zip(items, prefixes, pieces):
            key = (tuple(prefix), tuple(map(tuple, words)), c.pattern.length)
            if key not in searched:
                searched[key] = shortest_path_search(generator, prefix, words, c.pattern.length,
                                                     guesses=samples + max(len(members) - 1, 0),
                                                     max_expansions=max_expansions, batch=batch_size)
            found = searched[key]
            ranked = _without_others([tuple(c.pattern.vocabulary[w] for w in s) for s in found.secrets], c,
                                     members)[:samples]
            out.canaries.append(_outcome(c, ranked, samples, cut_short=found.cut_short,
                                         expansions=found.expansions))
        return out
    budget = {"greedy": 1, "beam": beams, "sampling": samples}[chosen]
    max_tokens = max(c.pattern.length * max(len(p) for p in words) for c, words in zip(items, pieces))
    generated = generate(generator, prefixes, method=chosen, budget=budget, max_tokens=max_tokens, seed=seed,
                         top_k=top_k, top_p=top_p)
    for c, rows in zip(items, generated):
        guesses = [tuple(generator.decode(ids)[:c.pattern.length]) for ids in rows]
        ranked = _without_others(_ranked(guesses, by_frequency=chosen == "sampling"), c, members)
        out.canaries.append(_outcome(c, ranked, budget))
    return out


def _without_others(ranked: list[tuple[str, ...]], canary: Canary, members: set) -> list[tuple[str, ...]]:
    """``ranked`` without the other members of ``canary``'s set (none when it is not in a set)."""
    return [g for g in ranked if g == canary.secret or g not in members]
