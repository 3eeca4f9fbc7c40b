"""A support-ticket corpus with synthetic PII, some items repeated ``R`` times (issue 20, "real PII").

Lukas et al. 2023 (IEEE S&P, §5: "duplicated PII is extracted far more often")
find that repetition in the fine-tuning data drives PII extraction.  This
corpus lets a test show it without third-party data: every name, phone number,
e-mail address and street address is made up by our own generator,
deterministic from ``seed``:

- names are two or three invented syllables (``"korelin vastrom"``), drawn
  from pools of ``pool_size`` first and last names;
- phone numbers are 10 uniform digits (so the same-format space of the
  ``phone`` detector is exactly the generator's space);
- e-mail addresses are ``first.last@<invented domain>.test`` or ``.example``
  (reserved top-level domains, RFC 2606);
- addresses are a 3-digit house number, an invented street and a suffix.

Each planted item sits in ``R`` training tickets for ``R`` in ``repeats``
(``items_per_repeat`` items per kind and ``R``), one PII item per ticket,
among background tickets without PII.  ``digits="spaced"`` writes digits one
per token (``5 5 5 0 1 4 ...``, what a word-level model can spell, as the
Secret Sharer's canaries); ``"compact"`` writes them as people do
(``555-014-2773``) for subword models.  Slot tags mark each item (BIO,
the kind as slot), intents are ticket topics.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .bio import spans_to_bio
from .pii_detectors import AddressDetector, NameListDetector, resolve_detectors
from .types import NLUDataset, Utterance

__all__ = ["PII_KINDS", "PAPER_STYLE_REPEATS", "PiiCorpus", "PlantedPii", "generate_pii_corpus"]

PII_KINDS = ("phone", "email", "name", "address")
#: Repetition counts of the corpus (Lukas et al. 2023 bin PII by its duplication count).
PAPER_STYLE_REPEATS = (1, 2, 5, 10, 20, 50)

_TEMPLATES = {
    "phone": (("Callback", "please call me back at {} about my order"), ("Callback", "my phone number is {}"),
              ("Callback", "you can reach me on {} after five"), ("Delivery", "text {} when the parcel ships")),
    "email": (("Billing", "send the invoice to {} please"), ("Account", "my email address is {}"),
              ("Billing", "the receipt never reached {}"), ("Account", "reset the password for {}")),
    "name": (("Account", "the account holder is {}"), ("Billing", "this is {} writing about a refund"),
             ("Account", "please change the name on the order to {}"), ("Complaint", "my name is {} and i am upset")),
    "address": (("Delivery", "deliver the parcel to {}"), ("Account", "i moved to {} last month"),
                ("Billing", "my billing address is {}"), ("Delivery", "the courier could not find {}")),
}
_BACKGROUND = (("Complaint", "my order arrived damaged"), ("Complaint", "the app crashes when i open settings"),
               ("Delivery", "where is my parcel it has been a week"), ("Billing", "i was charged twice this month"),
               ("Account", "i cannot log in to my account"), ("Billing", "please cancel my subscription"),
               ("Delivery", "the tracking page shows no update"), ("Complaint", "the support chat keeps closing"),
               ("Account", "how do i change my password"), ("Billing", "can i get a refund for the late order"))
_ONE_NAME = (("Complaint", "i spoke to agent {} yesterday"), ("Account", "is mr {} still handling my case"))
_ONE_STREET = ("Delivery", "is there a depot on {}")
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "tr", "sh", "th")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io")
_FIRST_ENDS = ("", "n", "l", "ra", "na", "th")
_LAST_ENDS = ("son", "berg", "ley", "ton", "wick", "more", "dal", "rin")
_STREET_SUFFIXES = ("street", "lane", "road", "avenue", "way")
_DOMAINS = ("mailbox.test", "postal.example", "inbox.test", "letters.example")


@dataclass(frozen=True)
class PlantedPii:
    """One planted item: its kind, its text as written in the tickets, and how many training tickets hold it."""

    kind: str
    text: str
    repeats: int


@dataclass(frozen=True)
class PiiCorpus:
    """The dataset, what was planted in it, and the name and street pools of the generator."""

    dataset: NLUDataset
    planted: tuple[PlantedPii, ...]
    first_names: tuple[str, ...]
    last_names: tuple[str, ...]
    streets: tuple[str, ...]

    def detectors(self) -> list:
        """The default regex detectors and a name detector over this corpus's name pools."""
        return [*resolve_detectors(["phone", "email", "card"]), AddressDetector(),
                NameListDetector(self.first_names, self.last_names)]

    seed: int = 0
    digits: str = "spaced"

    def without(self, items: Iterable[PlantedPii]) -> NLUDataset:
        """A control: the same tickets, but each occurrence of ``items`` replaced by a fresh item of its kind.

        The control model sees the same templates and as many PII items, never ``items``
        (each replacement is new and seen once), so the audit of ``items`` on it is the
        figure of a model that never trained on them.
        """
        gone = {(p.kind, p.text) for p in items}
        rng = random.Random(f"synthetic_pii:{self.seed}:control")
        maker = _Maker(rng, self.first_names, self.last_names, self.streets, self.digits == "spaced")
        maker.seen.update(p.text for p in self.planted)
        train = []
        for u in self.dataset.train:
            kinds = {t[2:] for t in u.tags if t.startswith("B-")}
            hit = [(k, text) for k, text in gone if k in kinds and f" {text} " in f" {u.text} "]
            if hit:
                kind, text = hit[0]
                start = next(i for i, t in enumerate(u.tags) if t == f"B-{kind}")
                fresh = maker.draw(kind).split()
                width = len(text.split())
                tokens = u.tokens[:start] + tuple(fresh) + u.tokens[start + width:]
                u = Utterance(tokens, spans_to_bio(len(tokens), [(start, start + len(fresh), kind)]), u.intent)
            train.append(u)
        return self.dataset.with_train(train, name=f"{self.dataset.name}-without{len(gone)}")

    def repeated(self, repeats: int) -> tuple[PlantedPii, ...]:
        return tuple(p for p in self.planted if p.repeats == repeats)


