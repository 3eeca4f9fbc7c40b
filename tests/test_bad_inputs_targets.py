"""Bad inputs to the built-in targets' vocabulary and configs (issue 12): each names the argument and the fix.

Every case here failed on the code before issue 12: ``extra_tokens`` and
``unk_alpha`` did not exist (an unknown-key ``TypeError``), a vocabulary
without its ``untrained`` list loaded silently, and the out-of-vocabulary fix
told the user to inject a canary that was already injected.
"""
import math

import pytest

from pytest_privleak.data.types import NLUDataset, Utterance
from pytest_privleak.targets import train_target
from pytest_privleak.targets.vocab import PAD, UNK, OutOfVocabularyError, Vocabulary

#: The recurrent kinds whose vocabulary and <unk> training live in targets/vocab.py and unk_training.py.
BUILT_IN = ("joint-bilstm-crf", "lstm-lm", "ner-bilstm-crf")


@pytest.fixture(scope="module")
def data():
    train = [Utterance(("play", "jazz"), ("O", "B-genre"), "PlayMusic"),
             Utterance(("rain", "today"), ("O", "B-date"), "GetWeather")]
    return NLUDataset(tuple(train), tuple(train), ())


@pytest.mark.parametrize("kind", BUILT_IN)
@pytest.mark.parametrize("value, named", [
    ("0 1 2", r"extra_tokens='0 1 2' must be a sequence of tokens, not a str"),
    (None, r"extra_tokens=None must be a sequence of tokens"),
    (7, r"extra_tokens=7 must be a sequence of tokens"),
    (["ok", "two words"], r"extra_tokens\[1\]='two words' is not a token"),
    (["", "x"], r"extra_tokens\[0\]='' is not a token"),
    ([3], r"extra_tokens\[0\]=3 is not a token"),
    ([UNK], r"extra_tokens\[0\]='<unk>' is not a token"),
    ([PAD], r"extra_tokens\[0\]='<pad>' is not a token"),
])
def test_bad_extra_tokens_are_named_with_the_fix(kind, data, value, named):
    with pytest.raises(ValueError, match=named + r".*fix: pass a list of whitespace-free tokens"):
        train_target(kind, data, progress=False, extra_tokens=value)


@pytest.mark.parametrize("kind", BUILT_IN)
@pytest.mark.parametrize("value", [-0.1, "a quarter", True, math.nan, math.inf, None])
def test_bad_unk_alpha_is_named_with_the_fix(kind, data, value):
    with pytest.raises(ValueError, match=r"config unk_alpha=.* must be a finite number >= 0.*fix: use 0.25"):
        train_target(kind, data, progress=False, unk_alpha=value)


def test_out_of_vocabulary_fix_names_extra_tokens_not_reinjection(data):
    vocab = Vocabulary.from_dataset(data)
    with pytest.raises(OutOfVocabularyError, match=r"token 'IBAN' is not in the model's vocabulary.*"
                                                   r"fix: train with train_target\(\.\.\., extra_tokens=\['IBAN'"):
        vocab.token_ids(["play", "IBAN"], strict=True)


def test_vocabulary_json_without_its_untrained_list_is_refused(data):
    """A record of another code version (or edited) must not load with every reserved token trusted."""
    record = Vocabulary.from_dataset(data).to_json()
    del record["untrained"]
    with pytest.raises(ValueError, match=r"malformed vocabulary JSON.*'untrained'.*fix: .*retrain"):
        Vocabulary.from_json(record)


def test_untrained_tokens_outside_the_vocabulary_are_refused(data):
    vocab = Vocabulary.from_dataset(data)
    with pytest.raises(ValueError, match=r"untrained tokens \['nope'\] are not in its tokens; fix:"):
        Vocabulary(vocab.tokens, vocab.chars, vocab.tags, vocab.intents, ("nope",))


@pytest.mark.parametrize("kind", BUILT_IN)
@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_bad_threads_are_named(kind, data, value):
    """Before issue 12 only the joint target took ``threads``: the others raised an unknown-key TypeError."""
    with pytest.raises(ValueError, match=rf"threads={value!r} must be an integer >= 1 or None; fix: threads=1"):
        train_target(kind, data, progress=False, threads=value, epochs=1)
