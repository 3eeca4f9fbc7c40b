"""Input-space audit canaries for DP training audits, each included with probability 1/2 (a seeded draw).

Steinke, Nasr and Jagielski 2023 §2 (the one-run experiment): m canaries, an
independent fair coin per canary decides whether it joins the training data,
and the auditor guesses the coins from the trained model.  A canary must be an
outlier so that the model's behaviour on it depends on its own inclusion only:

- :func:`mislabelled_canaries` (classifiers): out-of-distribution texts made of
  fresh random tokens, each labelled with an intent (by default the rarest
  training intent, the label the model has least evidence for, and the one a
  class-balancing sampler upweights);
- :func:`new_token_canaries` (language models; Panda et al., ICLR 2025 §3):
  an in-distribution utterance followed by a token that never occurs in the
  data, so only the canary itself teaches the model that token.

A canary that collides with the data (the same text, or for new-token
canaries a "new" token that the data holds) would be trained on whether or
not its coin says so: :func:`check_collisions` refuses it with
:class:`CanaryCollisionError`.

Canaries appended to the training split reach training only if ``train``
reads that split: :func:`watch_train_reads` hands ``train`` a copy of the
dataset whose training split notes any read of its records.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import random
from dataclasses import dataclass

import numpy as np

from ..data.types import NLUDataset, Utterance

__all__ = ["AuditCanaries", "CanaryCollisionError", "mislabelled_canaries", "new_token_canaries",
           "draw_inclusion", "check_collisions", "with_canaries", "make_audit_canaries", "KINDS",
           "watch_train_reads", "ReadTally"]

#: The canary kinds ``make_audit_canaries`` builds.
KINDS = ("mislabelled", "new-token")
_LETTERS = "bcdfghjklmnpqrstvwxz"


class CanaryCollisionError(ValueError):
    """An audit canary is also in the data, so its inclusion coin would not decide whether it is trained on."""


@dataclass(frozen=True)
class AuditCanaries:
    """``utterances[i]`` joins the training data when ``included[i]``; ``kind`` says how they were made."""

    utterances: tuple[Utterance, ...]
    included: np.ndarray
    kind: str
    seed: int

    def __len__(self) -> int:
        return len(self.utterances)


def _fresh_token(rng: random.Random, length: int = 7) -> str:
    return "".join(rng.choice(_LETTERS) for _ in range(length))


def _data_tokens(dataset: NLUDataset) -> set[str]:
    return set().union(*(u.tokens for u in dataset.all_utterances()))


def _rarest_intent(dataset: NLUDataset) -> str:
    counts = {intent: 0 for intent in dataset.intents}
    for u in dataset.train:
        counts[u.intent] += 1
    return min(sorted(counts), key=counts.__getitem__)


def _check_count(m: int) -> int:
    if isinstance(m, bool) or not isinstance(m, int) or m < 2:
        raise ValueError(f"canaries must be an integer >= 2 (the one-run audit needs many: its bound grows with "
                         f"the number of correct guesses), got {m!r}; fix: e.g. canaries=1000")
    return m


def mislabelled_canaries(dataset: NLUDataset, m: int, *, seed: int = 0, tokens: int = 2,
                         label: str = "rarest") -> tuple[Utterance, ...]:
    """``m`` texts of ``tokens`` fresh random tokens (none in the data), labelled ``label``.

    ``label``: ``"rarest"`` (the least frequent training intent), ``"random"``
    (a uniform draw per canary) or an intent of the dataset.
    """
    _check_count(m)
    if label not in ("rarest", "random") and label not in dataset.intents:
        raise ValueError(f"label must be 'rarest', 'random' or one of the dataset's intents {dataset.intents}, "
                         f"got {label!r}")
    rng = random.Random(f"dp-audit-mislabelled:{seed}")
    taken = _data_tokens(dataset)
    fixed = _rarest_intent(dataset) if label == "rarest" else label
    out = []
    for _ in range(m):
        words = []
        while len(words) < tokens:
            word = _fresh_token(rng)
            if word not in taken:
                taken.add(word)
                words.append(word)
        intent = dataset.intents[rng.randrange(len(dataset.intents))] if label == "random" else fixed
        out.append(Utterance(tuple(words), ("O",) * tokens, intent))
    return tuple(out)


def new_token_canaries(dataset: NLUDataset, m: int, *, seed: int = 0) -> tuple[Utterance, ...]:
    """``m`` training utterances each followed by a token never in the data (Panda et al. 2025 §3).

    The prefixes are drawn (seeded) from the training split; each canary's new
    token is distinct, so the model can only learn it from that canary.
    """
    _check_count(m)
    rng = random.Random(f"dp-audit-new-token:{seed}")
    taken = _data_tokens(dataset)
    out = []
    for _ in range(m):
        prefix = dataset.train[rng.randrange(len(dataset.train))]
        word = _fresh_token(rng, 9)
        while word in taken:
            word = _fresh_token(rng, 9)
        taken.add(word)
        out.append(Utterance(prefix.tokens + (word,), prefix.tags + ("O",), prefix.intent))
    return tuple(out)


def draw_inclusion(m: int, seed: int) -> np.ndarray:
    """``m`` independent fair coins (True: the canary is trained on), from a generator seeded by ``seed``."""
    return np.random.default_rng([0x0D9A, int(seed)]).random(_check_count(m)) < 0.5


def check_collisions(dataset: NLUDataset, canaries, *, new_tokens: bool = False) -> None:
    """Raise :class:`CanaryCollisionError` when a canary's text is in ``dataset`` (any split), when two
    canaries share a text, or (``new_tokens``) when a canary's last token occurs in the data."""
    texts = {}
    for split, items in dataset.splits().items():
        for i, u in enumerate(items):
            texts.setdefault(u.tokens, f"{split}[{i}]")
    seen: dict[tuple[str, ...], int] = {}
    tokens = _data_tokens(dataset) if new_tokens else set()
    for i, c in enumerate(canaries):
        if c.tokens in texts:
            raise CanaryCollisionError(
                f"canary {i} ({c.text!r}) is also {texts[c.tokens]} of the dataset, so it would be trained on "
                "whatever its inclusion coin says and the audit's bound would be wrong; fix: remove it from the "
                "canaries (or from the data), or let the audit make its own canaries (canaries=<count>)")
        if c.tokens in seen:
            raise CanaryCollisionError(f"canaries {seen[c.tokens]} and {i} are the same text ({c.text!r}); each "
                                       "canary needs its own coin; fix: make every canary distinct")
        seen[c.tokens] = i
        if new_tokens and c.tokens[-1] in tokens:
            raise CanaryCollisionError(
                f"new-token canary {i} ends with {c.tokens[-1]!r}, which the dataset already holds, so the model "
                "learns it from the data too; fix: end each canary with a token the data never uses")


