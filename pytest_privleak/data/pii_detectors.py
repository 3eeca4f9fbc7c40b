"""Detectors of personally identifiable information (PII) in training text, and a registry of them.

Lukas et al. 2023 ("Analyzing leakage of personally identifiable information in
language models", IEEE S&P, §3) tag the PII of a training set with a named-entity
tagger before measuring its extraction; this module gives the same first step
with small, readable detectors the user can extend, and Microsoft Presidio when
it is installed.

A detector is anything with a ``kind`` (a short name: ``"phone"``) and
``find(text) -> spans``, a span being ``(start, end)`` character offsets or a
:class:`PiiSpan`; it may add ``candidates(item_text) -> CandidateSpace``, the
strings of the same format its item is ranked against (:mod:`.pii_candidates`).
``register_detector(name, factory)`` adds one to the registry that
``resolve_detectors`` reads names from.

What the built-in detectors cover
---------------------------------
- ``phone``: a run of 10 to 12 digits (or 8 to 15 after a ``+``) joined by at
  most one of space, dot, dash or a parenthesis between digits:
  ``555-014-2773``, ``(555) 014 2773``, ``+44 20 7946 0958``, and digits
  spelled one by one, ``5 5 5 0 1 4 2 7 7 3``, as a word-level model reads them.
  Candidates: the same string with every digit free (``10^d``).
- ``email``: ``local@domain.tld`` with the usual characters. Candidates: the
  other addresses found in the same data (no generator knows the space of
  addresses; the figure's ceiling is ``log2`` of their number).
- ``card``: a run of 13 to 19 digits (same separators) that passes the Luhn
  check. Candidates: the same format, free digits, Luhn check digit (``10^(d-1)``).
- ``address``: a house number of 1 to 5 digits (spaced digits too), one to three
  words and a street suffix (street, st, avenue, road, lane, drive, way, ...).
  Candidates: the house number's digits free, the street kept (or every street
  of ``AddressDetector(streets=[...])``).
- ``name`` (:class:`NameListDetector`, needs your lists): a first name followed
  by a last name, both from the lists given, matched case-insensitively.
  Candidates: every ``first x last`` of the lists.

What they miss
--------------
Names not on the lists and names without a last name; numbers written in words
("five five five"), split across lines or with two separators in a row; phone
numbers shorter than 10 digits (local 7-digit numbers) and extensions; e-mail
addresses obfuscated ("anna at example dot com"); card numbers that fail the
Luhn check; addresses without a house number or suffix, post boxes, postcodes,
cities and countries; dates, ages, account and national ID numbers, IP
addresses. A digit run of 10 to 12 digits that is no phone number (an order
number) is flagged as one. Presidio (``presidio_detector()``) adds NER-based
names and locations when installed, with its own misses.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .pii_candidates import CandidateSpace, LuhnSpace, SlotSpace, digit_space, luhn_valid

__all__ = ["AddressDetector", "CardDetector", "DEFAULT_DETECTORS", "EmailDetector", "NameListDetector",
           "PhoneDetector", "PiiDetector", "PiiSpan", "PresidioDetector", "PresidioUnavailableError",
           "RegexDetector", "detector_names", "find_spans", "presidio_available", "presidio_detector",
           "register_detector", "resolve_detectors"]


@dataclass(frozen=True)
class PiiSpan:
    """``text[start:end]`` is PII of ``kind``; ``source`` names the detector that found it."""

    kind: str
    start: int
    end: int
    text: str
    source: str = ""


@runtime_checkable
class PiiDetector(Protocol):
    """Finds PII of one ``kind`` in a text; ``candidates(item)`` (optional) gives its same-format space."""

    kind: str

    def find(self, text: str) -> Sequence[Any]:
        """Spans ``(start, end)`` (or :class:`PiiSpan`) of the PII in ``text``."""


# --- regex detectors --------------------------------------------------------------------------

#: Digits joined by at most one separator (a closing or opening parenthesis may sit beside it).
_DIGIT_RUN = r"(?<![\w@.+\-])\+?\(?\d(?:\)?[ .\-]?\(?\d)*\)?(?![\w@]|[.\-]\w)"


class RegexDetector:
    """A detector of ``kind`` matching ``pattern``; ``accept(match text)`` filters the matches."""

    def __init__(self, kind: str, pattern: str | re.Pattern[str], *, flags: int = 0,
                 accept: Callable[[str], bool] | None = None) -> None:
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError(f"kind must be a non-empty string, got {kind!r}; fix: e.g. kind='employee_id'")
        self.kind = kind
        self.pattern = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
        self.accept = accept

    def find(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self.pattern.finditer(text) if self.accept is None or self.accept(m.group())]

    def candidates(self, item: str) -> CandidateSpace:
        """Every digit free, the rest kept (a detector of another format overrides this)."""
        return digit_space(item)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r})"


def _digit_count(text: str) -> int:
    return sum(c.isdigit() for c in text)


def _is_phone(text: str) -> bool:
    n = _digit_count(text)
    return 8 <= n <= 15 if text.startswith("+") else 10 <= n <= 12


class PhoneDetector(RegexDetector):
    """Phone numbers: 10-12 digits, or 8-15 after ``+``, with single separators (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("phone", _DIGIT_RUN, accept=_is_phone)


class CardDetector(RegexDetector):
    """Card-like numbers: 13-19 digits with single separators that pass the Luhn check."""

    def __init__(self) -> None:
        super().__init__("card", _DIGIT_RUN, accept=lambda t: 13 <= _digit_count(t) <= 19
                         and luhn_valid("".join(c for c in t if c.isdigit())))

    def candidates(self, item: str) -> CandidateSpace:
        return LuhnSpace(item)


class EmailDetector(RegexDetector):
    """E-mail addresses ``local@domain.tld``; candidates are the other addresses found (see ``pool``)."""

    def __init__(self) -> None:
        super().__init__("email", r"(?<![\w.%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
                                  r"\.[A-Za-z]{2,}(?![\w\-])")

    candidates = None   # no generator: the audit ranks an address among the others found (ListSpace)


STREET_SUFFIXES = ("street", "st", "avenue", "ave", "road", "rd", "lane", "ln", "drive", "dr", "boulevard",
                   "blvd", "way", "court", "ct", "place", "pl", "terrace", "close", "square", "crescent")


class AddressDetector(RegexDetector):
    """Street addresses: house number (1-5 digits, spaced digits too), 1-3 words, a street suffix."""

    def __init__(self, streets: Iterable[str] | None = None) -> None:
        suffix = "|".join(STREET_SUFFIXES)
        super().__init__("address", rf"(?<![\w\-])\d(?: ?\d){{0,4}} (?:[A-Za-z][A-Za-z'\-]* ){{1,3}}?"
                                    rf"(?:{suffix})\b\.?", flags=re.IGNORECASE)
        self.streets = None if streets is None else tuple(dict.fromkeys(str(s) for s in streets))

    def candidates(self, item: str) -> CandidateSpace:
        number = re.match(r"\d(?: ?\d)*", item).group()
        street = item[len(number):]
        parts: list[Any] = list(digit_space(number).parts)
        values = [c for c in number if c.isdigit()]
        if self.streets and street.strip() in self.streets:
            parts += [" ", self.streets]
            values.append(street.strip())
        else:
            parts.append(street)
        return SlotSpace(parts, values)


def _word_alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=lambda w: (-len(w), w)))


