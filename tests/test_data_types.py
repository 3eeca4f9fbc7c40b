"""Utterance / NLUDataset invariants and BIO validation."""
import os
import subprocess
import sys

import pytest

from pytest_privleak.data import BIOError, NLUDataset, Utterance, validate_bio


def utt(text, tags, intent="I"):
    return Utterance(tuple(text.split()), tuple(tags.split()), intent)


def test_utterance_text_and_list_inputs_become_tuples():
    u = Utterance(["play", "jazz"], ["O", "B-genre"], "PlayMusic")
    assert u.tokens == ("play", "jazz") and u.tags == ("O", "B-genre")
    assert u.text == "play jazz"


@pytest.mark.parametrize("tokens, tags, message", [
    (("a", "b"), ("O",), "2 tokens but 1 tags"),
    ((), (), "no tokens"),
    (("a b",), ("O",), "without whitespace"),
    (("a",), ("I-x",), "change it to 'B-x'"),
])
def test_utterance_rejects_bad_input(tokens, tags, message):
    with pytest.raises(ValueError, match=message):
        Utterance(tokens, tags, "I")


@pytest.mark.parametrize("tags", [(), ("O",), ("B-x", "I-x", "I-x", "O", "B-y"), ("B-x", "B-x", "I-x")])
def test_validate_bio_accepts(tags):
    validate_bio(tags)


@pytest.mark.parametrize("tags, position, fragment", [
    (("O", "I-x"), 1, "follows 'O'"),
    (("B-y", "I-x"), 1, "follows 'B-y'"),
    (("I-x",), 0, "follows the start"),
    (("O", "X-y"), 1, "not a BIO tag"),
    (("B-",), 0, "not a BIO tag"),
    (("O", "B-x\x00"), 1, "not a BIO tag"),          # a NUL in a slot name (accepted before issue 12)
    (("B-x\u2028y",), 0, "not a BIO tag"),
])
def test_validate_bio_rejects_with_position_and_fix(tags, position, fragment):
    with pytest.raises(BIOError) as info:
        validate_bio(tags)
    assert info.value.position == position
    assert fragment in str(info.value) and "fix:" in str(info.value)
    assert f"tag {position + 1} " in str(info.value)


def small_dataset(name="d"):
    return NLUDataset(
        train=(utt("play jazz", "O B-genre", "PlayMusic"), utt("rain in oslo", "B-cond O B-city", "GetWeather")),
        valid=(utt("play rock", "O B-genre", "PlayMusic"),),
        test=(utt("book it", "O O", "BookRestaurant"),),
        name=name,
    )


def test_dataset_views():
    d = small_dataset()
    assert d.intents == ("BookRestaurant", "GetWeather", "PlayMusic")
    assert d.tag_set == ("B-city", "B-cond", "B-genre", "O")
    assert d.vocabulary == ("in", "jazz", "oslo", "play", "rain")  # train only
    assert d.sizes == {"train": 2, "valid": 1, "test": 1} and len(d) == 4


def test_content_hash_ignores_name_and_sees_content():
    a, b = small_dataset("a"), small_dataset("b")
    assert a.content_hash() == b.content_hash() and len(a.content_hash()) == 64
    changed = a.with_train(a.train[:1])
    assert changed.content_hash() != a.content_hash() and changed.name == "a"
    assert a.replace(valid=()).content_hash() != a.content_hash()


def test_content_hash_is_stable_across_processes():
    code = ("from pytest_privleak.data import generate_snips_like as g;"
            "print(g(50, 10, 10, seed=3).content_hash())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(h), "PYTHONPATH": os.pathsep.join(sys.path)}
                           ).stdout.strip() for h in (1, 2)}
    from pytest_privleak.data import generate_snips_like
    assert outs == {generate_snips_like(50, 10, 10, seed=3).content_hash()}


def test_dataset_requires_train_and_utterances():
    with pytest.raises(ValueError, match="at least one training"):
        NLUDataset((), (), ())
    with pytest.raises(TypeError, match=r"valid\[0\]"):
        NLUDataset((utt("a", "O"),), ("oops",), ())
