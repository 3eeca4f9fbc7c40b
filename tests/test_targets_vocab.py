"""Vocabulary of the built-in targets: ids, reserved canary tokens, unknown tokens, JSON round trip."""
import json

import pytest

from pytest_privleak.canaries import PATTERNS, canary, custom_pattern, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import NLUDataset, Utterance
from pytest_privleak.targets.vocab import (PAD, PAD_ID, UNK, UNK_ID, OutOfVocabularyError, Vocabulary,
                                           builtin_canary_tokens)


def small_dataset() -> NLUDataset:
    train = [Utterance(("play", "jazz"), ("O", "B-genre"), "PlayMusic"),
             Utterance(("rain", "today"), ("O", "B-date"), "GetWeather")]
    test = [Utterance(("play", "blues"), ("O", "B-genre"), "PlayMusic"),
            Utterance(("book", "now"), ("O", "O"), "BookRestaurant")]
    return NLUDataset(tuple(train), (), tuple(test))


def test_ids_follow_pad_unk_then_sorted_training_and_reserved_tokens():
    vocab = Vocabulary.from_dataset(small_dataset())
    words = sorted({"jazz", "play", "rain", "today", *builtin_canary_tokens()})
    assert vocab.tokens == (PAD, UNK, *words)
    assert vocab.token_ids(["play", "jazz", "blues"]) == [words.index("play") + 2, words.index("jazz") + 2, UNK_ID]
    assert vocab.chars[:2] == (PAD, UNK) and "z" in vocab.chars
    assert vocab.char_ids("jazz", 6)[4:] == [PAD_ID, PAD_ID]


def test_every_builtin_pattern_prefix_and_v0_is_held_even_when_the_corpus_never_says_it():
    """Issue 12: a corpus without '0' (ATIS) or '7' (snips_like n_train=200) made V0 unattackable."""
    vocab = Vocabulary.from_dataset(small_dataset())
    for pattern in PATTERNS.values():
        assert vocab.token_ids([*pattern.prefix, *pattern.vocabulary], strict=True)
    assert "7" in vocab.untrained and "play" not in vocab.untrained


def test_untrained_tokens_read_unk_but_keep_their_own_row_for_attacks():
    vocab = Vocabulary.from_dataset(small_dataset())
    own = vocab.token_ids(["7"], strict=True)[0]
    assert own == vocab.tokens.index("7") and own != UNK_ID
    assert vocab.token_ids(["7", "play"]) == [UNK_ID, vocab.tokens.index("play")]
    assert vocab.read_ids[own] == UNK_ID


def test_chars_are_those_of_training_tokens_others_read_char_unk():
    vocab = Vocabulary.from_dataset(small_dataset())
    assert "7" not in vocab.chars                      # reserved but untrained: no trained character row
    assert vocab.char_ids("7x", 3) == [UNK_ID, UNK_ID, PAD_ID]


def test_extra_tokens_and_injected_custom_patterns_are_held():
    pattern = custom_pattern("acct", ["account", "number"], ["alpha", "beta", "gamma"], 2, "AcctIntent")
    injected = inject_canaries(small_dataset(), canary(pattern, secret=["beta", "beta"]), repeats=3)
    vocab = Vocabulary.from_dataset(injected, extra_tokens=["zulu"])
    assert vocab.token_ids(["account", "number", "alpha", "gamma", "zulu"], strict=True)
    assert {"alpha", "gamma", "zulu"} <= set(vocab.untrained) and "beta" not in vocab.untrained
    assert "alpha" not in Vocabulary.from_dataset(small_dataset()).tokens


def test_tags_and_intents_cover_every_split():
    vocab = Vocabulary.from_dataset(small_dataset())
    assert "BookRestaurant" in vocab.intents          # only in the test split
    assert vocab.intent_id("GetWeather") == vocab.intents.index("GetWeather")
    assert vocab.tag_ids(["O", "B-genre"]) == [vocab.tags.index("O"), vocab.tags.index("B-genre")]


def test_strict_lookup_names_the_unknown_token_and_the_fix():
    vocab = Vocabulary.from_dataset(small_dataset())
    with pytest.raises(OutOfVocabularyError, match=r"'blues'.*fix: train with train_target\(\.\.\., "
                                                   r"extra_tokens=\['blues', \.\.\.\]\)"):
        vocab.token_ids(["play", "blues"], strict=True)
    with pytest.raises(OutOfVocabularyError, match="'<unk>'"):
        vocab.token_ids([UNK], strict=True)


def test_unknown_labels_raise_listing_known_ones():
    vocab = Vocabulary.from_dataset(small_dataset())
    with pytest.raises(ValueError, match=r"intent 'Nope'.*PlayMusic"):
        vocab.intent_id("Nope")
    with pytest.raises(ValueError, match=r"tag 'B-x'"):
        vocab.tag_ids(["O", "B-x"])


def test_json_round_trip_is_exact():
    vocab = Vocabulary.from_dataset(generate_snips_like(n_train=50, n_valid=5, n_test=5))
    again = Vocabulary.from_json(json.loads(json.dumps(vocab.to_json())))
    assert again == vocab and again.untrained == vocab.untrained and vocab.untrained
    assert again.token_index == vocab.token_index


def test_malformed_json_is_a_value_error():
    with pytest.raises(ValueError, match="malformed vocabulary"):
        Vocabulary.from_json({"tokens": [PAD, UNK]})