def _check_names(arg: str, names: Any) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ValueError(f"{arg} must be a list of names, not {type(names).__name__}; fix: e.g. "
                         f"{arg}=['Anna', 'Ravi']")
    items = tuple(names)
    bad = [n for n in items if not isinstance(n, str) or not n.strip() or any(c.isspace() for c in n.strip())]
    if not items or bad:
        raise ValueError(f"{arg} must be a non-empty list of one-word names, got {bad[:3] or 'an empty list'}; "
                         f"fix: e.g. {arg}=['Anna', 'Ravi']")
    return tuple(dict.fromkeys(n.strip() for n in items))


class NameListDetector(RegexDetector):
    """``first last`` with both names from the lists given, case-insensitive; candidates ``first x last``."""

    def __init__(self, first_names: Iterable[str], last_names: Iterable[str]) -> None:
        self.first_names = _check_names("first_names", first_names)
        self.last_names = _check_names("last_names", last_names)
        super().__init__("name", rf"(?<![\w\-])(?:{_word_alternation(self.first_names)}) "
                                 rf"(?:{_word_alternation(self.last_names)})(?![\w\-])", flags=re.IGNORECASE)
        self._first = {n.lower(): n for n in self.first_names}
        self._last = {n.lower(): n for n in self.last_names}

    def candidates(self, item: str) -> CandidateSpace:
        first, last = item.split(" ")
        case = str.lower if item == item.lower() else str.title if item == item.title() else str
        firsts = tuple(dict.fromkeys(case(n) for n in self.first_names))
        lasts = tuple(dict.fromkeys(case(n) for n in self.last_names))
        return SlotSpace([firsts, " ", lasts], [case(self._first[first.lower()]), case(self._last[last.lower()])])


