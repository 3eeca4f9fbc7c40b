"""The Snips-like generator: deterministic, 7 intents, valid BIO, digits present, sizes honoured."""
import json
from collections import Counter

import pytest

from pytest_privleak.data import SNIPS_INTENTS, fixtures_dir, generate_snips_like, validate_bio
from pytest_privleak.data.synthetic import load_grammar


@pytest.fixture(scope="module")
def corpus():
    return generate_snips_like()


def test_default_sizes_and_intents(corpus):
    assert corpus.sizes == {"train": 1500, "valid": 200, "test": 300}
    assert corpus.intents == tuple(sorted(SNIPS_INTENTS)) and len(corpus.intents) == 7
    per_intent = Counter(u.intent for u in corpus.train)
    assert min(per_intent.values()) > 1500 / 7 * 0.7  # every intent well represented


def test_same_seed_same_content_different_seed_different():
    a, b, c = (generate_snips_like(300, 50, 50, seed=s) for s in (1, 1, 2))
    assert a == b and a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()


def test_splits_are_independent_streams():
    small, large = generate_snips_like(100, 20, 20), generate_snips_like(200, 20, 20)
    assert large.train[:100] == small.train and large.valid == small.valid


def test_every_utterance_valid_bio_with_slots(corpus):
    for u in corpus.all_utterances():
        validate_bio(u.tags)
    slot_tags = [t for u in corpus.train for t in u.tags if t != "O"]
    assert len(slot_tags) > 0.3 * sum(len(u.tags) for u in corpus.train)
    assert {"B-artist", "B-city", "I-time_range", "B-rating_value", "B-party_size_number"} <= set(corpus.tag_set)


def test_digits_occur_naturally_but_rarely(corpus):
    counts = Counter(t for u in corpus.train for t in u.tokens)
    digits = [d for d in "0123456789" if counts[d]]
    assert len(digits) >= 8
    assert sum(counts[d] for d in "0123456789") < 0.05 * sum(counts.values())


def test_grammar_files_live_under_top_level_fixtures():
    folder = fixtures_dir() / "snips_like"
    assert folder.parent.name == "fixtures" and folder.parent.parent.joinpath("pytest_privleak").is_dir()
    templates = json.loads((folder / "templates.json").read_text())
    assert set(templates) - {"_comment"} == set(SNIPS_INTENTS)
    compiled, values = load_grammar()
    assert all(len(compiled[i]) >= 8 for i in SNIPS_INTENTS)


@pytest.mark.parametrize("kwargs", [{"n_train": 0}, {"n_valid": -1}, {"seed": "x"}, {"n_test": 1.5}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        generate_snips_like(**kwargs)


def test_unseen_share_withholds_values_from_training_only():
    from pytest_privleak.data.synthetic import generate_snips_like as gen

    plain = gen(300, 100, 100, seed=0)
    realistic = gen(300, 100, 100, seed=0, unseen_share=0.5)
    assert gen(300, 100, 100, seed=0, unseen_share=0.0).content_hash() == plain.content_hash()
    assert gen(300, 100, 100, seed=0, unseen_share=0.5).content_hash() == realistic.content_hash()
    train_vocab = set(realistic.vocabulary)
    held_out = {t for u in realistic.test + realistic.valid for t in u.tokens} - train_vocab
    assert held_out, "valid/test must contain words never seen in training"
    assert set("0123456789") <= {t for u in gen(1500, 10, 10, seed=0, unseen_share=0.5).train for t in u.tokens}
    plain_unseen = {t for u in plain.test + plain.valid for t in u.tokens} - set(plain.vocabulary)
    assert len(held_out) > 2 * len(plain_unseen)


def test_unseen_share_rejects_bad_values():
    import pytest

    from pytest_privleak.data.synthetic import generate_snips_like as gen

    for bad in (-0.1, 1.0, 2):
        with pytest.raises(ValueError, match="unseen_share"):
            gen(50, 10, 10, unseen_share=bad)
