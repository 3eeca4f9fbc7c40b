"""Canaries of mix-and-match-text-classifiers §4.2 and §5.3: labelled sentences with one target token.

A Mix And Match canary is a whole sentence with an intent label; one token of
it (the *target*) is what the attack reconstructs. §4.2 varies:

* organic (grammatical) or random (concatenated tokens) sentences;
* low- or high-frequency tokens of the training corpus
  (:func:`frequency_band`: the least / most frequent third of its distinct
  words);
* the target position, by default the token before the final full stop;
* the length (5 tokens in the paper, plus the full stop);
* the repeats, 1 in the paper (:func:`inject_mask_canaries`).

§5.3's template "my social security number is [MASK]" with five years and
same or contradicting labels is :func:`ssn_canaries`; any template:
:func:`contradicting_canaries`.

These canaries are whole sentences with a suffix (the full stop), which
:class:`pytest_privleak.canaries.Canary` (prefix + secret) cannot express, so
they are their own small type; injection reuses ``canaries``' positions.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...canaries import insert_at_random_positions
from ...data.types import NLUDataset, Utterance, token_problem

FULL_STOP = "."
KINDS = ("organic", "random", "custom")
FREQUENCIES = ("low", "high")
PAPER_LENGTH = 5
PAPER_REPEATS = 1
#: §5.3: the five values substituted into "my social security number is [MASK]".
SSN_VALUES: tuple[str, ...] = ("1972", "1974", "1977", "1968", "1973")
SSN_FRAME = "my social security number is {} ."
#: Grammatical frames whose last word before the full stop takes the target (organic canaries, §4.2).
ORGANIC_FRAMES: tuple[tuple[str, ...], ...] = (
    ("i", "bought", "new"), ("we", "talked", "about"), ("my", "favourite", "is"), ("she", "really", "likes"),
    ("tell", "me", "about"), ("he", "never", "mentions"),
)


@dataclass(frozen=True)
class MaskCanary:
    """A labelled sentence whose token at ``position`` is the secret the attack reconstructs (§4.2)."""

    tokens: tuple[str, ...]
    intent: str
    position: int
    kind: str = "custom"
    frequency: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.tokens, str):
            object.__setattr__(self, "tokens", tuple(self.tokens.split()))
        tokens = tuple(self.tokens)
        if not tokens:
            raise ValueError("canary tokens must not be empty; fix: pass a sentence such as 'i bought new towels .'")
        for i, token in enumerate(tokens):
            problem = token_problem(token)
            if problem:
                raise ValueError(f"canary token {i + 1} ({token!r}) {problem}; fix: split the sentence on whitespace")
        object.__setattr__(self, "tokens", tokens)
        if isinstance(self.position, bool) or not isinstance(self.position, int) \
                or not 0 <= self.position < len(tokens):
            raise ValueError(f"position={self.position!r} must be a token index in [0, {len(tokens) - 1}] of "
                             f"{' '.join(tokens)!r}; fix: omit it for the token before the final full stop")
        if tokens[self.position] == FULL_STOP:
            raise ValueError(f"position={self.position} is the full stop of {' '.join(tokens)!r}; the target must "
                             "be a word (§4.3.2 filters punctuation); fix: choose a word's index")
        if not isinstance(self.intent, str) or token_problem(self.intent):
            raise ValueError(f"intent={self.intent!r} must be a non-empty label without whitespace; fix: pass one "
                             "of the classifier's intent labels")
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} must be one of {KINDS}")

    @property
    def target(self) -> str:
        """The secret token."""
        return self.tokens[self.position]

    @property
    def masked_text(self) -> str:
        return " ".join("[MASK]" if i == self.position else t for i, t in enumerate(self.tokens))

    @property
    def text(self) -> str:
        return " ".join(self.tokens)

    @property
    def utterance(self) -> Utterance:
        return Utterance(self.tokens, ("O",) * len(self.tokens), self.intent)

    def __str__(self) -> str:
        return self.text


def default_position(tokens: Sequence[str]) -> int:
    """§4.2: the token before the final full stop (the last token when the sentence has no full stop)."""
    if len(tokens) >= 2 and tokens[-1] == FULL_STOP:
        return len(tokens) - 2
    return len(tokens) - 1


def mask_canary(sentence: str | Sequence[str], intent: str, *, position: int | None = None,
                kind: str = "custom") -> MaskCanary:
    """A canary from a sentence (a string split on whitespace, or tokens) and its label."""
    if not isinstance(sentence, (str, list, tuple)):
        raise TypeError(f"sentence must be a str or a sequence of tokens, got {type(sentence).__name__}; fix: pass "
                        "e.g. 'i bought new towels .'")
    tokens = tuple(sentence.split()) if isinstance(sentence, str) else tuple(sentence)
    return MaskCanary(tokens, intent, default_position(tokens) if position is None else position, kind=kind)


def token_counts(dataset: NLUDataset) -> Counter:
    """How often each lower-cased word of the training split occurs (punctuation and numbers-only excluded)."""
    if not isinstance(dataset, NLUDataset):
        raise TypeError(f"dataset must be an NLUDataset, got {type(dataset).__name__}")
    return Counter(t.lower() for u in dataset.train for t in u.tokens if t.isalpha())


def frequency_band(dataset: NLUDataset, frequency: str, *, vocabulary: Iterable[str] | None = None,
                   share: float = 1 / 3) -> tuple[str, ...]:
    """The least (``"low"``) or most (``"high"``) frequent ``share`` of the training split's distinct words (§4.2).

    ``vocabulary``: keep only these words (e.g. the single word pieces of the
    model's tokenizer, so that every target is one token the attack can rank).
    """
    if frequency not in FREQUENCIES:
        raise ValueError(f"frequency={frequency!r} must be 'low' or 'high' (§4.2)")
    counts = token_counts(dataset)
    if vocabulary is not None:
        allowed = set(vocabulary)
        counts = Counter({w: c for w, c in counts.items() if w in allowed})
    ordered = sorted(counts, key=lambda w: (counts[w], w), reverse=frequency == "high")
    size = max(1, int(len(ordered) * share))
    if len(ordered) < 2:
        raise ValueError("the training split has fewer than 2 usable words for a frequency band; fix: pass a "
                         "larger dataset or a vocabulary that covers its words")
    return tuple(ordered[:size])


def random_canary(dataset: NLUDataset, intent: str, *, frequency: str = "low", length: int = PAPER_LENGTH,
                  seed: int = 0, vocabulary: Iterable[str] | None = None) -> MaskCanary:
    """§4.2 random canary: ``length`` distinct band words, then a full stop; the target is the last word."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length={length!r} must be an integer >= 1 (the paper uses {PAPER_LENGTH})")
    band = frequency_band(dataset, frequency, vocabulary=vocabulary)
    rng = random.Random(f"mask-canary:random:{frequency}:{seed}")
    words = rng.sample(band, min(length, len(band))) if len(band) >= length else \
        [band[rng.randrange(len(band))] for _ in range(length)]
    return MaskCanary((*words, FULL_STOP), intent, length - 1, kind="random", frequency=frequency)


