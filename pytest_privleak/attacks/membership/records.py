"""Members, non-members and population records as a team has them, turned into utterances the scorers read.

Accepted per entry: an :class:`~pytest_privleak.data.types.Utterance`; a
string, kept as a :class:`TextRecord` (still the same string for a team's
scorer keyed on it, with ``tokens`` for the language-model adapters); a
``(text, label)`` pair or a ``{"text": ..., "label": ...}`` row of a dataset
split, made an Utterance (a classifier's input and intent). Pairs and strings
get the tag ``"O"`` on every token, which a sequence classifier or language
model never reads; a slot tagger needs real Utterances. Reference models
train on :func:`training_form` of each record.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ...data.types import Utterance

#: the intent given to a bare string (its scorer reads only the text)
UNLABELLED = "unlabelled"


def _from_text(text: str, intent: str, where: str) -> Utterance:
    tokens = text.split()
    if not tokens:
        raise ValueError(f"{where} is an empty text; fix: drop empty records")
    try:
        return Utterance(tuple(tokens), ("O",) * len(tokens), intent)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc


class TextRecord(str):
    """A record given as a bare string: equal to (and hashed as) the string, with an Utterance's attributes."""

    utterance: Utterance

    def __new__(cls, text: str, where: str) -> "TextRecord":
        record = super().__new__(cls, text)
        record.utterance = _from_text(text, UNLABELLED, where)
        return record

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.utterance.tokens

    @property
    def tags(self) -> tuple[str, ...]:
        return self.utterance.tags

    @property
    def intent(self) -> str:
        return self.utterance.intent

    @property
    def text(self) -> str:
        return self.utterance.text


def training_form(record: Any) -> Utterance:
    """The Utterance a reference model trains on for a record from :func:`as_utterances`."""
    return record.utterance if isinstance(record, TextRecord) else record


def as_utterance(item: Any, where: str) -> Any:
    """One record as an Utterance (or a :class:`TextRecord` for a string); ``where`` names it in errors."""
    if isinstance(item, Utterance):
        return item
    if isinstance(item, str):
        return TextRecord(item, where)
    if isinstance(item, Mapping):
        text = item.get("text", item.get("sentence"))
        label = item.get("label", item.get("intent"))
        if not isinstance(text, str) or label is None:
            raise TypeError(f"{where} is a mapping without 'text' and 'label' (or 'intent') keys: {sorted(item)}; "
                            "fix: pass rows like {'text': ..., 'label': ...}, (text, label) pairs or Utterances")
        return _from_text(text, str(label), where)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return _from_text(item[0], str(item[1]), where)
    raise TypeError(f"{where} is {type(item).__name__}, expected an Utterance, a string, a (text, label) pair or a "
                    "{'text', 'label'} row; fix: convert the records to one of these")


def as_utterances(name: str, items: Any) -> list[Utterance]:
    """All of ``items`` (a sequence of records, or a dataset split) as Utterances; empty is an error naming ``name``."""
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, Mapping)) and not hasattr(items, "__iter__"):
        raise TypeError(f"{name} must be a sequence of utterances (e.g. dataset.train), strings or (text, label) "
                        f"pairs, got {type(items).__name__}")
    if isinstance(items, Mapping):
        raise TypeError(f"{name} is a mapping; fix: pass its records (a list), e.g. list(zip(texts, labels))")
    records = [as_utterance(item, f"{name}[{i}]") for i, item in enumerate(items)]
    if not records:
        raise ValueError(f"{name} is empty; fix: pass at least one utterance (a few hundred give a useful AUC)")
    return records


def redacted(u: Any) -> str:
    """A record that may leave the team: the first 12 hex digits of its text's SHA-256 and its length."""
    digest = hashlib.sha256(u.text.encode("utf-8")).hexdigest()[:12]
    return f"sha256:{digest} ({len(u.tokens)} tokens)"