def _word(rng: random.Random, syllables: int, ends: Sequence[str]) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(ends)


def _pool(rng: random.Random, size: int, syllables: Sequence[int], ends: Sequence[str],
          taken: set[str]) -> tuple[str, ...]:
    out: list[str] = []
    while len(out) < size:
        word = _word(rng, rng.choice(syllables), ends)
        if word not in taken and len(word) > 3:
            taken.add(word)
            out.append(word)
    return tuple(out)


def _digits(rng: random.Random, n: int) -> str:
    return "".join(str(rng.randrange(10)) for _ in range(n))


class _Maker:
    """Draws distinct PII items of each kind."""

    def __init__(self, rng: random.Random, firsts, lasts, streets, spaced: bool) -> None:
        self.rng, self.firsts, self.lasts, self.streets, self.spaced = rng, firsts, lasts, streets, spaced
        self.seen: set[str] = set()

    def _spell(self, digits: str, groups: Sequence[int]) -> str:
        if self.spaced:
            return " ".join(digits)
        out, at = [], 0
        for g in groups:
            out.append(digits[at:at + g])
            at += g
        return "-".join(out)

    def draw(self, kind: str) -> str:
        while True:
            r = self.rng
            if kind == "phone":
                text = self._spell(_digits(r, 10), (3, 3, 4))
            elif kind == "name":
                text = f"{r.choice(self.firsts)} {r.choice(self.lasts)}"
            elif kind == "email":
                text = f"{r.choice(self.firsts)}.{r.choice(self.lasts)}@{r.choice(_DOMAINS)}"
            elif kind == "address":
                number = str(r.randrange(100, 1000))
                text = f"{' '.join(number) if self.spaced else number} {r.choice(self.streets)}"
            else:
                raise ValueError(f"kinds: unknown PII kind {kind!r}; known: {', '.join(PII_KINDS)}")
            if text not in self.seen:
                self.seen.add(text)
                return text