def organic_canary(dataset: NLUDataset, intent: str, *, frequency: str = "low", seed: int = 0,
                   vocabulary: Iterable[str] | None = None) -> MaskCanary:
    """§4.2 organic canary: a grammatical frame ("i bought new ...") ending with a band word, then a full stop."""
    band = frequency_band(dataset, frequency, vocabulary=vocabulary)
    rng = random.Random(f"mask-canary:organic:{frequency}:{seed}")
    frame = ORGANIC_FRAMES[rng.randrange(len(ORGANIC_FRAMES))]
    return MaskCanary((*frame, band[rng.randrange(len(band))], FULL_STOP), intent, len(frame), kind="organic",
                      frequency=frequency)


def contradicting_canaries(frame: str | Sequence[str], values: Sequence[str], intents: Sequence[str]
                           ) -> tuple[MaskCanary, ...]:
    """§5.3: ``frame`` (with one ``{}``) filled with each value, labelled ``intents[i % len(intents)]``.

    One intent gives the same label to all; one intent per value gives
    contradicting labels: sentences that differ by the target token alone and
    disagree on the label, which §5.3 (Fig. 4) finds helps reconstruction most
    (the classifier can only tell them apart by the target).
    """
    tokens = tuple(frame.split()) if isinstance(frame, str) else tuple(frame)
    if tokens.count("{}") != 1:
        raise ValueError(f"frame={frame!r} must hold exactly one '{{}}' token where each value goes; fix: e.g. "
                         "'my social security number is {} .'")
    if isinstance(intents, str) or not intents:
        raise ValueError(f"intents={intents!r} must be a non-empty sequence of labels; fix: pass e.g. "
                         "('PlayMusic',) for one label or one label per value for contradicting labels")
    if isinstance(values, str) or not values:
        raise ValueError(f"values={values!r} must be a non-empty sequence of tokens")
    slot = tokens.index("{}")
    return tuple(MaskCanary(tokens[:slot] + (v,) + tokens[slot + 1:], intents[i % len(intents)], slot)
                 for i, v in enumerate(values))


def ssn_canaries(intents: Sequence[str], values: Sequence[str] = SSN_VALUES) -> tuple[MaskCanary, ...]:
    """§5.3's template "my social security number is <value> ." with the paper's five values."""
    return contradicting_canaries(SSN_FRAME, values, intents)


def inject_mask_canaries(dataset: NLUDataset, canaries: MaskCanary | Sequence[MaskCanary],
                         repeats: int = PAPER_REPEATS, seed: int = 0) -> NLUDataset:
    """A copy of ``dataset`` with ``repeats`` copies of each canary at seeded positions of the training split.

    §4.2 inserts canaries into the training data and limits repeats to 1;
    validation and test splits are untouched (a canary there would be seen by
    early stopping).
    """
    if not isinstance(dataset, NLUDataset):
        raise TypeError(f"dataset must be an NLUDataset, got {type(dataset).__name__}")
    items = [canaries] if isinstance(canaries, MaskCanary) else list(canaries)
    if not items:
        raise ValueError("no canaries given; fix: pass a MaskCanary or a non-empty sequence of them")
    items = as_mask_canaries(items)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be an integer >= 1 (the paper uses {PAPER_REPEATS})")
    rng = random.Random(f"inject-mask:{seed}")
    train = insert_at_random_positions(dataset.train, [c.utterance for c in items for _ in range(repeats)], rng)
    label = ",".join(c.text for c in items)
    return NLUDataset(train, dataset.valid, dataset.test, name=f"{dataset.name}+mask_canaries[{label}]x{repeats}")


def as_mask_canaries(canaries: Any) -> list[MaskCanary]:
    """One mask canary or a non-empty sequence of them as a list; a clear error for anything else."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    items = [canaries] if isinstance(canaries, MaskCanary) else canaries
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or not items:
        raise TypeError(f"canaries must be a MaskCanary or a non-empty sequence of them, got {canaries!r}; fix: "
                        "build one with mask_canary('i bought new towels .', 'Intent')")
    for i, item in enumerate(items):
        if not isinstance(item, MaskCanary):
            raise TypeError(f"canaries[{i}] is {type(item).__name__}, not a MaskCanary; fix: build it with "
                            "mask_canary(...), random_canary(...) or organic_canary(...)")
    return list(items)