# --- Presidio (optional) ------------------------------------------------------------------------

#: Presidio entity types and the kinds they map to (an unmapped type keeps its name, lower-cased).
PRESIDIO_KINDS = {"PHONE_NUMBER": "phone", "EMAIL_ADDRESS": "email", "CREDIT_CARD": "card", "PERSON": "name",
                  "LOCATION": "address"}


class PresidioUnavailableError(ImportError):
    """``presidio_detector()`` was asked for, but ``presidio_analyzer`` is not installed."""


def presidio_available() -> bool:
    """Whether ``presidio_analyzer`` can be imported (it is optional and never installed by this plugin)."""
    return importlib.util.find_spec("presidio_analyzer") is not None


class PresidioDetector:
    """Spans of a Presidio ``AnalyzerEngine`` (or anything with its ``analyze`` signature) as :class:`PiiSpan`.

    Each result's ``entity_type`` maps to a kind through :data:`PRESIDIO_KINDS`;
    results under ``score_threshold`` are dropped.
    """

    kind = "presidio"

    def __init__(self, analyzer: Any, *, language: str = "en", entities: Sequence[str] | None = None,
                 score_threshold: float = 0.5) -> None:
        if not callable(getattr(analyzer, "analyze", None)):
            raise TypeError(f"analyzer must be a presidio_analyzer.AnalyzerEngine (with analyze(text=..., "
                            f"language=...)), got {type(analyzer).__name__}; fix: presidio_detector() builds one")
        self.analyzer = analyzer
        self.language = language
        self.entities = None if entities is None else list(entities)
        self.score_threshold = float(score_threshold)

    def find(self, text: str) -> list[PiiSpan]:
        results = self.analyzer.analyze(text=text, language=self.language, entities=self.entities)
        spans = []
        for r in results:
            if float(getattr(r, "score", 1.0)) < self.score_threshold:
                continue
            kind = PRESIDIO_KINDS.get(r.entity_type, str(r.entity_type).lower())
            spans.append(PiiSpan(kind, int(r.start), int(r.end), text[int(r.start):int(r.end)], "presidio"))
        return spans


def presidio_detector(analyzer: Any = None, **options: Any) -> PresidioDetector:
    """A :class:`PresidioDetector` over ``analyzer`` (default: a new ``AnalyzerEngine``, when installed)."""
    if analyzer is None:
        if not presidio_available():
            raise PresidioUnavailableError(
                "presidio_analyzer is not installed, so no Presidio detector can be built; fix: pip install "
                "presidio-analyzer (and a spaCy model, e.g. python -m spacy download en_core_web_lg), or use "
                "the regex detectors (detectors='default')")
        from presidio_analyzer import AnalyzerEngine

        analyzer = AnalyzerEngine()
    return PresidioDetector(analyzer, **options)


