"""Vocabulary of the built-in targets: ids, unknown tokens, JSON round trip."""
import json

import pytest

from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import NLUDataset, Utterance
from pytest_privleak.targets.vocab import PAD, PAD_ID, UNK, UNK_ID, OutOfVocabularyError, Vocabulary


def small_dataset() -> NLUDataset:
    train = [Utterance(("play", "jazz"), ("O", "B-genre"), "PlayMusic"),
             Utterance(("rain", "today"), ("O", "B-date"), "GetWeather")]
    test = [Utterance(("play", "blues"), ("O", "B-genre"), "PlayMusic"),
            Utterance(("book", "now"), ("O", "O"), "BookRestaurant")]
    return NLUDataset(tuple(train), (), tuple(test))


def test_ids_follow_pad_unk_then_sorted_training_tokens():
    vocab = Vocabulary.from_dataset(small_dataset())
    assert vocab.tokens == (PAD, UNK, "jazz", "play", "rain", "today")
    assert vocab.token_ids(["play", "jazz", "blues"]) == [3, 2, UNK_ID]
    assert vocab.chars[:2] == (PAD, UNK) and "z" in vocab.chars
    assert vocab.char_ids("jazz", 6)[4:] == [PAD_ID, PAD_ID]


def test_tags_and_intents_cover_every_split():
    vocab = Vocabulary.from_dataset(small_dataset())
    assert "BookRestaurant" in vocab.intents          # only in the test split
    assert vocab.intent_id("GetWeather") == vocab.intents.index("GetWeather")
    assert vocab.tag_ids(["O", "B-genre"]) == [vocab.tags.index("O"), vocab.tags.index("B-genre")]


def test_strict_lookup_names_the_unknown_token_and_the_fix():
    vocab = Vocabulary.from_dataset(small_dataset())
    with pytest.raises(OutOfVocabularyError, match=r"'blues'.*inject the canary"):
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
    assert again == vocab
    assert again.token_index == vocab.token_index


def test_malformed_json_is_a_value_error():
    with pytest.raises(ValueError, match="malformed vocabulary"):
        Vocabulary.from_json({"tokens": [PAD, UNK]})