def _ticket(template: tuple[str, str], item: str, kind: str | None) -> Utterance:
    intent, text = template
    before, _, after = text.partition("{}")
    tokens = before.split() + item.split() + after.split()
    spans = [] if kind is None else [(len(before.split()), len(before.split()) + len(item.split()), kind)]
    return Utterance(tuple(tokens), spans_to_bio(len(tokens), spans), intent)


def _check_int(arg: str, value, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
    return value


def generate_pii_corpus(seed: int = 0, *, repeats: Sequence[int] = PAPER_STYLE_REPEATS, items_per_repeat: int = 4,
                        kinds: Sequence[str] = PII_KINDS, n_background: int = 400, n_valid: int = 100,
                        pool_size: int = 24, digits: str = "spaced") -> PiiCorpus:
    """The corpus (see the module docstring); the same arguments give the same content.

    Validation tickets hold fresh items seen once (never in training) and
    background tickets, so early stopping sees unseen PII as a real split would.
    """
    _check_int("seed", seed, 0)
    _check_int("items_per_repeat", items_per_repeat, 1)
    _check_int("n_background", n_background, 0)
    _check_int("n_valid", n_valid, 0)
    _check_int("pool_size", pool_size, 2)
    if isinstance(repeats, (str, int)) or not repeats:
        raise ValueError(f"repeats must be a non-empty list of integers >= 1, got {repeats!r}; fix: e.g. (1, 10, 50)")
    for r in repeats:
        _check_int("repeats entries", r, 1)
    if isinstance(kinds, str) or not kinds or any(k not in PII_KINDS for k in kinds):
        raise ValueError(f"kinds must be a non-empty list of {PII_KINDS}, got {kinds!r}")
    if digits not in ("spaced", "compact"):
        raise ValueError(f"digits must be 'spaced' or 'compact', got {digits!r}")
    rng = random.Random(f"synthetic_pii:{seed}")
    taken = {w for _, t in (*_BACKGROUND, *_ONE_NAME, _ONE_STREET, *(x for v in _TEMPLATES.values() for x in v))
             for w in t.split()}
    firsts = _pool(rng, pool_size, (2,), _FIRST_ENDS, taken)
    lasts = _pool(rng, pool_size, (2,), _LAST_ENDS, taken)
    streets = tuple(f"{w} {rng.choice(_STREET_SUFFIXES)}" for w in _pool(rng, pool_size // 2, (2,), ("",), taken))
    maker = _Maker(rng, firsts, lasts, streets, digits == "spaced")
    planted: list[PlantedPii] = []
    train: list[Utterance] = []
    for kind in kinds:
        for r in repeats:
            for _ in range(items_per_repeat):
                item = maker.draw(kind)
                planted.append(PlantedPii(kind, item, r))
                train += [_ticket(rng.choice(_TEMPLATES[kind]), item, kind) for _ in range(r)]
    # every pool name and street once on its own (no PII), so a word-level model can spell every candidate
    train += [_ticket(_ONE_NAME[0], name, None) for name in firsts]
    train += [_ticket(_ONE_NAME[1], name, None) for name in lasts]
    train += [_ticket(_ONE_STREET, street, None) for street in streets]
    train += [_ticket(rng.choice(_BACKGROUND), "", None) for _ in range(n_background)]
    rng.shuffle(train)
    valid = []
    for i in range(n_valid):
        kind = kinds[i % len(kinds)]
        valid.append(_ticket(rng.choice(_TEMPLATES[kind]), maker.draw(kind), kind) if i % 2 else
                     _ticket(rng.choice(_BACKGROUND), "", None))
    name = f"synthetic_pii(seed={seed}, repeats={tuple(repeats)}, digits={digits})"
    return PiiCorpus(NLUDataset(tuple(train), tuple(valid), (), name=name), tuple(planted), firsts, lasts, streets,
                     seed, digits)