# --- the registry -----------------------------------------------------------------------------

_REGISTRY: dict[str, Callable[[], Any]] = {"phone": PhoneDetector, "email": EmailDetector, "card": CardDetector,
                                           "address": AddressDetector}
#: What ``detectors="default"`` means: every built-in regex detector that needs no list.
DEFAULT_DETECTORS = ("phone", "email", "card", "address")


def register_detector(name: str, factory: Callable[[], Any]) -> None:
    """Make ``name`` usable in ``detectors=[...]``; ``factory()`` builds the detector."""
    if not isinstance(name, str) or not name.strip() or name == "default":
        raise ValueError(f"name must be a non-empty string other than 'default', got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (returning a detector), got {type(factory).__name__}")
    _REGISTRY[name] = factory


def detector_names() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def _check_detector(detector: Any, where: str) -> Any:
    missing = [a for a in ("kind", "find") if not hasattr(detector, a)]
    if missing or not callable(detector.find) or not isinstance(detector.kind, str) or not detector.kind:
        raise TypeError(f"{where} is {type(detector).__name__}, not a PII detector (it needs a non-empty str "
                        f"`kind` and a `find(text) -> spans` method; missing or wrong: {missing or ['kind']}); "
                        f"fix: pass a name ({', '.join(detector_names())}), a built-in detector such as "
                        "PhoneDetector(), or your own object with kind and find")
    return detector


def resolve_detectors(spec: Any = "default") -> list[Any]:
    """Detectors from ``"default"``, a registered name, a detector, or a list of these (in that order)."""
    items = [spec] if isinstance(spec, str) or not isinstance(spec, (list, tuple)) else list(spec)
    if not items:
        raise ValueError("detectors is empty; fix: detectors='default' or a list such as ['phone', 'email']")
    out: list[Any] = []
    for i, item in enumerate(items):
        where = "detectors" if len(items) == 1 and not isinstance(spec, (list, tuple)) else f"detectors[{i}]"
        if item == "default":
            out += [_REGISTRY[n]() for n in DEFAULT_DETECTORS]
        elif isinstance(item, str):
            if item not in _REGISTRY:
                raise ValueError(f"{where}: unknown detector {item!r}; known: 'default', "
                                 f"{', '.join(repr(n) for n in detector_names())}; fix: use one of these, pass a "
                                 "detector object, or register_detector(name, factory)")
            out.append(_REGISTRY[item]())
        else:
            out.append(_check_detector(item, where))
    return out


def _spans_of(detector: Any, text: str) -> list[PiiSpan]:
    found = detector.find(text)
    spans = []
    for i, span in enumerate(found):
        if isinstance(span, PiiSpan):
            start, end, kind = span.start, span.end, span.kind
        elif isinstance(span, (tuple, list)) and len(span) == 2:
            (start, end), kind = span, detector.kind
        else:
            raise TypeError(f"detector {detector!r} returned span {i} = {span!r}; fix: return (start, end) "
                            "character offsets or PiiSpan objects")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise ValueError(f"detector {detector!r} returned span ({start!r}, {end!r}) outside the text of "
                             f"{len(text)} characters; fix: return 0 <= start < end <= len(text)")
        spans.append(PiiSpan(kind, start, end, text[start:end], type(detector).__name__))
    return spans


def find_spans(text: str, detectors: Sequence[Any]) -> list[PiiSpan]:
    """The spans of every detector in ``text``, overlaps resolved (earliest first, then longest), sorted."""
    spans = [s for d in detectors for s in _spans_of(d, text)]
    spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
    kept: list[PiiSpan] = []
    for span in spans:
        if not kept or span.start >= kept[-1].end:
            kept.append(span)
    return kept
