"""Bad inputs to the extraction attacks are clear errors naming the argument and the fix."""
from __future__ import annotations

import copy

import pytest
import torch

from helpers_generation import RECORDS, leaky_corpus, leaky_lstm, tiny_gpt2, word_tokenizer
from pytest_privleak.adapters.generation import generate_from_prefixes
from pytest_privleak.attacks.candidates import OutOfVocabularyError
from pytest_privleak.attacks.extraction.assertion import assert_extraction_at_most, measure_extraction
from pytest_privleak.attacks.extraction.untargeted_assertion import (assert_untargeted_extraction_at_most,
                                                                     measure_untargeted_extraction)
from pytest_privleak.canaries import canary, custom_pattern
from pytest_privleak.finite import NonFiniteError


@pytest.fixture(scope="module")
def lstm():
    torch.set_num_threads(1)
    return leaky_lstm()


@pytest.fixture(scope="module")
def pin():
    return leaky_corpus()[1]


@pytest.fixture(scope="module")
def gpt2():
    tok = word_tokenizer("my pin code is play".split() + list("0123456789"))
    return tiny_gpt2(len(tok), seed=0).eval(), tok


def test_a_prefix_not_in_the_vocabulary(lstm):
    odd = canary(custom_pattern("odd", ("zzqx", "code"), "0123456789", 4, "Odd"), secret="1 2 3 4")
    with pytest.raises(OutOfVocabularyError, match=r"prefix word\(s\).*'zzqx'.*extra_tokens"):
        measure_extraction(lstm, odd)
    with pytest.raises(OutOfVocabularyError, match="zzqx"):
        generate_from_prefixes(lstm, ["zzqx code"])


def test_a_prefix_the_tokenizer_cannot_spell(gpt2):
    model, tok = gpt2
    odd = canary(custom_pattern("odd", ("my", "zzqx"), "0123456789", 4, "Odd"), secret="1 2 3 4")
    with pytest.raises(OutOfVocabularyError, match=r"\['zzqx'\].*unknown token"):
        measure_extraction(model, odd, tokenizer=tok)


@pytest.mark.parametrize("argument", ["samples", "beams", "max_expansions", "batch_size"])
def test_a_budget_of_zero(lstm, pin, argument):
    with pytest.raises(ValueError, match=f"{argument} must be an integer >= 1, got 0; fix: e.g. {argument}="):
        measure_extraction(lstm, pin, **{argument: 0})


@pytest.mark.parametrize("argument", ["samples", "top", "max_tokens", "min_tokens"])
def test_an_untargeted_budget_of_zero(lstm, argument):
    with pytest.raises(ValueError, match=f"{argument} must be an integer >= 1, got 0"):
        measure_untargeted_extraction(lstm, list(RECORDS), **{argument: 0})


def test_a_generation_budget_of_zero(lstm):
    with pytest.raises(ValueError, match="budget must be an integer >= 1, got 0"):
        generate_from_prefixes(lstm, ["play"], budget=0)


def test_a_model_without_a_generate_method(pin):
    from transformers import BertConfig, BertForMaskedLM

    masked = BertForMaskedLM(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=32))
    tok = word_tokenizer("my pin code is".split())
    with pytest.raises(TypeError, match="not a causal language model with a generate method.*AutoModelForCausalLM"):
        measure_extraction(masked, pin, tokenizer=tok)
    with pytest.raises(TypeError, match="cannot generate: it has no next-token log-probabilities"):
        measure_extraction(object(), pin)
    with pytest.raises(TypeError, match="cannot generate"):
        measure_untargeted_extraction(object(), list(RECORDS))


def test_a_causal_lm_without_its_tokenizer(gpt2, pin):
    with pytest.raises(TypeError, match="needs its tokenizer.*tokenizer="):
        measure_extraction(gpt2[0], pin)


def test_nan_logits(gpt2, lstm, pin):
    model, tok = gpt2
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.lm_head.weight[3, 0] = float("nan")
    with pytest.raises(NonFiniteError, match="next-token log-probabilities of GPT2LMHeadModel"):
        measure_extraction(broken, pin, tokenizer=tok)
    with pytest.raises(NonFiniteError, match="next-token log-probabilities"):
        measure_untargeted_extraction(broken, ["my pin code is 1 2 3 4"], tokenizer=tok)
    broken_lstm = copy.deepcopy(lstm)
    with torch.no_grad():
        broken_lstm.net.output.bias[5] = float("nan")
    with pytest.raises(NonFiniteError):
        measure_extraction(broken_lstm, pin)


@pytest.mark.parametrize("options, message", [
    ({"method": "dfs"}, "method='dfs' is not one of"),
    ({"top_p": 0.0}, "top_p must be None or a number in"),
    ({"top_k": 0}, "top_k must be an integer >= 1"),
    ({"confidence": 1.0}, "confidence must be a number in"),
    ({"name": " "}, "name must be a non-empty string"),
])
def test_bad_targeted_options(lstm, pin, options, message):
    with pytest.raises(ValueError, match=message):
        measure_extraction(lstm, pin, **options)


def test_bad_limits(lstm, pin):
    with pytest.raises(ValueError, match="max_rate must be a number in"):
        assert_extraction_at_most(lstm, pin, 1.5)
    with pytest.raises(ValueError, match="max_spans must be an integer >= 0"):
        assert_untargeted_extraction_at_most(lstm, list(RECORDS), -1)
    with pytest.raises(ValueError, match="allow_inconclusive must be True or False"):
        assert_extraction_at_most(lstm, pin, 0.0, allow_inconclusive="yes")
    with pytest.raises(ValueError, match="no canaries given"):
        measure_extraction(lstm, [])


def test_bad_untargeted_inputs(lstm):
    with pytest.raises(ValueError, match="metric='reference' needs reference="):
        measure_untargeted_extraction(lstm, list(RECORDS), metric="reference")
    with pytest.raises(ValueError, match="training_data must be an NLUDataset, or a non-empty list"):
        measure_untargeted_extraction(lstm, [])
    with pytest.raises(ValueError, match="training_data must be"):
        measure_untargeted_extraction(lstm, "one long string")
    with pytest.raises(TypeError, match=r"training_data\[1\] is int"):
        measure_untargeted_extraction(lstm, ["a text", 3])


def test_generate_from_prefixes_refuses_a_bare_string(lstm):
    # before, "my pin code is" was read as 14 one-character prefixes and generated from each
    with pytest.raises(TypeError, match=r"prefixes must be a list of prefixes.*14 characters.*"
                                        r"prefixes=\['my pin code is'\]"):
        generate_from_prefixes(lstm, "my pin code is", method="greedy", max_tokens=2)


@pytest.mark.parametrize("seed", [1.7, -5, "3", None, True])
def test_generation_seeds_must_be_integers_at_least_zero(lstm, pin, seed):
    # before, 1.7, -5 and "3" were accepted (int() coerced 1.7 and "3"), and None was a bare TypeError
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0, got .*fix: e.g. seed=0"):
        generate_from_prefixes(lstm, ["my pin code is"], method="sampling", budget=2, max_tokens=2, seed=seed)
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0"):
        measure_extraction(lstm, pin, method="sampling", seed=seed)
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0"):
        measure_untargeted_extraction(lstm, list(RECORDS), seed=seed)
