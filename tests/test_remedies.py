"""Remedies chosen by the attacked model's family (issue 24 item 4): no BiLSTM knob for a transformer.

A transformer target and a BiLSTM target are attacked for real (exposure and membership) and each result must
carry its family's remedy; the family is read from built-in kinds, adapters and the layers a model holds.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from pytest_privleak.attacks import remedies
from pytest_privleak.attacks.exposure.assertion import measure_exposure
from pytest_privleak.attacks.membership.assertion import measure_membership
from pytest_privleak.attacks.mix_and_match.canaries import contradicting_canaries, inject_mask_canaries, mask_canary
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets.seeds import SeedModels

CANARIES = contradicting_canaries("i bought new {} .", ("towels", "lamp", "piano", "wallet", "camera"),
                                  ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook"))
BILSTM_ONLY = ("dropout (e.g. 0.2)", "character embeddings", "early_stopping=, with epochs above patience")


@pytest.fixture(scope="module")
def transformer(privleak_cache):
    """The classifier of tests/test_mix_and_match.py (same data, canaries and config: one cached target)."""
    from pytest_privleak.targets import train_target

    data = inject_mask_canaries(generate_snips_like(n_train=800, n_valid=100, n_test=100), CANARIES, repeats=10)
    return train_target("transformer-classifier", data, cache=privleak_cache, early_stopping=False), data


@pytest.fixture(scope="module")
def bilstm(privleak_cache):
    from pytest_privleak.targets import train_target

    torch.set_num_threads(1)
    data = inject_canaries(generate_snips_like(n_train=300, n_valid=50, n_test=60, seed=3), [canary("pin", seed=8)],
                           repeats=5, seed=3)     # the pin's intent and digits are known to the model
    return train_target("joint-bilstm-crf", data, epochs=2, cache=privleak_cache), data


class Holder:
    def __init__(self, *modules):
        self.modules = list(modules)


def test_the_family_is_read_from_the_layers_a_model_holds():
    assert remedies.model_family(nn.Sequential(nn.Embedding(10, 4), nn.GRU(4, 4))) == "recurrent"
    assert remedies.model_family(Holder(nn.Embedding(10, 4), nn.LSTM(4, 4))) == "recurrent"
    assert remedies.model_family(nn.TransformerEncoderLayer(8, 2)) == "transformer"
    assert remedies.model_family(nn.Linear(3, 2)) == "unknown"
    assert remedies.model_family(object()) == "unknown"


def test_a_transformers_module_is_a_transformer():
    from transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=8))
    assert remedies.model_family(bert) == "transformer"
    assert remedies.model_family(Holder(bert, nn.LSTM(8, 8))) == "transformer"   # BERT below an LSTM head


def test_seed_models_take_their_members_family():
    models = SeedModels([nn.GRU(2, 2), nn.GRU(2, 2)], seeds=[0, 1])
    assert remedies.model_family(models) == "recurrent"


@pytest.mark.parametrize("attack", ["exposure", "d-exposure", "membership", "mix-and-match"])
def test_a_transformer_gets_fine_tuning_steps_and_no_bilstm_knob(attack):
    text = remedies.remedy(attack, "transformer")
    assert "fine-tun" in text and "DP-SGD" in text and "pytest-privleak[dp]" in text
    assert not any(knob in text for knob in BILSTM_ONLY)
    recurrent = remedies.remedy(attack, "recurrent")
    assert "dropout (e.g. 0.2)" in recurrent and "fine-tun" not in recurrent and "DP-SGD" in recurrent


def test_unknown_attack_or_family_names_the_fix():
    with pytest.raises(ValueError, match="fix: one of transformer, recurrent, unknown"):
        remedies.remedy("exposure", "bilstm")
    with pytest.raises(ValueError, match="fix: one of exposure"):
        remedies.remedy("inversion", "transformer")


def test_cea_keeps_character_embeddings_for_a_bilstm_only():
    assert "character embeddings" in remedies.remedy("cea", "recurrent")
    assert "character embeddings" not in remedies.remedy("cea", "transformer")


def test_a_transformer_target_gets_the_transformer_remedy_for_exposure_and_membership(transformer):
    model, data = transformer
    assert remedies.model_family(model) == "transformer"
    exposure = measure_exposure(model, mask_canary("i bought new umbrella .", "AddToPlaylist"), name="remedy t")
    membership = measure_membership(model, data.train[:40], data.test[:40], name="remedy t membership")
    assert exposure.remedy == remedies.remedy("exposure", "transformer")
    assert membership.remedy == remedies.remedy("membership", "transformer")
    failing = dataclasses.replace(exposure, threshold=0.0).explain()    # the message of a failed gate
    assert "character embeddings" not in failing and "fine-tune fewer epochs" in failing


def test_a_bilstm_target_gets_the_recurrent_remedy_for_exposure_and_membership(bilstm):
    model, data = bilstm
    assert remedies.model_family(model) == "recurrent"
    exposure = measure_exposure(model, canary("pin", seed=7), name="remedy r")
    membership = measure_membership(model, data.train[:40], data.test[:40], name="remedy r membership")
    assert exposure.remedy == remedies.remedy("exposure", "recurrent")
    assert membership.remedy == remedies.remedy("membership", "recurrent")
    assert "dropout (e.g. 0.2)" in dataclasses.replace(exposure, threshold=0.0).explain()
