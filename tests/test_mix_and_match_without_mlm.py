"""Mix And Match on a classifier whose encoder has no masked-LM head (issue 21 item 5).

Many teams fine-tune encoders that ship no MLM head (all-MiniLM-L6-v2).
The default rank (the exhaustive search, mix-and-match-text-classifiers
§5.1.4) and the exposure need only the classifier, so
``mix_and_match_model(classifier, tokenizer=tokenizer)`` must serve them; the
"candidates Mix And Match needed" figure (§5.1.5) needs a generator and is
reported as not computed, with why; the paper's attack refuses with the fix.

The classifier is a tiny BERT built from a config (2 layers, hidden 32, no
dropout) fine-tuned for 300 Adam steps on 60 Snips-like utterances plus five
canaries "i bought new <thing> ." with contradicting labels (§5.3), each 10
times: every canary's secret ranks first of 248 whole words, a never-injected
"umbrella" ranks 65 (chance 124.5).
"""
from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import bert_config, dataset_words, fine_tune, word_tokenizer  # noqa: E402

from pytest_privleak import expect_leak  # noqa: E402
from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below  # noqa: E402
from pytest_privleak.attacks.mix_and_match.attack import NO_GENERATOR, mix_and_match, mix_and_match_model  # noqa: E402
from pytest_privleak.attacks.mix_and_match.assertion import assert_mix_and_match_rank_at_least  # noqa: E402
from pytest_privleak.attacks.mix_and_match.canaries import (contradicting_canaries,  # noqa: E402
                                                            inject_mask_canaries, mask_canary)
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
CANARIES = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
TOWELS = CANARIES[0]
NEVER = mask_canary("i bought new umbrella .", "AddToPlaylist")


@pytest.fixture(scope="module")
def parts():
    """(classifier without any MLM head, tokenizer), fine-tuned on the injected canaries."""
    from transformers import BertForSequenceClassification

    torch.set_num_threads(1)
    data = inject_mask_canaries(generate_snips_like(n_train=60, n_valid=10, n_test=10), CANARIES, repeats=10)
    tokenizer = word_tokenizer(dataset_words(data, extra=("umbrella",)))
    torch.manual_seed(0)
    intents = sorted({u.intent for u in data.train})
    classifier = BertForSequenceClassification(bert_config(len(tokenizer), intents, hidden_dropout_prob=0.0,
                                                           attention_probs_dropout_prob=0.0))
    fine_tune([classifier], tokenizer, list(data.train), steps=300, lr=5e-3)
    return classifier, tokenizer


@pytest.fixture(scope="module")
def model(parts):
    classifier, tokenizer = parts
    return mix_and_match_model(classifier, tokenizer=tokenizer)


def test_the_default_rank_runs_without_a_masked_lm_and_fails_the_leaking_canary(model):
    assert not model.has_generator
    with expect_leak() as info:
        assert_mix_and_match_rank_at_least(model, CANARIES, min_rank=10, name="no-mlm canaries")
    result = info.value.result
    assert result.value == 1.0 and result.evidence["attack"].startswith("exhaustive search")
    # the Mix And Match figure is not made up: absent from the figures, and the message says why
    assert "candidates_needed" not in result.extra and "candidate_ratio" not in result.extra
    assert result.evidence["candidates Mix And Match needed"] == NO_GENERATOR
    message = str(info.value)
    assert "not computed: no masked LM was given (base_mlm=None)" in message and "pass the masked LM" in message
    rankings = mix_and_match(model, CANARIES).rankings
    assert all(r.method == "exhaustive" and r.rank == 1.0 for r in rankings)
    assert all(r.candidates_needed is None and r.candidate_ratio is None and r.generator is None for r in rankings)


def test_a_never_injected_canary_passes(model):
    result = assert_mix_and_match_rank_at_least(model, NEVER, min_rank=10, name="no-mlm never injected")
    assert result.passed and result.value > result.chance / 4, result.explain()


def test_the_rank_is_the_same_with_or_without_a_masked_lm(parts):
    """The exhaustive search reads the classifier alone: adding a masked LM changes no rank."""
    from transformers import BertForMaskedLM

    classifier, tokenizer = parts
    torch.manual_seed(1)
    base = BertForMaskedLM(bert_config(len(tokenizer), ["x"])).eval()
    with_mlm = mix_and_match(mix_and_match_model(classifier, base, tokenizer), CANARIES + (NEVER,),
                             method="exhaustive").rankings
    without = mix_and_match(mix_and_match_model(classifier, tokenizer=tokenizer), CANARIES + (NEVER,)).rankings
    assert [(r.rank, r.rank_range, r.guesses) for r in with_mlm] == [(r.rank, r.rank_range, r.guesses)
                                                                      for r in without]
    assert all(r.candidates_needed is not None for r in with_mlm)


def test_the_exposure_works_without_a_masked_lm(model):
    with expect_leak() as info:
        assert_exposure_below(model, TOWELS, max_bits=4.0, name="no-mlm towels exposure")
    result = info.value.result
    vocabulary = result.extra["vocabulary"]
    assert result.value == pytest.approx(math.log2(vocabulary), rel=1e-12)     # rank 1: log2 |V| bits
    assert result.evidence["candidates Mix And Match needed"] == NO_GENERATOR
    assert "candidates_needed" not in result.extra
    never = compute_exposure(model, NEVER)
    assert never.value == pytest.approx(math.log2(never.space_size) - math.log2(never.rank), rel=1e-12)


def test_the_paper_attack_without_a_masked_lm_names_the_argument_and_the_fix(model):
    with pytest.raises(ValueError, match=r"method='mix-and-match' needs .* masked LM .*base_mlm=None.*fix: "
                                         r"mix_and_match_model\(classifier, base_mlm, tokenizer\)"):
        mix_and_match(model, TOWELS, method="mix-and-match")
    with pytest.raises(ValueError, match=r"over budget=10 .*base_mlm=None.*method='exhaustive'"):
        mix_and_match(model, TOWELS, budget=10)
    with pytest.raises(ValueError, match=r"method='mix-and-match' needs .*base_mlm=None.*method='exact'"):
        compute_exposure(model, TOWELS, method="mix-and-match")
