"""Canary patterns and their injection into a training set (canary-extraction-nlu §4.2, Appendix A).

A canary is a known prefix ``p_1..p_m`` followed by ``n`` secret tokens
``k_1..k_n`` drawn uniformly from a small vocabulary V0.  The paper's three
patterns (Table 1, Appendix A):

======  ====================  ==========  ====================  ======================
name    prefix                prefix tags  V0                   intent
======  ====================  ==========  ====================  ======================
call    call                  O           digits 0-9            CallIntent
pin     my pin code is        O O O O     digits 0-9            PinIntent
color   color                 O           the 12 colours        ColorIntent
======  ====================  ==========  ====================  ======================

The secret is tagged ``B-canary I-canary ... I-canary`` (n-1 ``I-``).  The
paper uses n in {4, 6, 8, 10} (:data:`PAPER_LENGTHS`); any n >= 1 is accepted.
Chance baselines (§4.3): accuracy ``(1/|V0|)^n``, HDT ``1 - 1/|V0|``.

Several canaries per model (issue 37): the paper trains one model per canary
(§4.2: 10 trials, 10 canaries, 10 models), and the Secret Sharer measures
exposure over many inserted canaries. A :class:`CanarySet` is ``m`` distinct
secrets of one pattern, all inserted into the SAME training set (so training
costs what one canary costs, and one scoring of the pattern's space ranks
them all); every figure is then their mean (and worst) over canaries. One
secret's figure moves by several bits between draws of the secret and the
training seed, as much as a 4x change of its repeat count; the mean over
``m`` secrets moves about ``1/sqrt(m)`` as much. But canaries of one
template share what the model learns of it: in the joint tagger a set's
members score far lower than one canary alone (a pin said twice: 13.29 bits
and CEA accuracy 1.0 alone, 5.5-6.7 bits and 0.0 as one of 8), so a set is
the tool for comparing branches (the gate), one canary for an absolute
limit. The plugin's ``canary`` fixture draws one canary unless given
``count=`` (:data:`SET_SIZE` is the size measured for the gate).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .data.bio import BIOError, validate_bio
from .data.types import NLUDataset, Utterance

DIGITS: tuple[str, ...] = tuple("0123456789")
#: The 12 colours of §4.2, in the paper's order.
COLORS: tuple[str, ...] = ("red", "green", "lilac", "blue", "yellow", "brown",
                           "cyan", "magenta", "orange", "pink", "purple", "mauve")
PAPER_LENGTHS: tuple[int, ...] = (4, 6, 8, 10)
#: Repeats R used in §4.3 (Appendix C adds 1000 and more).
PAPER_REPEATS: tuple[int, ...] = (1, 10, 100, 500)
DEFAULT_LENGTH = 4


def _check_tokens(arg: str, tokens: Sequence[str], allow_empty: bool) -> tuple[str, ...]:
    if isinstance(tokens, str):
        raise ValueError(f"{arg} must be a sequence of tokens, not the string {tokens!r}; "
                         f"fix: use {tuple(tokens.split())!r}")
    tokens = tuple(tokens)
    if not tokens and not allow_empty:
        raise ValueError(f"{arg} must not be empty")
    for token in tokens:
        if not isinstance(token, str) or not token or any(c.isspace() for c in token):
            raise ValueError(f"{arg} token {token!r} must be a non-empty string without whitespace")
    return tokens


@dataclass(frozen=True)
class CanaryPattern:
    """A canary template: ``prefix`` then ``length`` secret tokens from ``vocabulary`` (V0)."""

    name: str
    prefix: tuple[str, ...]
    vocabulary: tuple[str, ...]
    length: int
    intent: str
    prefix_tags: tuple[str, ...]
    slot: str = "canary"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"pattern name must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "prefix", _check_tokens("prefix", self.prefix, allow_empty=True))
        vocabulary = _check_tokens("vocabulary", self.vocabulary, allow_empty=False)
        if len(set(vocabulary)) != len(vocabulary):
            dup = sorted({t for t in vocabulary if vocabulary.count(t) > 1})
            raise ValueError(f"vocabulary repeats {dup}; fix: list each candidate token once")
        if len(vocabulary) < 2:
            raise ValueError("vocabulary needs at least 2 candidate tokens (with 1 the secret is not secret)")
        object.__setattr__(self, "vocabulary", vocabulary)
        if not isinstance(self.length, int) or isinstance(self.length, bool) or self.length < 1:
            raise ValueError(f"length must be an integer >= 1 (the paper uses {PAPER_LENGTHS}), got {self.length!r}")
        if not isinstance(self.intent, str) or not self.intent or any(c.isspace() for c in self.intent):
            raise ValueError(f"intent must be a non-empty string without whitespace, got {self.intent!r}")
        if not isinstance(self.slot, str) or not self.slot or any(c.isspace() for c in self.slot):
            raise ValueError(f"slot must be a non-empty string without whitespace, got {self.slot!r}")
        prefix_tags = tuple(self.prefix_tags)
        if len(prefix_tags) != len(self.prefix):
            raise ValueError(f"prefix_tags has {len(prefix_tags)} tags for {len(self.prefix)} prefix tokens "
                             f"{self.prefix!r}; fix: give one BIO tag per prefix token (usually 'O')")
        try:
            validate_bio(prefix_tags + self.secret_tags)
        except BIOError as exc:
            raise ValueError(f"prefix_tags {prefix_tags!r}: {exc}") from None
        object.__setattr__(self, "prefix_tags", prefix_tags)

    @property
    def secret_tags(self) -> tuple[str, ...]:
        return (f"B-{self.slot}",) + (f"I-{self.slot}",) * (self.length - 1)

    @property
    def tags(self) -> tuple[str, ...]:
        """``prefix_tags + (B-slot, I-slot, ..., I-slot)``, Appendix A."""
        return self.prefix_tags + self.secret_tags

    @property
    def space_size(self) -> int:
        """Number of possible secrets, ``|V0|^n``."""
        return len(self.vocabulary) ** self.length

    @property
    def chance_accuracy(self) -> float:
        """Accuracy of guessing uniformly from V0, ``(1/|V0|)^n`` (§4.3)."""
        return (1.0 / len(self.vocabulary)) ** self.length

    @property
    def chance_hdt(self) -> float:
        """Hamming distance per token of guessing uniformly from V0, ``1 - 1/|V0|`` (§4.3)."""
        return 1.0 - 1.0 / len(self.vocabulary)

    def with_length(self, length: int) -> "CanaryPattern":
        return dataclasses.replace(self, length=length)


@dataclass(frozen=True)
class Canary:
    """One canary: a pattern and its secret tokens (each in the pattern's V0)."""

    pattern: CanaryPattern
    secret: tuple[str, ...]

    def __post_init__(self) -> None:
        secret = tuple(self.secret.split()) if isinstance(self.secret, str) else tuple(self.secret)
        if len(secret) != self.pattern.length:
            raise ValueError(f"secret {secret!r} has {len(secret)} tokens but pattern {self.pattern.name!r} "
                             f"has length {self.pattern.length}; fix: pass length={len(secret)} or a secret of "
                             f"{self.pattern.length} tokens")
        for i, token in enumerate(secret):
            if token not in self.pattern.vocabulary:
                raise ValueError(f"secret token {i + 1} ({token!r}) is not in the vocabulary V0 of pattern "
                                 f"{self.pattern.name!r}: {list(self.pattern.vocabulary)}")
        object.__setattr__(self, "secret", secret)

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.pattern.prefix + self.secret

    @property
    def tags(self) -> tuple[str, ...]:
        return self.pattern.tags

    @property
    def intent(self) -> str:
        return self.pattern.intent

    @property
    def text(self) -> str:
        return " ".join(self.tokens)

    @property
    def prefix_len(self) -> int:
        return len(self.pattern.prefix)

    @property
    def secret_indices(self) -> tuple[int, ...]:
        """Index of each secret token in ``pattern.vocabulary`` (the attack's class labels)."""
        return tuple(self.pattern.vocabulary.index(t) for t in self.secret)

    @property
    def utterance(self) -> Utterance:
        return Utterance(self.tokens, self.tags, self.intent)

    def __str__(self) -> str:
        return self.text


#: Appendix A patterns at the paper's shortest length; :func:`make_pattern` sets the length.
PATTERNS: dict[str, CanaryPattern] = {
    "call": CanaryPattern("call", ("call",), DIGITS, DEFAULT_LENGTH, "CallIntent", ("O",)),
    "pin": CanaryPattern("pin", ("my", "pin", "code", "is"), DIGITS, DEFAULT_LENGTH, "PinIntent", ("O",) * 4),
    "color": CanaryPattern("color", ("color",), COLORS, DEFAULT_LENGTH, "ColorIntent", ("O",)),
}


def make_pattern(name_or_pattern: str | CanaryPattern, length: int | None = None) -> CanaryPattern:
    """A pattern by name (``call``, ``pin``, ``color``) or as given, with ``length`` secret tokens.

    ``length=None`` means 4 for a named pattern and the pattern's own length
    for a :class:`CanaryPattern`.
    """
    if isinstance(name_or_pattern, CanaryPattern):
        pattern = name_or_pattern
    elif isinstance(name_or_pattern, str) and name_or_pattern in PATTERNS:
        pattern = PATTERNS[name_or_pattern]
        length = DEFAULT_LENGTH if length is None else length
    else:
        raise ValueError(f"unknown canary pattern {name_or_pattern!r}; known: {', '.join(PATTERNS)}; fix: use one "
                         "of them, or build your own with custom_pattern(...) or string_pattern(...)")
    return pattern if length is None or length == pattern.length else pattern.with_length(length)


def custom_pattern(name: str, prefix: Sequence[str], vocabulary: Sequence[str], length: int, intent: str,
                   prefix_tags: Sequence[str] | None = None, slot: str = "canary") -> CanaryPattern:
    """A user-defined pattern; ``prefix_tags`` defaults to ``O`` for every prefix token."""
    prefix = _check_tokens("prefix", prefix, allow_empty=True)
    tags = ("O",) * len(prefix) if prefix_tags is None else tuple(prefix_tags)
    return CanaryPattern(name, prefix, tuple(vocabulary), length, intent, tags, slot)


#: Largest secret space a ``#`` template spells out (10^6: a 6-digit code); larger ones take ``secrets=``.
MAX_TEMPLATE_SECRETS = 10 ** 6


def string_pattern(name: str, template: str, *, intent: str, secrets: Sequence[str] | None = None,
                   slot: str = "canary") -> CanaryPattern:
    """A pattern whose secret is one string, written as the team's data writes it: ``"my pin is ####"``.

    ``template`` is the sentence with the secret last: its words before the secret are the
    prefix, and its last word is the secret's format, in which each ``#`` is one digit
    (``"####"``: the 10^4 strings ``"0000"`` .. ``"9999"``; ``"##-##"``: ``"00-00"`` .. ``"99-99"``).
    With ``secrets=[...]`` the last word is ``{secret}`` and the candidates are the strings given.
    The secret is one token (``length`` 1), so the model sees ``"4821"`` as the data spells it:
    one word for a built-in target (its vocabulary takes every candidate of an injected pattern),
    the tokenizer's word pieces for a transformers adapter (exposure scores whole sentences).
    The paper's spaced-digit patterns (``canary("pin")``: ``"my pin code is 4 8 2 1"``) stay
    the form the extraction attack needs when a candidate is several word pieces.
    """
    if not isinstance(template, str) or not template.split():
        raise ValueError(f"template must be a sentence such as 'my pin is ####', got {template!r}")
    *prefix, last = template.split()
    if secrets is not None:
        if last != "{secret}":
            raise ValueError(f"template {template!r}: with secrets=[...] its last word must be '{{secret}}'; fix: "
                             f"e.g. string_pattern({name!r}, 'my code is {{secret}}', secrets=[...], intent=...)")
        candidates = tuple(secrets) if not isinstance(secrets, str) else None
        if candidates is None:
            raise ValueError(f"secrets must be a list of strings, not the string {secrets!r}; fix: secrets=[...]")
    else:
        digits = last.count("#")
        if "#" in " ".join(prefix) or digits == 0:
            raise ValueError(f"template {template!r} must end with the secret's format, one word whose '#'s are "
                             "digits (e.g. 'my pin is ####'), and have no '#' before it; fix: move the format to "
                             "the end, or pass secrets=[...] with '{secret}' as the last word")
        if 10 ** digits > MAX_TEMPLATE_SECRETS:
            raise ValueError(f"template {template!r} spells {10 ** digits:.0e} secrets (more than "
                             f"{MAX_TEMPLATE_SECRETS:.0e}); fix: pass the candidates as secrets=[...]")
        parts = last.split("#")
        candidates = tuple("".join(p + d for p, d in zip(parts, f"{n:0{digits}d}")) + parts[-1]
                           for n in range(10 ** digits))
    return custom_pattern(name, tuple(prefix), candidates, 1, intent, slot=slot)


#: Attribute set on a canary whose secret the caller gave (``secret=``): it may be a real one, so messages,
#: reports and baselines redact it (:mod:`pytest_privleak.attacks.redaction`). Not a field: equality, hashing
#: and the result-cache key of the canary are unchanged.
GIVEN_ATTR = "_privleak_secret_given"


def _mark_given(item: Canary) -> Canary:
    object.__setattr__(item, GIVEN_ATTR, True)
    return item


def secret_was_given(item: Canary) -> bool:
    """Whether ``item``'s secret was given by the caller (``canary(..., secret=...)``) rather than drawn."""
    return bool(getattr(item, GIVEN_ATTR, False))


#: The size of a canary set measured for the gate (issue 37; docs/report-and-gate.md, "Several canaries per
#: model"): all go into the same training set, and one scoring of the pattern's space ranks them all, so they
#: cost what one costs. Asked for with ``count=``; the fixture draws one canary unless told.
SET_SIZE = 8
#: A set leaves at least this many secrets of the space per canary as references (see :func:`set_size`).
MIN_REFERENCES_PER_CANARY = 100


@dataclass(frozen=True)
class CanarySet(Sequence):
    """``m`` distinct canaries of one pattern, inserted into the same training set (issue 37).

    A read-only sequence of :class:`Canary` (so :func:`inject_canaries` inserts each
    ``repeats`` times, and the attacks take it where they take a list), but not a
    canary itself: an assertion given a set measures every member, ranks each among
    the secrets of the space that are NOT in the set (the other members are training
    data, not random alternatives), and reports the mean over the set, its worst
    member and the per-canary figures.
    """

    canaries: tuple[Canary, ...]

    def __post_init__(self) -> None:
        items = tuple(self.canaries) if not isinstance(self.canaries, Canary) else (self.canaries,)
        if not items:
            raise ValueError("a CanarySet needs at least one canary; fix: canary('pin', count=8)")
        for i, item in enumerate(items):
            if not isinstance(item, Canary):
                raise TypeError(f"CanarySet canaries[{i}] is {type(item).__name__}, not a Canary; build them with "
                                "canary(...)")
        patterns = {c.pattern for c in items}
        if len(patterns) != 1:
            raise ValueError(f"a CanarySet holds canaries of one pattern, got {sorted(p.name for p in patterns)}; "
                             "fix: one set per pattern (canary('pin', count=8), canary('call', count=8))")
        seen: dict[tuple[str, ...], int] = {}
        for i, item in enumerate(items):
            if item.secret in seen:
                raise ValueError(f"CanarySet canaries[{i}] repeats the secret of canaries[{seen[item.secret]}] "
                                 f"({item.text!r}); fix: give distinct secrets (canary(..., count=m) draws them)")
            seen[item.secret] = i
        if len(items) >= items[0].pattern.space_size:
            raise ValueError(f"{len(items)} canaries of pattern {items[0].pattern.name!r} fill its space of "
                             f"{items[0].pattern.space_size} secrets, leaving none to rank them against; fix: fewer "
                             "canaries or a longer secret (length=...)")
        object.__setattr__(self, "canaries", items)

    def __len__(self) -> int:
        return len(self.canaries)

    def __getitem__(self, index):
        return self.canaries[index]

    def __iter__(self):
        return iter(self.canaries)

    @property
    def pattern(self) -> CanaryPattern:
        return self.canaries[0].pattern

    @property
    def secret_numbers(self) -> tuple[int, ...]:
        """Each member's number in the pattern's space (V0 indices read as base-``|V0|`` digits)."""
        base = len(self.pattern.vocabulary)
        return tuple(sum(d * base ** (len(c.secret_indices) - 1 - j) for j, d in enumerate(c.secret_indices))
                     for c in self.canaries)

    @property
    def label(self) -> str:
        """``"8 pin canaries: my pin code is _ _ _ _"``: the default label of a result over the set. It names no
        secret, so it stays the same when the set is drawn with another seed."""
        blanks = " ".join("_" for _ in range(self.pattern.length))
        words = " ".join((*self.pattern.prefix, blanks))
        return f"{len(self)} {self.pattern.name} canar{'y' if len(self) == 1 else 'ies'}: {words}"

    def fingerprint(self) -> str:
        """SHA-256 (16 hex digits) of the pattern and the secrets in order: the same set gives the same print."""
        text = json.dumps([self.pattern.name, list(self.pattern.prefix), [list(c.secret) for c in self]])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"CanarySet({self.label!r})"


def set_size(pattern: CanaryPattern) -> int:
    """:data:`SET_SIZE`, fewer where the space is small: at least :data:`MIN_REFERENCES_PER_CANARY`
    secrets per canary remain (a 2-digit pin, 100 secrets, gets one canary)."""
    return max(1, min(SET_SIZE, pattern.space_size // MIN_REFERENCES_PER_CANARY))


def _check_count(count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1 (how many distinct canaries to draw), got {count!r}; "
                         f"fix: count={SET_SIZE} (the set measured for the gate) or count=1 for one canary")
    return count


def canary(pattern: str | CanaryPattern = "pin", length: int | None = None, seed: int = 0, *,
           secret: Sequence[str] | str | None = None, count: int | None = None) -> "Canary | CanarySet":
    """One canary, or with ``count=m >= 2`` a :class:`CanarySet` of ``m`` distinct ones.

    The secret is drawn uniformly from V0^n with ``seed`` unless given; a set
    continues the same draw (its first member is ``canary(pattern, seed=seed)``)
    and skips repeats. ``length=None``: 4 for a named pattern, the pattern's own
    length for a :class:`CanaryPattern`, or the length of an explicit ``secret``
    (which is always one canary). ``count=None`` or 1 gives one canary, here and
    in the plugin's ``canary`` fixture; :func:`set_size` is the largest set the
    space supports at the measured size.
    """
    if secret is not None:
        if count is not None and _check_count(count) != 1:
            raise ValueError(f"secret= names one canary, but count={count}; fix: drop count (or count=1), or "
                             "build a set of given secrets with CanarySet([canary(p, secret=s) for s in secrets])")
        secret_tokens = tuple(secret.split()) if isinstance(secret, str) else tuple(secret)
        if length is not None and length != len(secret_tokens):
            raise ValueError(f"length={length} but secret {secret_tokens!r} has {len(secret_tokens)} tokens; "
                             "fix: drop length or make them agree")
        return _mark_given(Canary(make_pattern(pattern, len(secret_tokens)), secret_tokens))
    p = make_pattern(pattern, length)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    m = 1 if count is None else _check_count(count)
    if m >= p.space_size:
        raise ValueError(f"count={m} canaries of pattern {p.name!r} would fill its space of {p.space_size} "
                         f"secrets, leaving none to rank them against; fix: count <= {set_size(p)} (the "
                         "set size for this space) or a longer secret (length=...)")
    rng = random.Random(f"canary:{seed}")
    drawn: dict[tuple[str, ...], None] = {}
    while len(drawn) < m:
        drawn.setdefault(tuple(p.vocabulary[rng.randrange(len(p.vocabulary))] for _ in range(p.length)))
    items = [Canary(p, secret) for secret in drawn]
    return items[0] if count is None or m == 1 else CanarySet(tuple(items))


def split_repeats(repeats: int) -> tuple[int, int]:
    """(train, valid) copies of R repeats, 9:1 as in Appendix A, train rounded half up (R=1 -> (1, 0))."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1 (the paper uses {PAPER_REPEATS}), got {repeats!r}")
    n_train = (9 * repeats + 5) // 10
    return n_train, repeats - n_train


def insert_at_random_positions(items: tuple[Utterance, ...], extra: list[Utterance],
                               rng: random.Random) -> tuple[Utterance, ...]:
    """``items`` with ``extra`` (shuffled) at random positions; the original order is kept."""
    rng.shuffle(extra)
    total = len(items) + len(extra)
    slots = set(rng.sample(range(total), len(extra)))
    originals, extras = iter(items), iter(extra)
    return tuple(next(extras) if i in slots else next(originals) for i in range(total))


def as_canary_list(canaries: "Canary | Sequence[Canary]") -> list[Canary]:
    """One canary or a sequence of them (a :class:`CanarySet` among them stands for its members) as a
    non-empty list; a clear error for anything else."""
    items = [canaries] if isinstance(canaries, Canary) else list(canaries)
    # a canary set inside a list (``[pins]``, as one canary used to be passed) stands for its members
    items = [member for item in items for member in (item if isinstance(item, CanarySet) else (item,))]
    if not items:
        raise ValueError("no canaries given; fix: pass a Canary or a non-empty sequence of them")
    for i, item in enumerate(items):
        if not isinstance(item, Canary):
            raise TypeError(f"canaries[{i}] is {type(item).__name__}; build it with "
                            "pytest_privleak.canaries.canary(...)")
    return items


def check_distinct(items: Sequence[Canary], dataset: NLUDataset) -> None:
    """Refuse canaries that repeat one another or a sentence already in ``dataset`` (issue 37).

    A repeated canary is inserted twice as often as asked, and a canary the
    corpus already says is not a secret of the test's own: either would inflate
    its figure. The check runs on token sequences, whatever the labels; a
    dataset that already holds canaries of an earlier injection is checked too.
    """
    first: dict[tuple[str, ...], int] = {}
    for i, item in enumerate(items):
        if item.tokens in first:
            raise ValueError(f"canaries[{i}] ({item.text!r}) repeats canaries[{first[item.tokens]}]; fix: pass "
                             "distinct canaries (canary(..., count=m) draws m distinct secrets), or raise repeats= "
                             "to say one canary more often")
        first[item.tokens] = i
    for split in ("train", "valid", "test"):
        for j, utterance in enumerate(getattr(dataset, split)):
            if tuple(utterance.tokens) in first:
                i = first[tuple(utterance.tokens)]
                raise ValueError(f"canaries[{i}] ({items[i].text!r}) is already in the dataset "
                                 f"{dataset.name!r}: {split}[{j}]; its figure would count those copies too; fix: "
                                 "draw the canaries with another seed (canary(..., seed=...)) or inject into the "
                                 "dataset before any earlier injection of the same secret")


@dataclass(frozen=True)
class InjectedDataset(NLUDataset):
    """An :class:`NLUDataset` that remembers the canary patterns injected into it.

    ``canary_tokens`` are the prefix and V0 tokens of every injected pattern
    (sorted): the built-in targets add them to their vocabulary, so every
    secret the attack may guess has a row even when the corpus never says it
    (canary-extraction-nlu §3.1 optimises over all of V0). They shape the
    trained model, so they are part of :meth:`content_hash`.
    """

    canary_tokens: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "canary_tokens", tuple(sorted(set(self.canary_tokens))))

    def content_hash(self) -> str:
        """sha256 hex of the splits' hash and ``canary_tokens``; equals the plain hash when there are none."""
        plain = super().content_hash()
        if not self.canary_tokens:
            return plain
        text = json.dumps({"splits": plain, "canary_tokens": list(self.canary_tokens)}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def inject_canaries(dataset: NLUDataset, canaries: Canary | Sequence[Canary], repeats: int = 100,
                    seed: int = 0) -> InjectedDataset:
    """A new dataset with ``repeats`` copies of each canary, split 9:1 between train and valid (Appendix A).

    Copies land at positions drawn with ``seed``; the original utterances keep
    their order and the test split is untouched. The result remembers each
    canary's pattern tokens (:class:`InjectedDataset`), so a built-in target
    trained on it has a vocabulary row for every candidate secret.
    """
    if not isinstance(dataset, NLUDataset):
        raise TypeError(f"dataset must be an NLUDataset, got {type(dataset).__name__}")
    items = as_canary_list(canaries)
    check_distinct(items, dataset)
    n_train, n_valid = split_repeats(repeats)
    rng = random.Random(f"inject:{seed}")
    train = insert_at_random_positions(dataset.train, [c.utterance for c in items for _ in range(n_train)], rng)
    valid = insert_at_random_positions(dataset.valid, [c.utterance for c in items for _ in range(n_valid)], rng)
    label = ",".join(f"{c.pattern.name}:{' '.join(c.secret)}" for c in items)
    remembered = (*getattr(dataset, "canary_tokens", ()), *(t for c in items for t in (*c.pattern.prefix,
                                                                                        *c.pattern.vocabulary)))
    return InjectedDataset(train, valid, dataset.test, name=f"{dataset.name}+canaries[{label}]x{repeats}",
                           canary_tokens=remembered)
