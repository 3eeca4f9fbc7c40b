"""A deterministic Snips-like corpus, so tests and the sample project need no download.

Seven intents as in Snips (Coucke et al. 2018, the corpus of
canary-extraction-nlu §4.3), each with slot templates; templates and slot
values are data files in ``fixtures/snips_like/`` (all invented or generic
English).  Template syntax: literal words are tagged ``O``; ``{slot}`` draws a
value from the list ``slot`` and tags it ``B-slot I-slot ...``; ``{slot=list}``
draws from ``list`` but tags it ``slot``.

Each split is drawn from its own seeded stream (Python's ``random.Random``,
whose integer draws are stable across versions), so a split's content depends
only on the seed and its own size.
"""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path

from .bio import spans_to_bio
from .paths import fixtures_dir
from .types import NLUDataset, Utterance

SNIPS_INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic",
                 "RateBook", "SearchCreativeWork", "SearchScreeningEvent")
_PLACEHOLDER = re.compile(r"^\{([A-Za-z_]+)(?:=([A-Za-z_]+))?\}$")

# A compiled template: a tuple of parts, each a literal word (str) or (slot, value list name).
Template = tuple[object, ...]


def _load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read corpus data file {path}: {exc}") from None
    return {k: v for k, v in data.items() if not k.startswith("_")}


@lru_cache(maxsize=4)
def load_grammar(directory: Path | None = None) -> tuple[dict[str, tuple[Template, ...]], dict[str, tuple[str, ...]]]:
    """Read and check ``templates.json`` and ``slot_values.json``; returns (templates, values)."""
    directory = Path(directory) if directory else fixtures_dir() / "snips_like"
    raw_templates = _load_json(directory / "templates.json")
    values = {name: tuple(items) for name, items in _load_json(directory / "slot_values.json").items()}
    templates: dict[str, tuple[Template, ...]] = {}
    for intent, texts in raw_templates.items():
        compiled = []
        for text in texts:
            parts: list[object] = []
            for word in text.split():
                match = _PLACEHOLDER.match(word)
                if word.startswith("{") and not match:
                    raise ValueError(f"{directory / 'templates.json'}: bad placeholder {word!r} in {intent!r}: "
                                     f"{text!r}; fix: write {{slot}} or {{slot=list}}")
                if match:
                    slot, source = match.group(1), match.group(2) or match.group(1)
                    if source not in values:
                        raise ValueError(f"{directory / 'templates.json'}: {intent!r} template {text!r} uses "
                                         f"unknown value list {source!r}; fix: add it to slot_values.json")
                    parts.append((slot, source))
                else:
                    parts.append(word)
            compiled.append(tuple(parts))
        templates[intent] = tuple(compiled)
    return templates, values


def _realise(template: Template, values: dict[str, tuple[str, ...]], rng: random.Random, intent: str) -> Utterance:
    tokens: list[str] = []
    spans: list[tuple[int, int, str]] = []
    for part in template:
        if isinstance(part, str):
            tokens.append(part)
            continue
        slot, source = part
        words = values[source][rng.randrange(len(values[source]))].split()
        spans.append((len(tokens), len(tokens) + len(words), slot))
        tokens.extend(words)
    return Utterance(tuple(tokens), spans_to_bio(len(tokens), spans), intent)


def reserve_unseen(values: dict[str, tuple[str, ...]], share: float, seed: int
                   ) -> dict[str, tuple[str, ...]]:
    """The value lists the training split draws from when a ``share`` of each is kept for valid/test.

    Real NLU splits (Snips among them) have entities in validation and test
    that training never saw; a model that memorises its training entities then
    does worse on them, so its validation loss turns while training loss still
    falls (which early stopping, canary-extraction-nlu §6, needs). From each
    list, ``floor(share * len)`` values are withheld from training, chosen with
    ``seed``; values containing a digit are never withheld, so every digit
    stays in the training vocabulary (digit canaries' V0), and each list keeps
    at least one value.
    """
    if share == 0.0:
        return values
    seen: dict[str, tuple[str, ...]] = {}
    for name, items in values.items():
        rng = random.Random(f"snips_like:{seed}:unseen:{name}")
        candidates = [v for v in items if not any(c.isdigit() for c in v)]
        k = min(int(share * len(items)), len(items) - 1, len(candidates))
        withheld = set(rng.sample(candidates, k)) if k > 0 else set()
        seen[name] = tuple(v for v in items if v not in withheld)
    return seen


def _split(n: int, seed: int, split: str, templates, values, namespace: str = "snips_like") -> tuple[Utterance, ...]:
    """``n`` utterances of ``split`` drawn from the grammar, seeded by ``namespace``, ``seed`` and ``split``."""
    rng = random.Random(f"{namespace}:{seed}:{split}")
    intents = sorted(templates)
    out = []
    for _ in range(n):
        intent = intents[rng.randrange(len(intents))]
        options = templates[intent]
        out.append(_realise(options[rng.randrange(len(options))], values, rng, intent))
    return tuple(out)


def generate_snips_like(n_train: int = 1500, n_valid: int = 200, n_test: int = 300, seed: int = 0, *,
                        unseen_share: float = 0.0) -> NLUDataset:
    """A Snips-like dataset of 7 intents with BIO slot tags; the same seed gives the same content.

    Intents and templates are drawn uniformly; sizes are per split.  The
    default (1500/200/300) is sized for CI training on CPU (issue 2: about
    1-2k utterances).  ``unseen_share`` in [0, 1): the share of each slot
    value list that only valid and test draw from (:func:`reserve_unseen`);
    valid and test draw from every value, as real splits mix seen and unseen
    entities.
    """
    for arg, value, low in (("n_train", n_train, 1), ("n_valid", n_valid, 0), ("n_test", n_test, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not isinstance(unseen_share, (int, float)) or isinstance(unseen_share, bool) \
            or not 0.0 <= unseen_share < 1.0:
        raise ValueError(f"unseen_share must be a number in [0, 1), got {unseen_share!r}")
    templates, values = load_grammar()
    train_values = reserve_unseen(values, float(unseen_share), seed)
    splits = [_split(n, seed, split, templates, train_values if split == "train" else values)
              for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test))]
    name = f"snips_like(seed={seed})" if not unseen_share else f"snips_like(seed={seed}, unseen_share={unseen_share})"
    return NLUDataset(*splits, name=name)
