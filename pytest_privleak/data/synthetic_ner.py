"""A deterministic synthetic NER corpus (PER / ORG / LOC) for d-exposure tests, no download needed.

Stands in for CoNLL-2003 (d-exposure-discriminative §4.1): sentences from the
templates in ``fixtures/ner_like/templates.json`` filled with invented
one-word entities from ``fixtures/ner_like/entities.json``, tagged in BIO
(``B-PER`` is the paper's ``S-PER``).  A few *ambiguous* words ("Williams",
"Chelsea", "Melbourne", "Jordan") are drawn under several classes with equal
odds, like the paper's Table 2 entities, so that they are candidates for the
inserted word ``s`` of eq. 2; every other entity word belongs to one class
only (the paper's ``|C_i|`` "exclusive" words).

Each placeholder of class ``C`` draws uniformly from ``C``'s own words plus
the ambiguous words listed under ``C``; each split has its own seeded
``random.Random`` stream, so the content depends only on the seed and sizes.
"""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path

from .conll import NER_INTENT
from .paths import fixtures_dir
from .types import NLUDataset, Utterance

NER_CLASSES = ("PER", "ORG", "LOC")
_SLOT = re.compile(r"^\{(PER|ORG|LOC)\}$")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read NER corpus data file {path}: {exc}") from None


@lru_cache(maxsize=4)
def load_ner_grammar(directory: Path | None = None) -> tuple[tuple[tuple[str, ...], ...], dict[str, tuple[str, ...]],
                                                             dict[str, tuple[str, ...]]]:
    """``(templates, words per class including ambiguous ones, ambiguous word -> classes)``, checked."""
    directory = Path(directory) if directory else fixtures_dir() / "ner_like"
    entities = _read(directory / "entities.json")
    templates = tuple(tuple(t.split()) for t in _read(directory / "templates.json")["templates"])
    for t in templates:
        for word in t:
            if word.startswith("{") and not _SLOT.match(word):
                raise ValueError(f"{directory / 'templates.json'}: bad placeholder {word!r} in {' '.join(t)!r}; "
                                 "use {PER}, {ORG} or {LOC}")
    ambiguous = {w: tuple(classes) for w, classes in entities["ambiguous"].items()}
    words = {c: tuple(entities[c]) + tuple(w for w, cs in ambiguous.items() if c in cs) for c in NER_CLASSES}
    seen: dict[str, str] = {}
    for c in NER_CLASSES:
        for w in entities[c]:
            if w in seen or w in ambiguous:
                raise ValueError(f"{directory / 'entities.json'}: {w!r} is listed under {seen.get(w, 'ambiguous')} "
                                 f"and {c}; fix: list a shared word only under 'ambiguous'")
            seen[w] = c
    return templates, words, ambiguous


def _sentence(template: tuple[str, ...], words: dict[str, tuple[str, ...]], rng: random.Random) -> Utterance:
    tokens, tags = [], []
    for part in template:
        match = _SLOT.match(part)
        if match:
            cls = match.group(1)
            tokens.append(words[cls][rng.randrange(len(words[cls]))])
            tags.append(f"B-{cls}")
        else:
            tokens.append(part)
            tags.append("O")
    return Utterance(tuple(tokens), tuple(tags), NER_INTENT)


def generate_ner_like(n_train: int = 1000, n_valid: int = 100, n_test: int = 100, seed: int = 0) -> NLUDataset:
    """The synthetic NER corpus; the same seed and sizes give the same content."""
    for arg, value, low in (("n_train", n_train, 1), ("n_valid", n_valid, 0), ("n_test", n_test, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    templates, words, _ = load_ner_grammar()
    splits = []
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        rng = random.Random(f"ner_like:{seed}:{split}")
        splits.append(tuple(_sentence(templates[rng.randrange(len(templates))], words, rng) for _ in range(n)))
    return NLUDataset(*splits, name=f"ner_like(seed={seed})")


def ambiguous_words() -> dict[str, tuple[str, ...]]:
    """Ambiguous word -> the classes it appears under in the corpus."""
    return dict(load_ner_grammar()[2])
