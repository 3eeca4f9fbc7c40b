"""Dataset types for joint intent detection and slot filling (canary-extraction-nlu §4.1).

An :class:`Utterance` is whitespace tokens, one BIO slot tag per token and one
intent.  An :class:`NLUDataset` holds the train/valid/test splits; it is
immutable and hashable, and :meth:`NLUDataset.content_hash` keys the cache of
trained targets.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from .bio import validate_bio
from .textfile import describe_char

SPLITS = ("train", "valid", "test")
#: Characters no token may hold: whitespace (``str.split`` would cut there), control characters
#: (NUL, the C0/C1 line breaks) and the byte-order mark.
_NOT_IN_TOKEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ufeff]")


def token_problem(token: object) -> str | None:
    """Why ``token`` cannot be a token (or a tag, or an intent), or ``None`` when it can.

    A token is a non-empty string without whitespace, control characters or a
    byte-order mark; the reason names the offending character by code point,
    since most of them are invisible when printed.
    """
    if not isinstance(token, str):
        return f"is not a string but {type(token).__name__}"
    if not token:
        return "is empty"
    bad = _NOT_IN_TOKEN.search(token)
    if bad:
        char = bad.group()
        kind = "whitespace" if char.isspace() else "a byte-order mark" if char == "\ufeff" else "a control character"
        return f"holds {kind} {describe_char(char)} at character {bad.start() + 1}"
    return None


@dataclass(frozen=True)
class Utterance:
    """One labelled utterance; construction validates it (lengths, token form, BIO).

    Lists are accepted and stored as tuples.
    """

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    intent: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "tags", tuple(self.tags))
        if not self.tokens:
            raise ValueError("utterance has no tokens; fix: drop empty utterances from the data")
        if len(self.tokens) != len(self.tags):
            raise ValueError(
                f"utterance has {len(self.tokens)} tokens but {len(self.tags)} tags "
                f"({' '.join(map(str, self.tokens))!r}); fix: give exactly one BIO tag per token"
            )
        for i, token in enumerate(self.tokens):
            problem = token_problem(token)
            if problem:
                raise ValueError(
                    f"token {i + 1} ({token!r}) {problem}; a token must be a non-empty string without whitespace "
                    "or control characters; fix: split the text on whitespace into tokens and delete control "
                    "characters"
                )
        validate_bio(self.tags)
        if not isinstance(self.intent, str) or not self.intent.strip():
            raise ValueError(f"intent must be a non-empty string, got {self.intent!r}")

    @classmethod
    def checked_parts(cls, tokens: tuple[str, ...], tags: tuple[str, ...], intent: str) -> "Utterance":
        """An utterance of parts checked already (valid tokens, BIO tags of the same length, an intent), built
        without checking them again: the exposure attack builds up to millions of candidate sentences from one
        canary pattern's tokens and tags, and checking each cost it as much as scoring it."""
        utterance = object.__new__(cls)
        object.__setattr__(utterance, "tokens", tokens)
        object.__setattr__(utterance, "tags", tags)
        object.__setattr__(utterance, "intent", intent)
        return utterance

    @property
    def text(self) -> str:
        """The tokens joined by single spaces."""
        return " ".join(self.tokens)

    def to_json(self) -> dict:
        """JSON-safe form (the JSON Lines loader reads it back)."""
        return {"tokens": list(self.tokens), "tags": list(self.tags), "intent": self.intent}


def _as_utterances(split: str, items: Iterable[Utterance]) -> tuple[Utterance, ...]:
    items = tuple(items)
    for i, item in enumerate(items):
        if not isinstance(item, Utterance):
            raise TypeError(f"{split}[{i}] is {type(item).__name__}, expected Utterance")
    return items


@dataclass(frozen=True)
class NLUDataset:
    """Train, validation and test splits of labelled utterances.

    ``name`` is descriptive only (it records e.g. canary injection) and is not
    part of :meth:`content_hash`.
    """

    train: tuple[Utterance, ...]
    valid: tuple[Utterance, ...]
    test: tuple[Utterance, ...]
    name: str = "nlu"

    def __post_init__(self) -> None:
        for split in SPLITS:
            object.__setattr__(self, split, _as_utterances(split, getattr(self, split)))
        if not self.train:
            raise ValueError("NLUDataset needs at least one training utterance")

    def splits(self) -> dict[str, tuple[Utterance, ...]]:
        """``{"train": ..., "valid": ..., "test": ...}``."""
        return {split: getattr(self, split) for split in SPLITS}

    def all_utterances(self) -> tuple[Utterance, ...]:
        return self.train + self.valid + self.test

    @cached_property
    def intents(self) -> tuple[str, ...]:
        """Sorted intents over all splits."""
        return tuple(sorted({u.intent for u in self.all_utterances()}))

    @cached_property
    def tag_set(self) -> tuple[str, ...]:
        """Sorted BIO tags over all splits, always including ``"O"``."""
        return tuple(sorted({"O"}.union(*(u.tags for u in self.all_utterances()))))

    @cached_property
    def vocabulary(self) -> tuple[str, ...]:
        """Sorted distinct tokens of the training split (what a model can embed)."""
        return tuple(sorted(set().union(*(u.tokens for u in self.train))))

    @property
    def sizes(self) -> dict[str, int]:
        return {split: len(items) for split, items in self.splits().items()}

    def __len__(self) -> int:
        return len(self.train) + len(self.valid) + len(self.test)

    def to_json(self) -> dict:
        """Canonical JSON-safe form of the splits (no name)."""
        return {split: [u.to_json() for u in items] for split, items in self.splits().items()}

    @cached_property
    def _content_hash(self) -> str:
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def content_hash(self) -> str:
        """sha256 hex of the canonical JSON of all splits; stable across runs and processes."""
        return self._content_hash

    def replace(self, **changes) -> "NLUDataset":
        """A copy with some fields changed (``train=``, ``valid=``, ``test=``, ``name=``)."""
        return dataclasses.replace(self, **changes)

    def with_train(self, train: Iterable[Utterance], name: str | None = None) -> "NLUDataset":
        return self.replace(train=tuple(train), name=self.name if name is None else name)
