"""Bad inputs of Mix And Match: each gives an error of a clear type naming the argument or entry and the fix."""
from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import bert_config, word_tokenizer  # noqa: E402

from pytest_privleak.attacks.mix_and_match.attack import mix_and_match, mix_and_match_model  # noqa: E402
from pytest_privleak.attacks.mix_and_match.assertion import (assert_mix_and_match_rank_at_least,  # noqa: E402
                                                             measure_mix_and_match)
from pytest_privleak.attacks.mix_and_match.canaries import (MaskCanary, contradicting_canaries,  # noqa: E402
                                                            frequency_band, inject_mask_canaries, mask_canary)
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.finite import NonFiniteError  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402

WORDS = ["i", "bought", "new", "towels", "lamp", "piano", ".", ",", "colour"]
INTENTS = ["Buy", "Other"]
TOWELS = mask_canary("i bought new towels .", "Buy")


@pytest.fixture(scope="module")
def attack_model():
    from transformers import BertForMaskedLM, BertForSequenceClassification

    torch.manual_seed(0)
    tokenizer = word_tokenizer(WORDS)
    classifier = BertForSequenceClassification(bert_config(len(tokenizer), INTENTS)).eval()
    base = BertForMaskedLM(bert_config(len(tokenizer), ["x"])).eval()
    return classifier, base, tokenizer


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=30, n_valid=5, n_test=5)


def test_sentence_of_wrong_type():
    with pytest.raises(TypeError, match=r"sentence must be a str.*fix: pass"):
        mask_canary(123, "Buy")


def test_position_out_of_range():
    with pytest.raises(ValueError, match=r"position=9 must be a token index in \[0, 4\].*fix: omit it"):
        MaskCanary(("i", "bought", "new", "towels", "."), "Buy", 9)


def test_position_on_the_full_stop():
    with pytest.raises(ValueError, match=r"position=4 is the full stop.*fix: choose a word's index"):
        mask_canary("i bought new towels .", "Buy", position=4)


def test_intent_with_whitespace():
    with pytest.raises(ValueError, match=r"intent='Buy it' must be a non-empty label.*fix: pass one of"):
        mask_canary("i bought new towels .", "Buy it")


def test_inject_something_that_is_not_a_canary(data):
    with pytest.raises(TypeError, match=r"canaries\[1\] is str, not a MaskCanary; fix: build it with mask_canary"):
        inject_mask_canaries(data, [TOWELS, "i bought new lamp ."])


def test_inject_zero_repeats(data):
    with pytest.raises(ValueError, match=r"repeats=0 must be an integer >= 1 \(the paper uses 1\)"):
        inject_mask_canaries(data, TOWELS, repeats=0)


def test_unknown_frequency_band(data):
    with pytest.raises(ValueError, match=r"frequency='medium' must be 'low' or 'high'"):
        frequency_band(data, "medium")


def test_frame_without_a_slot():
    with pytest.raises(ValueError, match=r"frame='i bought new towels \.' must hold exactly one '\{\}'.*fix: e\.g\."):
        contradicting_canaries("i bought new towels .", ["lamp"], ["Buy"])


def test_model_that_is_not_attackable():
    with pytest.raises(TypeError, match=r"model must be a transformer-classifier target.*fix: wrap"):
        mix_and_match(object(), TOWELS)


def test_unknown_method(attack_model):
    with pytest.raises(ValueError, match=r"method='fast' must be one of \('auto', 'exhaustive', 'mix-and-match'\)"):
        mix_and_match(mix_and_match_model(*attack_model), TOWELS, method="fast")


def test_unknown_generator(attack_model):
    with pytest.raises(ValueError, match=r"generator='gpt' must be one of \('frankenstein', 'base'\)"):
        mix_and_match(mix_and_match_model(*attack_model), TOWELS, generator="gpt")


def test_min_rank_below_one(attack_model):
    with pytest.raises(ValueError, match=r"min_rank=0 must be a finite number >= 1.*fix: e\.g\. min_rank=10"):
        assert_mix_and_match_rank_at_least(mix_and_match_model(*attack_model), TOWELS, min_rank=0)


def test_empty_name_and_bad_top_k(attack_model):
    model = mix_and_match_model(*attack_model)
    with pytest.raises(ValueError, match=r"name='' must be a non-empty string or None; fix: pass a stable label"):
        measure_mix_and_match(model, TOWELS, name="")
    with pytest.raises(ValueError, match=r"top_k=0 must be an integer >= 1.*fix: e\.g\. top_k=10"):
        measure_mix_and_match(model, TOWELS, top_k=0)


def test_canaries_that_are_a_string(attack_model):
    with pytest.raises(TypeError, match=r"canaries must be a MaskCanary or a non-empty sequence.*fix: build one"):
        measure_mix_and_match(mix_and_match_model(*attack_model), "i bought new towels .")


def test_intent_the_classifier_does_not_know(attack_model):
    with pytest.raises(ValueError, match=r"canary intent 'PlayMusic' is not a label of the classifier.*fix: give"):
        measure_mix_and_match(mix_and_match_model(*attack_model), mask_canary("i bought new towels .", "PlayMusic"))


