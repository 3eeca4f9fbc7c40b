"""Issue 21 item 2: word dropout hides memorisation, so the undefended default must not carry it.

On a real joint intent + slot corpus of 13k utterances, a pin said 10 times
ranked 14 of 10^4 with the old default ``unk_alpha=0.25`` and 1 with
``unk_alpha=0``. The bundled corpus does not show it (its pins rank first
either way, README defence table); a generated corpus with a real-sized
vocabulary does: :func:`generate_large_vocabulary_corpus` below, the bundled
Snips-like grammar with long generated entity lists (8000 training
utterances: 4606 word types, 1589 of them said once; real Snips has about
11k types for 13k utterances) and digits in five intents (four digit templates
added to the grammar's party sizes, ratings and times). Measured there (README): pins said 10
times, each in its own model, rank 4, 1563 and 13 with
``unk_alpha=0.25`` and 1, 1, 1 with ``unk_alpha=0``.

The test checks, over three pins each in its own model (the paper's §4.3
protocol), that the default target ranks its pin first as often as the paper's
model (``unk_alpha=0``), and, so that it can fail, that word dropout ranks it
first less often on this corpus.
"""
import random

import pytest
import torch

from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import _split, load_grammar, reserve_unseen
from pytest_privleak.data.types import NLUDataset
from pytest_privleak.targets import train_target
from pytest_privleak.targets.unk_training import WORD_DROPOUT_ALPHA

_ONSETS = ("b", "br", "c", "ch", "d", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "r", "s", "sh", "st", "t",
           "tr", "v", "w", "z")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ee")
_CODAS = ("", "", "n", "r", "l", "s", "k", "m", "nd", "st")
#: Value lists extended with generated names (artists, cities, dishes, ...).
ENTITY_LISTS = ("artist", "album", "track", "playlist", "object_name", "movie_name", "restaurant_name", "city",
                "entity_name", "location_name", "served_dish", "cuisine")
#: Digits in four intents, with tags of their own (party size, rating, times, track numbers).
DIGIT_TEMPLATES = {
    "BookRestaurant": ["book a table for {party_size_number=digit} at {restaurant_name} at {digit} {digit} pm",
                       "call {restaurant_name} on {digit} {digit} {digit} {digit} to book for "
                       "{party_size_number=digit}"],
    "RateBook": ["rate {object_name} {rating_value=digit} out of {best_rating=digit}",
                 "give chapter {digit} {digit} of {object_name} {rating_value=digit} stars"],
    "PlayMusic": ["play track {digit} {digit} from {album}", "play the top {digit} {digit} songs of {year_digits}"],
    "SearchScreeningEvent": ["find showtimes for {movie_name} at {digit} {digit} pm",
                             "is {movie_name} playing in room {digit} {digit}"],
}


def _name_word(rng: random.Random) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 3)))


def _grammar(seed: int, names_per_list: int):
    templates, values = load_grammar()
    templates = {k: list(v) for k, v in templates.items()}
    values = dict(values)
    rng = random.Random(f"issue21-big:{seed}")
    for name in ENTITY_LISTS:
        extra = {" ".join(_name_word(rng) for _ in range(rng.randint(1, 2))) for _ in range(names_per_list)}
        values[name] = tuple(values[name]) + tuple(sorted(extra))
    values["digit"] = tuple(str(d) for d in range(10))
    values["year_digits"] = tuple(" ".join(str(y)) for y in range(1950, 2025))
    for intent, texts in DIGIT_TEMPLATES.items():
        for text in texts:
            parts = []
            for word in text.split():
                if word.startswith("{"):
                    slot, _, source = word[1:-1].partition("=")
                    parts.append((slot, source or slot))
                else:
                    parts.append(word)
            templates[intent].append(tuple(parts))
    return {k: tuple(v) for k, v in templates.items()}, values


def _draw(n: int, seed: int, split: str, templates, values):
    return _split(n, seed, split, templates, values, namespace="issue21-big")


def generate_large_vocabulary_corpus(n_train: int, seed: int = 0, names_per_list: int = 600,
                                     unseen_share: float = 0.3) -> NLUDataset:
    """The Snips-like grammar with ``names_per_list`` generated names per entity list and digit templates."""
    templates, values = _grammar(seed, names_per_list)
    train_values = reserve_unseen(values, unseen_share, seed)
    n_small = max(n_train // 8, 50)
    splits = [_draw(n, seed, split, templates, train_values if split == "train" else values)
              for split, n in (("train", n_train), ("valid", n_small), ("test", n_small))]
    return NLUDataset(*splits, name=f"large-vocabulary(seed={seed}, n={n_train})")


def test_the_large_vocabulary_corpus_has_a_real_sized_vocabulary_and_digits_in_several_intents():
    from collections import Counter

    data = generate_large_vocabulary_corpus(8000)
    counts = Counter(t for u in data.train for t in u.tokens)
    assert len(counts) == 4606 and sum(n == 1 for n in counts.values()) == 1589    # the corpus measured
    said = {u.intent for u in data.train if any(t.isdigit() for t in u.tokens)}
    assert len(said) == 5 and min(counts[str(d)] for d in range(10)) == 325


@pytest.mark.slow   # 6 trainings of 8000 utterances (unk_alpha=0 is a cache hit): 720 s on 2 shared cores
def test_default_target_extracts_a_pin_said_10_times_as_often_as_the_papers_model(tmp_path):
    torch.set_num_threads(1)
    base = generate_large_vocabulary_corpus(8000)
    pins = [canary("pin", seed=s) for s in (21, 22, 23)]
    cache = TargetCache(tmp_path)
    models = {"default": [], "paper": [], "word dropout": []}
    for pin in pins:
        data = inject_canaries(base, pin, repeats=10)
        for label, config in (("default", {}), ("paper", {"unk_alpha": 0.0}),
                              ("word dropout", {"unk_alpha": WORD_DROPOUT_ALPHA})):
            models[label].append(train_target("joint-bilstm-crf", data, cache=cache, seed=0, progress=False,
                                              **config))
    ranks = {label: extract(ms, pins, method="exhaustive", budget=None).ranks for label, ms in models.items()}
    first = {label: sum(r == 1 for r in rs) for label, rs in ranks.items()}
    assert first["word dropout"] < first["paper"], \
        f"word dropout does not change the outcome on this corpus ({ranks}); the test says nothing"
    assert first["default"] == first["paper"], ranks
