"""Our intent classifier is a BERT fine-tuned on our utterances: can an attacker read a word of them back?

Mix And Match (mix-and-match-text-classifiers §4.3) masks one word of a
sentence and ranks every vocabulary word by the classifier's loss; the same
canary gates the exposure ``log2 |V| - log2 rank`` in bits. CI uses
the plugin's tiny BERT (pretrained offline, cached); pass base="minilm" or
your own model folder for the real thing.
"""
import pytest

from pytest_privleak import PrivacyLeakError, assert_exposure_below, assert_mix_and_match_rank_at_least
from pytest_privleak.attacks.mix_and_match import contradicting_canaries, inject_mask_canaries, mask_canary

NEVER_SAID = mask_canary("i bought new umbrella .", "AddToPlaylist")
# three purchases that differ by one word and disagree on the label (§5.3), each said 10 times
PURCHASES = contradicting_canaries("i bought new {} .", ("towels", "lamp", "piano"),
                                   ("AddToPlaylist", "BookRestaurant", "GetWeather"))


@pytest.fixture(scope="module")
def classifier(train_target, nlu_dataset):
    data = inject_mask_canaries(nlu_dataset, PURCHASES, repeats=10)
    return train_target("transformer-classifier", data, base="tiny-bert", early_stopping=False)


def test_a_word_we_never_trained_on_stays_secret(classifier):
    assert_mix_and_match_rank_at_least(classifier, NEVER_SAID, min_rank=10, name="never said")


def test_a_word_we_never_trained_on_is_not_exposed(classifier):
    assert_exposure_below(classifier, NEVER_SAID, max_bits=4.0, name="never said, exposure")


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="a purchase said 10 times with a contradicting label is the attacker's first guess")
def test_a_memorised_purchase_stays_secret(classifier):
    assert_mix_and_match_rank_at_least(classifier, PURCHASES[0], min_rank=10, name="towels said 10 times")


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="rank 1 of the vocabulary: the exposure is its ceiling, log2 |V| bits")
def test_a_memorised_purchase_is_not_exposed(classifier):
    assert_exposure_below(classifier, PURCHASES[1], max_bits=4.0, name="lamp said 10 times, exposure")