def test_target_that_is_several_word_pieces(attack_model):
    # 'colour' is the word pieces col ##our in the test tokenizer
    with pytest.raises(ValueError, match=r"target 'colours' is not a whole-word candidate.*fix: choose a target"):
        measure_mix_and_match(mix_and_match_model(*attack_model), mask_canary("i bought new colours .", "Buy"))


# --- exposure of a Mix And Match canary through assert_exposure_below (issue 9 item 4) ---------------------

def test_exposure_method_that_does_not_apply_to_a_mask_canary(attack_model):
    from pytest_privleak.attacks.exposure.attack import compute_exposure

    with pytest.raises(ValueError, match=r"method='sampled' does not apply to a Mix And Match canary; fix: one of "
                                         r"\('auto', 'exact', 'mix-and-match'\)"):
        compute_exposure(mix_and_match_model(*attack_model), TOWELS, method="sampled")


def test_exposure_by_mix_and_match_of_a_prefix_canary():
    from pytest_privleak.attacks.exposure.attack import compute_exposure
    from pytest_privleak.canaries import canary

    with pytest.raises(ValueError, match=r"method='mix-and-match' .* needs a MaskCanary; fix: pass mask_canary"):
        compute_exposure(object(), canary("pin", length=2), method="mix-and-match")


def test_exposure_of_a_mask_canary_on_a_model_that_is_not_attackable():
    from pytest_privleak.attacks.exposure.assertion import assert_exposure_below

    with pytest.raises(TypeError, match=r"model must be a transformer-classifier target.*fix: wrap"):
        assert_exposure_below(object(), TOWELS, max_bits=4.0)


@pytest.mark.parametrize("measure", ["mix-and-match rank", "exposure of a mask canary"])
def test_classifier_with_nan_weights(attack_model, measure):
    from pytest_privleak.attacks.exposure.assertion import measure_exposure

    attack = measure_mix_and_match if measure == "mix-and-match rank" else measure_exposure
    classifier, base, tokenizer = attack_model
    broken = copy.deepcopy(classifier)
    with torch.no_grad():
        broken.classifier.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match=r"cross-entropy losses on the candidate fills.*NaN/inf logits"):
        attack(mix_and_match_model(broken, base, tokenizer), TOWELS)


def test_base_that_is_not_a_masked_lm(attack_model):
    classifier, _, tokenizer = attack_model
    with pytest.raises(TypeError, match=r"generator must be the base model with its masked-LM head.*fix: load"):
        mix_and_match_model(classifier, classifier.base_model, tokenizer)


def test_base_folder_that_does_not_exist(data, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"base='.*nowhere'.*not a transformers model directory.*fix: pass"):
        train_target("transformer-classifier", data, base=str(tmp_path / "nowhere"))


def test_dataset_that_is_not_a_dataset():
    with pytest.raises(TypeError, match=r"dataset must be an NLUDataset, got list; fix: build one"):
        train_target("transformer-classifier", [("i bought new towels .", "Buy")])


@pytest.mark.parametrize("refit_on", ["the public text as one string", [], [["fine"], 3]])
def test_head_refit_on_something_that_is_not_sentences(attack_model, refit_on):
    with pytest.raises(TypeError, match=r"refit_on must be a non-empty sequence of public sentences.*fix: e\.g\. "
                                        r"refit_on=generate_public_corpus"):
        mix_and_match_model(*attack_model, refit_on=refit_on)


def test_the_tokenizer_in_the_masked_lm_slot(attack_model):
    classifier, _, tokenizer = attack_model
    with pytest.raises(TypeError, match=r"base_mlm is a tokenizer and tokenizer is missing; fix: "
                                        r"mix_and_match_model\(classifier, tokenizer=tokenizer\)"):
        mix_and_match_model(classifier, tokenizer)


def test_no_tokenizer(attack_model):
    classifier, base, _ = attack_model
    with pytest.raises(TypeError, match=r"tokenizer must be the classifier's transformers tokenizer, got NoneType; "
                                        r"fix: mix_and_match_model\(classifier, base_mlm, tokenizer\)"):
        mix_and_match_model(classifier, base)


def test_head_refit_without_a_masked_lm(attack_model):
    classifier, _, tokenizer = attack_model
    with pytest.raises(ValueError, match=r"refit_on re-fits .* but base_mlm is None .*fix: pass base_mlm"):
        mix_and_match_model(classifier, tokenizer=tokenizer, refit_on=["i bought new towels ."])


@pytest.mark.parametrize("method", ["mix-and-match", "auto"])
def test_the_paper_attack_without_a_masked_lm(attack_model, method):
    classifier, _, tokenizer = attack_model
    budget = 2 if method == "auto" else 50_000      # auto over the budget would need Mix And Match too
    with pytest.raises(ValueError, match=r"needs Mix And Match's candidate generator, a masked LM .*base_mlm=None"
                                        r".*fix: mix_and_match_model\(classifier, base_mlm, tokenizer\)"):
        measure_mix_and_match(mix_and_match_model(classifier, tokenizer=tokenizer), TOWELS, method=method,
                              budget=budget)
