"""Label and token maps of a target model, built from a dataset and saved as JSON.

Token ids: 0 is padding, 1 is the unknown token, then, in sorted order, the
training split's tokens and the *reserved* tokens: the prefix and reduced
vocabulary V0 of every built-in canary pattern (``canaries.PATTERNS``), of
every pattern injected into the dataset with ``inject_canaries`` (the dataset
remembers them, ``canaries.InjectedDataset``) and the ``extra_tokens`` a user
gives ``train_target``. The paper's model reads FastText vectors, whose
vocabulary holds every digit and colour (canary-extraction-nlu §4.1); a
vocabulary built from a corpus alone lacks the V0 tokens the corpus never
says ('0' on ATIS), and the attack could not even be posed.

A reserved token the training split never has is *untrained*: the network
reads ``<unk>`` for it (:meth:`Vocabulary.token_ids`, and the targets tie its
embedding row to the ``<unk>`` row after training), which is all a model
knows of a word it never saw.

Characters (for the character-CNN defence of canary-extraction-nlu §6) are
those of the training tokens; any other character reads the character
``<unk>``. Tags and intents cover all splits so that every utterance of the
dataset can be scored and evaluated.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
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


def builtin_canary_tokens() -> tuple[str, ...]:
    """Prefix and V0 tokens of every built-in canary pattern, sorted (held by every built-in vocabulary)."""
    from ..canaries import PATTERNS

    return tuple(sorted({t for p in PATTERNS.values() for t in (*p.prefix, *p.vocabulary)}))


def check_extra_tokens(value: object) -> tuple[str, ...]:
    """``extra_tokens`` as a sorted tuple of distinct tokens; ``ValueError`` naming the bad entry and the fix."""
    fix = "fix: pass a list of whitespace-free tokens, e.g. extra_tokens=['0', '1']"
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"config extra_tokens={value!r} must be a sequence of tokens, not a "
                         f"{type(value).__name__}; {fix}")
    items = tuple(value)
    for i, token in enumerate(items):
        if not isinstance(token, str) or not token or any(c.isspace() for c in token) or token in (PAD, UNK):
            raise ValueError(f"config extra_tokens[{i}]={token!r} is not a token (a non-empty string without "
                             f"whitespace, not {PAD!r} or {UNK!r}); {fix}")
    return tuple(sorted(set(items)))


@dataclass(frozen=True)
class Vocabulary:
    """Token, character, tag and intent maps; ``tokens[i]`` names embedding row ``i``."""

    tokens: tuple[str, ...]
    chars: tuple[str, ...]
    tags: tuple[str, ...]
    intents: tuple[str, ...]
    #: Reserved tokens the training split never has: the network reads ``<unk>`` for them.
    untrained: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("tokens", "chars", "tags", "intents", "untrained"):
            items = tuple(getattr(self, name))
            if len(set(items)) != len(items):
                raise ValueError(f"vocabulary {name} has duplicates")
            object.__setattr__(self, name, items)
        if self.tokens[:2] != (PAD, UNK) or self.chars[:2] != (PAD, UNK):
            raise ValueError(f"tokens and chars must start with {PAD!r}, {UNK!r}")
        stray = [t for t in self.untrained if t not in self.tokens[2:]]
        if stray:
            raise ValueError(f"vocabulary untrained tokens {stray[:3]} are not in its tokens; fix: list only "
                             "tokens of the vocabulary (build it with Vocabulary.from_dataset)")

    @classmethod
    def from_dataset(cls, dataset, extra_tokens: Sequence[str] = ()) -> "Vocabulary":
        """Training tokens plus reserved ones (module docstring); characters of the training tokens.

        Reserved: the built-in patterns' tokens, ``dataset.canary_tokens`` (the
        patterns injected with ``inject_canaries``) and ``extra_tokens``.
        Tags and intents cover all splits.
        """
        trained = training_counts(dataset.train)
        reserved = {*builtin_canary_tokens(), *getattr(dataset, "canary_tokens", ()), *check_extra_tokens(extra_tokens)}
        words = sorted(set(trained) | reserved)
        chars = sorted({c for w in trained for c in w})
        return cls((PAD, UNK, *words), (PAD, UNK, *chars), tuple(dataset.tag_set), tuple(dataset.intents),
                   tuple(sorted(reserved - set(trained))))

    @cached_property
    def token_index(self) -> dict[str, int]:
        return _index(self.tokens)

    @cached_property
    def read_ids(self) -> tuple[int, ...]:
        """Per token id, the id whose row the network reads: ``UNK_ID`` for untrained tokens, else itself."""
        untrained = set(self.untrained)
        return tuple(UNK_ID if t in untrained else i for i, t in enumerate(self.tokens))

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
        """Ids the network reads for ``tokens``: unknown and untrained ones map to ``UNK_ID``.

        ``strict`` raises :class:`OutOfVocabularyError` for a token outside the
        vocabulary and returns every token's own row id (an attack indexes rows).
        """
        index = self.token_index
        if strict:
            missing = [t for t in tokens if t not in index or t in (PAD, UNK)]
            if missing:
                raise OutOfVocabularyError(
                    f"token {missing[0]!r} is not in the model's vocabulary ({len(self.tokens) - 2} tokens: "
                    "the training split's, the built-in canary patterns', those of patterns injected with "
                    "inject_canaries, and extra_tokens); fix: train with train_target(..., "
                    f"extra_tokens=[{missing[0]!r}, ...]) (e.g. a custom pattern's prefix and vocabulary), "
                    "or attack only tokens in the vocabulary")
            return [index[t] for t in tokens]
        reads = self.read_ids
        return [reads[index[t]] if t in index else UNK_ID for t in tokens]

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
                "intents": list(self.intents), "untrained": list(self.untrained)}

    @classmethod
    def from_json(cls, data: dict) -> "Vocabulary":
        try:
            return cls(tuple(data["tokens"]), tuple(data["chars"]), tuple(data["tags"]), tuple(data["intents"]),
                       tuple(data["untrained"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed vocabulary JSON ({exc!r}); fix: it must hold the lists tokens, chars, "
                             "tags, intents and untrained written by Vocabulary.to_json (retrain the target)") from None


def training_counts(utterances: Sequence) -> Counter:
    """How often each token occurs in ``utterances`` (the training split)."""
    return Counter(t for u in utterances for t in u.tokens)
