"""Bad inputs of the embedding-leakage attacks and defences: each error names the argument or entry and the fix."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_privleak.embeddings.defences import laplace_noise, rounded
from pytest_privleak.embeddings.inversion import invert_embeddings
from pytest_privleak.embeddings.inversion_assertion import assert_embedding_inversion_at_most
from pytest_privleak.embeddings.keyword_assertion import (assert_keyword_inference_at_most, default_corpora,
                                                         measure_keyword_inference)
from pytest_privleak.finite import NonFiniteError

VICTIMS = ["ct scan of the leg", "mri scan of the hip", "x ray exam of the leg", "gait training"]
PUBLIC = ["the salad was fresh", "i ordered the salad and it was cold"]


class Returns:
    """A stub encoder returning ``fn(n)`` for ``n`` texts."""

    def __init__(self, fn):
        self.fn = fn

    def encode(self, texts):
        return self.fn(len(texts))


GOOD = Returns(lambda n: np.random.default_rng(n).normal(size=(n, 4)).astype(np.float32))
SMALL = dict(n_train=50, n_victims=10, steps=2)


def test_nan_embeddings_are_refused_with_the_fix():
    nan = Returns(lambda n: np.full((n, 4), np.nan, dtype=np.float32))
    with pytest.raises(NonFiniteError, match=r"attacker's generated texts.*Fix: check the encoder's weights"):
        invert_embeddings(nan, "citizen-id", **SMALL)


def test_one_dimensional_embeddings_are_refused():
    flat = Returns(lambda n: np.zeros(n, dtype=np.float32))
    with pytest.raises(ValueError, match=r"must be a 2-D float array \[N, d\].*fix: return one row per text"):
        invert_embeddings(flat, "citizen-id", **SMALL)


def test_a_row_count_that_does_not_match_the_texts_is_refused():
    short = Returns(lambda n: np.zeros((n - 1, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"has 49 rows for 50 texts; fix: encode\(\) must return one row per text"):
        invert_embeddings(short, "citizen-id", **SMALL)


def test_an_object_without_encode_is_refused():
    with pytest.raises(TypeError, match=r"encoder must have encode\(texts\).*fix: pytest_privleak.adapters"):
        invert_embeddings(object(), "genome", **SMALL)


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.1", True])
def test_max_top1_outside_zero_one(bad):
    with pytest.raises(ValueError, match=r"max_top1 must be an accuracy in \[0, 1\].*fix: e.g. max_top1=0.05"):
        assert_embedding_inversion_at_most(GOOD, "citizen-id", max_top1=bad, **SMALL)


def test_max_top1_below_chance_would_fail_every_encoder():
    with pytest.raises(ValueError, match=r"max_top1=0.05 is below the chance of the month sub-attack \(0.083.*fix: "
                                         r"max_top1 >= 0.083"):
        assert_embedding_inversion_at_most(GOOD, "citizen-id", max_top1=0.05, **SMALL)


def test_unknown_pattern():
    with pytest.raises(ValueError, match=r"pattern='passport' is not a known pattern; fix: use one of "
                                         r"\['citizen-id', 'genome'\]"):
        invert_embeddings(GOOD, "passport", **SMALL)


def test_unknown_sub_attack():
    with pytest.raises(ValueError, match=r"sub_attacks=\('hour',\).*fix: a non-empty subset of"):
        invert_embeddings(GOOD, "citizen-id", sub_attacks=("hour",), **SMALL)


def test_budget_must_be_positive_integers():
    with pytest.raises(ValueError, match=r"steps must be an integer >= 1, got 0; fix: e.g."):
        invert_embeddings(GOOD, "citizen-id", n_train=50, n_victims=10, steps=0)


def test_empty_keyword_list():
    with pytest.raises(ValueError, match=r"keywords must be a non-empty list of words.*fix: e.g. keywords=\['leg'"):
        measure_keyword_inference(GOOD, [], victims=VICTIMS, shadow=VICTIMS)


def test_a_keyword_of_two_words_names_its_entry():
    with pytest.raises(ValueError, match=r"keywords\[1\]='hong kong' is not a single lower-case word; fix"):
        measure_keyword_inference(GOOD, ["leg", "hong kong"], victims=VICTIMS, shadow=VICTIMS)


def test_a_keyword_no_victim_holds_names_its_entry():
    with pytest.raises(ValueError, match=r"keywords\[1\]='zebra' is in none of the 4 victim texts.*fix: choose"):
        measure_keyword_inference(GOOD, ["leg", "zebra"], victims=VICTIMS, shadow=VICTIMS)


def test_white_box_without_a_shadow_corpus():
    with pytest.raises(ValueError, match=r"setting='white-box' needs shadow=.*fix: pass texts from the victims'"):
        measure_keyword_inference(GOOD, ["leg"], victims=VICTIMS)


def test_public_corpus_without_the_anchor_word_names_its_entry():
    with pytest.raises(ValueError, match=r"public\[1\] does not hold the anchor word 'salad'.*fix: keep only"):
        measure_keyword_inference(GOOD, ["leg"], victims=VICTIMS, public=[PUBLIC[0], "nice soup"],
                                  setting="black-box")


def test_dann_in_the_white_box_setting():
    with pytest.raises(ValueError, match=r"model='dann' transfers knowledge.*fix: setting='black-box'"):
        measure_keyword_inference(GOOD, ["leg"], victims=VICTIMS, shadow=VICTIMS, model="dann")


def test_max_accuracy_below_chance():
    with pytest.raises(ValueError, match=r"max_accuracy must be an accuracy in \[0.5, 1\].*fix: e.g. max_accuracy=0.6"):
        assert_keyword_inference_at_most(GOOD, ["leg"], 0.3, victims=VICTIMS, shadow=VICTIMS)


def test_an_empty_name():
    with pytest.raises(ValueError, match=r"name must be a non-empty string or None.*fix: a stable label"):
        assert_keyword_inference_at_most(GOOD, ["leg"], 0.9, victims=VICTIMS, shadow=VICTIMS, name=" ")


def test_negative_rounding_decimals():
    with pytest.raises(ValueError, match=r"decimals must be an integer >= 0.*fix: e.g. decimals=1"):
        rounded(GOOD, -1)


def test_laplace_without_sensitivity_or_texts():
    with pytest.raises(ValueError, match=r"laplace_noise needs sensitivity= or texts=.*fix: pass texts"):
        laplace_noise(GOOD, 1.0)
    with pytest.raises(ValueError, match=r"epsilon must be a finite number > 0, got 0.*fix: e.g. epsilon=1.0"):
        laplace_noise(GOOD, 0.0, sensitivity=1.0)


def test_an_unknown_stand_in_corpus_is_named_with_the_choices():
    with pytest.raises(ValueError, match=r"corpus='yelp' is not a generated stand-in; fix: one of \['airline', 'medical'\]"):
        default_corpora(50, 0, "yelp")
