"""Keyword inference (privacy-risks-language-model-embeddings §VI) and the subspace defence, on a tiny encoder."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402

from pytest_privleak.embeddings.corpora import medical_corpus  # noqa: E402
from pytest_privleak.embeddings.defences import subspace_projection  # noqa: E402
from pytest_privleak.embeddings.keyword_assertion import (assert_keyword_inference_at_most,  # noqa: E402
                                                         default_corpora, measure_keyword_inference)
from pytest_privleak.embeddings.keywords import _auc  # noqa: E402
from pytest_privleak.embeddings.utility import measure_utility  # noqa: E402
from pytest_privleak.embeddings.words import has_word, substitution_twins, with_and_without  # noqa: E402
from pytest_privleak import expect_leak

KEYWORDS = ("leg", "hand", "spine")


def test_word_substitution_twins_differ_only_by_the_keyword():
    rng = np.random.default_rng(0)
    texts = ["ct scan of the leg", "repair of fracture of the hip", "mri scan"]
    twins = substitution_twins(texts, "leg", rng)
    assert not has_word(twins[0], "leg") and has_word(twins[1], "leg") and has_word(twins[2], "leg")
    for a, b in zip(texts, twins):
        diff = [(x, y) for x, y in zip(a.split(), b.split()) if x != y]
        assert len(a.split()) == len(b.split()) and len(diff) == 1 and "leg" in diff[0]
    with_k, without_k = with_and_without(texts, "leg", rng)
    assert all(has_word(t, "leg") for t in with_k) and not any(has_word(t, "leg") for t in without_k)
    assert not has_word("legs hurt", "leg")                  # a word, not a substring (§VI-A)


def test_auc_by_hand():
    # positives 3, 1; negatives 2, 1: pairs (3>2) (3>1) (1<2) (1=1 -> 1/2) = 2.5 / 4
    assert _auc(np.array([3.0, 2.0, 1.0, 1.0]), np.array([1, 0, 1, 0])) == pytest.approx(0.625)


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    victims, shadow, public = default_corpora(600, 0)
    return tiny_encoder(seed=0), victims, shadow, public[:400]


def test_white_box_svm_reads_body_parts_from_the_tiny_encoder(setup):
    encoder, victims, shadow, _ = setup
    with expect_leak() as failure:
        assert_keyword_inference_at_most(encoder, KEYWORDS, 0.6, victims=victims, shadow=shadow, name="tiny wb")
    r = failure.value.result
    assert r.metric == "accuracy_white-box" and r.chance == 0.5 and r.interval[0] > 0.75, r.explain()
    message = str(failure.value)
    for part in ("linear SVM", "leg", "read in", "subspace_projection", "chance", "CI"):
        assert part in message


def test_black_box_dann_beats_chance_without_a_shadow_corpus(setup):
    encoder, victims, _, public = setup
    r = measure_keyword_inference(encoder, KEYWORDS, victims=victims, public=public, setting="black-box", epochs=15)
    assert r.verdict == "measured" and "DANN" in r.evidence["attack"]
    assert r.interval[0] > 0.55, r.explain()


def test_subspace_projection_moves_the_white_box_attack_toward_chance(setup):
    encoder, victims, shadow, _ = setup
    raw = measure_keyword_inference(encoder, KEYWORDS, victims=victims, shadow=shadow)
    defender_texts = medical_corpus(600, np.random.default_rng(9)).texts
    defended = subspace_projection(encoder, KEYWORDS, defender_texts, beta=0.1)
    after = measure_keyword_inference(defended, KEYWORDS, victims=victims, shadow=shadow)
    utility = dict(n_train=400, n_test=300, steps=300)
    u_raw, u_def = measure_utility(encoder, **utility), measure_utility(defended, **utility)
    print(f"\nsubspace beta=0.1: white-box accuracy {raw.value:.3f} -> {after.value:.3f} (chance 0.5); "
          f"utility {u_raw.accuracy:.3f} -> {u_def.accuracy:.3f} (cost {u_raw.accuracy - u_def.accuracy:+.3f})")
    assert raw.label != after.label and after.label.startswith("subspace(beta=0.1")
    assert after.value - 0.5 < 0.6 * (raw.value - 0.5)


def test_each_keyword_is_standardised_with_its_own_statistics_by_hand():
    from pytest_privleak.embeddings.keywords import _standardise

    # keyword 0 trains on 0, 2; keyword 1 on 10, 30 (one dimension); the victim is 4
    x, v = torch.tensor([[[0.0], [2.0]], [[10.0], [30.0]]]), torch.tensor([[4.0]])
    xs, vs = _standardise(x, v, with_victims=False)
    # keyword 0: mean 1, std sqrt(2); keyword 1: mean 20, std sqrt(200)
    torch.testing.assert_close(xs[:, :, 0], torch.tensor([[-2 ** -0.5, 2 ** -0.5], [-2 ** -0.5, 2 ** -0.5]]))
    torch.testing.assert_close(vs[:, 0, 0], torch.tensor([3 / 2 ** 0.5, -16 / 200 ** 0.5]))
    # black-box: the victim joins each keyword's statistics (keyword 0: 0, 2, 4 -> mean 2, std 2)
    _, vb = _standardise(x, v, with_victims=True)
    assert vb[0, 0, 0].item() == pytest.approx(1.0, rel=1e-6)


def test_dann_reports_its_accuracy_after_every_epoch(setup):
    encoder, victims, _, public = setup
    r = measure_keyword_inference(encoder, KEYWORDS, victims=victims, public=public, setting="black-box", epochs=6)
    assert 0.5 <= r.extra["dann_epoch_mean_accuracy"] <= r.extra["dann_epoch_best_accuracy"] <= 1.0
    assert r.value <= r.extra["dann_epoch_best_accuracy"]              # the final model is one of the epochs
    assert "over the epochs" in r.evidence and "mean" in r.evidence["over the epochs"]


def test_keyword_inference_reads_cities_from_airline_reviews_white_box_and_dann(setup):
    """§VI's second case (Airline, city names): the generated airline-style stand-in, both settings."""
    from pytest_privleak.embeddings.corpora import AIRLINE_KEYWORDS

    encoder, _, _, public = setup
    victims, shadow, _ = default_corpora(600, 0, "airline")
    cities = ("london", "paris", "tokyo")
    assert set(cities) <= set(AIRLINE_KEYWORDS)
    white = measure_keyword_inference(encoder, cities, victims=victims, shadow=shadow, name="tiny airline wb")
    black = measure_keyword_inference(encoder, cities, victims=victims, public=public, setting="black-box", epochs=15,
                                      name="tiny airline dann")
    assert white.interval[0] > 0.85, white.explain()
    assert black.interval[0] > 0.6, black.explain()
    assert "london" in white.evidence["per keyword"] and "read in" in white.evidence["recovered"]


def test_default_corpora_give_the_airline_stand_in():
    victims, shadow, public = default_corpora(50, 0, "airline")
    assert len(victims) == 50 and len(shadow) == 5 and all("salad" in t.split() for t in public)
    assert all(any(city in t.split() for city in ("london", "paris", "tokyo", "rome", "dubai", "sydney", "toronto",
                                                  "bangkok", "singapore", "frankfurt")) for t in victims)