def with_canaries(dataset: NLUDataset, canaries: AuditCanaries) -> NLUDataset:
    """``dataset`` whose training split also holds the included canaries (appended, in canary order)."""
    chosen = [u for u, keep in zip(canaries.utterances, canaries.included) if keep]
    return dataset.with_train(dataset.train + tuple(chosen),
                              name=f"{dataset.name} + {len(chosen)} of {len(canaries)} {canaries.kind} canaries")


def make_audit_canaries(dataset: NLUDataset, canaries, *, seed: int, kind: str = "mislabelled") -> AuditCanaries:
    """The audit's canaries: ``canaries`` an int (made here, of ``kind``) or a sequence of Utterances (checked
    for collisions); the inclusion coins drawn from ``seed``."""
    if kind not in KINDS:
        raise ValueError(f"canary kind must be one of {KINDS}, got {kind!r}")
    if isinstance(canaries, int) and not isinstance(canaries, bool):
        made = (mislabelled_canaries(dataset, canaries, seed=seed) if kind == "mislabelled"
                else new_token_canaries(dataset, canaries, seed=seed))
    else:
        try:
            made = tuple(canaries)
        except TypeError:
            raise TypeError(f"canaries must be a count (int) or a sequence of Utterances, got "
                            f"{type(canaries).__name__}") from None
        for i, item in enumerate(made):
            if not isinstance(item, Utterance):
                raise TypeError(f"canaries[{i}] is {type(item).__name__}, expected an Utterance")
        _check_count(len(made))
    check_collisions(dataset, made, new_tokens=kind == "new-token")
    return AuditCanaries(made, draw_inclusion(len(made), seed), kind, seed)


@dataclass
class ReadTally:
    """Whether ``train`` read the records of the training split it was given (see :func:`watch_train_reads`)."""

    read: bool = False
    how: str = ""

    def note(self, how: str) -> None:
        if not self.read:
            self.read, self.how = True, how


def _noting(name: str):
    plain = getattr(tuple, name)

    @functools.wraps(plain)
    def method(self, *args, **kwargs):
        self._tally.note(name)
        return plain(self, *args, **kwargs)
    return method


class _WatchedSplit(tuple):
    """A tuple of records that notes (in its :class:`ReadTally`) any operation that reads them: iteration,
    indexing, slicing, search, comparison, hashing, concatenation, copying and pickling (a copy or pickle comes
    back as a plain tuple, so reads of it in another process count).  ``len`` is not a read."""

    def __new__(cls, items, tally: ReadTally) -> "_WatchedSplit":
        split = super().__new__(cls, items)
        split._tally = tally
        return split

    def __radd__(self, other):
        self._tally.note("__radd__")
        return other + tuple(tuple.__iter__(self))

    def __reduce_ex__(self, protocol):
        self._tally.note("pickle or copy")
        return tuple, (tuple(tuple.__iter__(self)),)

    def __deepcopy__(self, memo):
        self._tally.note("deepcopy")
        return copy.deepcopy(tuple(tuple.__iter__(self)), memo)


for _name in ("__iter__", "__getitem__", "__contains__", "index", "count", "__add__", "__mul__", "__rmul__",
              "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"):
    setattr(_WatchedSplit, _name, _noting(_name))
del _name


def watch_train_reads(dataset: NLUDataset) -> tuple[NLUDataset, ReadTally]:
    """A copy of ``dataset`` (same content hash) whose training split notes whether its records are read.

    The black-box audit's canaries are appended to the training split, so a
    ``train`` that never reads it (one that loads its own copy of the data)
    trains without them and the audit of its model passes any claim.
    The dataset's derived properties (``intents``, ``tag_set``,
    ``vocabulary``, the content hash) are computed beforehand and do not count
    as reads; ``len`` is not a read either.  What this does not catch: a
    ``train`` that reads the split and then trains on other data, or reads it
    only through a property computed beforehand (``vocabulary``).  Reads that
    it cannot see (in a ``DataLoader`` worker process that indexes the
    original tuple) make it report no read: the audit then compares weights
    trained with and without the canaries before refusing anything.
    """
    tally = ReadTally()
    watched = dataclasses.replace(dataset)
    for name in dir(type(dataset)):
        if isinstance(getattr(type(dataset), name, None), functools.cached_property):
            watched.__dict__[name] = getattr(dataset, name)
    object.__setattr__(watched, "train", _WatchedSplit(dataset.train, tally))
    return watched, tally
