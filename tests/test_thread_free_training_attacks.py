"""Warm means cached under any -n (issue 24 item 6): keyword inference and Mix And Match give the same figures,
to the last bit, with one and with two torch threads, so the result cache keys them without the count.

Keyword inference trains its attack models inside the attack: it does so with one thread whatever the caller's
count (``keywords.TRAINING_THREADS``); the encoder's forward passes run at the caller's count. Mix And Match
only scores. Each test computes the attack afresh at each count (no result cache) and compares the results'
JSON, every figure, interval and evidence line included.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from pytest_privleak.attacks.mix_and_match.attack import mix_and_match
from pytest_privleak.attacks.mix_and_match.assertion import _result as mix_and_match_result
from pytest_privleak.attacks.mix_and_match.canaries import contradicting_canaries, inject_mask_canaries, mask_canary
from pytest_privleak.cache import results as rc
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.embeddings import keywords
from pytest_privleak.embeddings.keyword_assertion import _result as keyword_result, default_corpora

CANARIES = contradicting_canaries("i bought new {} .", ("towels", "lamp", "piano", "wallet", "camera"),
                                  ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook"))
NEVER = mask_canary("i bought new umbrella .", "AddToPlaylist")
BODY_PARTS = ("leg", "hand")


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def classifier(privleak_cache):
    """The classifier of tests/test_mix_and_match.py (same data, canaries and config: one cached target)."""
    from pytest_privleak.targets import train_target

    data = inject_mask_canaries(generate_snips_like(n_train=800, n_valid=100, n_test=100), CANARIES, repeats=10)
    return train_target("transformer-classifier", data, cache=privleak_cache, early_stopping=False)


def _json(result) -> str:
    data = result.to_json()
    data["extra"].pop("seconds", None)     # Mix And Match's wall-clock time, not a figure
    return json.dumps(data, sort_keys=True)


def test_keyword_inference_and_mix_and_match_are_keyed_without_the_thread_count(threads):
    model = type("Hashed", (), {})()
    rc.mark_content_hash(model, hashlib.sha256(b"model").hexdigest())
    keys = {}
    for count in (1, 2):
        threads(count)
        keys[count] = [rc.result_key(attack, [model], {"x": 1}) for attack in ("keyword-inference", "mix-and-match")]
    assert keys[1] == keys[2]


def test_keyword_inference_trains_its_attack_models_with_one_thread_whatever_the_callers_count(threads,
                                                                                              monkeypatch):
    seen = []
    svm = keywords._svm

    def recording(*args):
        seen.append(torch.get_num_threads())
        return svm(*args)

    monkeypatch.setattr(keywords, "_svm", recording)
    threads(2)
    victims, shadow, _ = default_corpora(60, 0)
    encoder = _BagOfWords(victims + shadow)
    keywords.infer_keywords(encoder, BODY_PARTS, victims=victims, shadow=shadow, epochs=1)
    assert seen == [keywords.TRAINING_THREADS] == [1]
    assert torch.get_num_threads() == 2       # the caller's count is restored


class _BagOfWords:
    """A deterministic stand-in encoder: word counts over a fixed vocabulary."""

    def __init__(self, texts):
        self.words = sorted({w for t in texts for w in t.split()})
        self.index = {w: i for i, w in enumerate(self.words)}

    def encode(self, texts):
        out = np.zeros((len(texts), len(self.words)), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                if word in self.index:
                    out[row, self.index[word]] += 1
        return out


@pytest.mark.slow
def test_keyword_inference_on_minilm_gives_bitwise_equal_figures_with_one_and_two_threads(privleak_minilm, threads):
    figures, embeddings = {}, {}
    for count in (1, 2):
        threads(count)
        victims, shadow, _ = default_corpora(200, 0)
        measured = keywords.infer_keywords(privleak_minilm, BODY_PARTS, victims=victims, shadow=shadow)
        figures[count] = _json(keyword_result(privleak_minilm, measured, None, None, None))
        embeddings[count] = keywords.encode(privleak_minilm, victims, what="victims").tobytes()
    assert embeddings[1] == embeddings[2]  # the encoder's embeddings, to the last bit
    assert figures[1] == figures[2]        # accuracy, interval, per-keyword accuracy and AUC, evidence


def test_mix_and_match_gives_bitwise_equal_ranks_with_one_and_two_threads(classifier, threads):
    figures = {}
    for count in (1, 2):
        threads(count)
        figures[count] = [_json(mix_and_match_result(classifier, mix_and_match(classifier, canary), None, 10, None,
                                                     0.95)) for canary in (CANARIES[0], NEVER)]
    assert figures[1] == figures[2]
    said, never = (json.loads(f) for f in figures[1])
    assert said["value"] < never["value"]   # the comparison is between real figures: a memorised and a secret one


def test_embedding_inversion_trains_its_sub_attacks_with_one_thread_whatever_the_callers_count(threads,
                                                                                               monkeypatch):
    from pytest_privleak.embeddings import inversion

    seen = []
    train = inversion.train_sub_attacks

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return train(*args, **kwargs)

    monkeypatch.setattr(inversion, "train_sub_attacks", recording)
    threads(2)

    class Encoder:
        def encode(self, texts):
            rng = np.random.default_rng(len(texts))
            return rng.normal(size=(len(texts), 8)).astype(np.float32)

    inversion.invert_embeddings(Encoder(), "citizen-id", n_train=64, n_victims=8, steps=2)
    assert seen == [1] and torch.get_num_threads() == 2
