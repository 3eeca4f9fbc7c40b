"""Label and token maps of a target model, built from a dataset and saved as JSON.

Token ids: 0 is padding, 1 is the unknown token, then the training split's
tokens in sorted order (a model can only embed what it was trained on; the
canary must therefore be injected into the training data to be attackable).
Characters (for the character-CNN defence of canary-extraction-nlu §6) follow
the same scheme. Tags and intents cover all splits so that every utterance of
the dataset can be scored and evaluated.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

PAD = "<pad>"
UNK = "<unk>"
PAD_ID = 0
UNK_ID = 1


class OutOfVocabularyError(KeyError, ValueError):
    """A token, tag or intent the model has no id for."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _index(items: Sequence[str]) -> dict[str, int]:
    return {item: i for i, item in enumerate(items)}


@dataclass(frozen=True)
class Vocabulary:
    """Token, character, tag and intent maps; ``tokens[i]`` names embedding row ``i``."""

    tokens: tuple[str, ...]
    chars: tuple[str, ...]
    tags: tuple[str, ...]
    intents: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("tokens", "chars", "tags", "intents"):
            items = tuple(getattr(self, name))
            if len(set(items)) != len(items):
                raise ValueError(f"vocabulary {name} has duplicates")
            object.__setattr__(self, name, items)
        if self.tokens[:2] != (PAD, UNK) or self.chars[:2] != (PAD, UNK):
            raise ValueError(f"tokens and chars must start with {PAD!r}, {UNK!r}")

    @classmethod
    def from_dataset(cls, dataset) -> "Vocabulary":
        """Tokens and characters of ``dataset.train``; tags and intents of all splits."""
        words = sorted({t for u in dataset.train for t in u.tokens})
        chars = sorted({c for w in words for c in w})
        return cls((PAD, UNK, *words), (PAD, UNK, *chars), tuple(dataset.tag_set), tuple(dataset.intents))

    @cached_property
    def token_index(self) -> dict[str, int]:
        return _index(self.tokens)

    @cached_property
    def char_index(self) -> dict[str, int]:
        return _index(self.chars)

    @cached_property
    def tag_index(self) -> dict[str, int]:
        return _index(self.tags)

    @cached_property
    def intent_index(self) -> dict[str, int]:
        return _index(self.intents)

    def token_ids(self, tokens: Sequence[str], *, strict: bool = False) -> list[int]:
        """Ids of ``tokens``; unknown ones map to ``UNK_ID``, or raise when ``strict``."""
        index = self.token_index
        if strict:
            missing = [t for t in tokens if t not in index or t in (PAD, UNK)]
            if missing:
                raise OutOfVocabularyError(
                    f"token {missing[0]!r} is not in the model's vocabulary ({len(self.tokens) - 2} training "
                    "tokens); fix: inject the canary into the training data (inject_canaries) before "
                    "training, or attack only tokens that appear in the training split")
        return [index.get(t, UNK_ID) for t in tokens]

    def tag_ids(self, tags: Sequence[str]) -> list[int]:
        index = self.tag_index
        try:
            return [index[t] for t in tags]
        except KeyError as exc:
            raise OutOfVocabularyError(f"tag {exc.args[0]!r} is unknown to the model; known tags: "
                                       f"{list(self.tags)}") from None

    def intent_id(self, intent: str) -> int:
        try:
            return self.intent_index[intent]
        except KeyError:
            raise OutOfVocabularyError(f"intent {intent!r} is unknown to the model; known intents: "
                                       f"{list(self.intents)}") from None

    def char_ids(self, word: str, width: int) -> list[int]:
        """Character ids of ``word`` truncated or padded to ``width``."""
        index = self.char_index
        ids = [index.get(c, UNK_ID) for c in word[:width]]
        return ids + [PAD_ID] * (width - len(ids))

    def to_json(self) -> dict:
        return {"tokens": list(self.tokens), "chars": list(self.chars), "tags": list(self.tags),
                "intents": list(self.intents)}

    @classmethod
    def from_json(cls, data: dict) -> "Vocabulary":
        try:
            return cls(tuple(data["tokens"]), tuple(data["chars"]), tuple(data["tags"]), tuple(data["intents"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed vocabulary JSON ({exc!r})") from None
