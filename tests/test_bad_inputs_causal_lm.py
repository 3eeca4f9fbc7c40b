"""Bad inputs to the causal target and the shared-prefix scoring (issue 20): clear errors naming the fix."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import bert_config, word_tokenizer  # noqa: E402

from pytest_privleak.adapters import from_transformers  # noqa: E402
from pytest_privleak.attacks.candidates import OutOfVocabularyError  # noqa: E402
from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.canaries import canary, custom_pattern  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.finite import NonFiniteError  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402

DIGITS = tuple("0123456789")
WORDS = ["my", "pin", "code", "is", *DIGITS]


def _gpt(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                      bos_token_id=tokenizer.cls_token_id)).eval()


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=20, n_valid=4, n_test=0, seed=0)


@pytest.fixture()
def scorer():
    tokenizer = word_tokenizer(WORDS)
    return from_transformers(_gpt(tokenizer), tokenizer)


def test_a_base_folder_without_a_model_names_the_folder_and_the_fix(data, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no config\.json.*fix: pass 'tiny-gpt2' or a folder written by "
                                                r"model\.save_pretrained"):
        train_target("causal-lm", data, base=str(tmp_path / "nowhere"), progress=False)


def test_a_masked_encoder_folder_is_not_a_causal_base(data, tmp_path):
    from transformers import BertForMaskedLM

    BertForMaskedLM(bert_config(20, ["x"])).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"holds a 'bert' model \(BertForMaskedLM\), which is not a causal "
                                         r"language model.*fix: pass a GPT-2-like causal LM folder"):
        train_target("causal-lm", data, base=str(tmp_path), progress=False)


def test_a_causal_folder_without_a_tokenizer_says_to_save_one(data, tmp_path):
    tokenizer = word_tokenizer(WORDS)
    _gpt(tokenizer).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**json.loads((tmp_path / "config.json").read_text()),
                                                      "tokenizer_class": "NoSuchTokenizer"}))
    with pytest.raises(ValueError, match=r"(?s)no tokenizer transformers can load.*fix: tokenizer\.save_pretrained"):
        train_target("causal-lm", data, base=str(tmp_path), progress=False)


def test_bad_config_and_dataset_are_named(data):
    with pytest.raises(TypeError, match=r"unknown config key\(s\) \['hidden'\]"):
        train_target("causal-lm", data, hidden=3, progress=False)
    with pytest.raises(ValueError, match=r"base='' must be 'tiny-gpt2' or a local folder"):
        train_target("causal-lm", data, base="", progress=False)
    with pytest.raises(ValueError, match=r"config base_seed=-1 must be an integer >= 0"):
        train_target("causal-lm", data, base_seed=-1, progress=False)
    with pytest.raises(TypeError, match=r"dataset must be an NLUDataset, got list"):
        train_target("causal-lm", [], progress=False)


def test_a_prefix_with_words_out_of_the_vocabulary_is_refused_by_exposure(scorer):
    door = canary(custom_pattern("door", ("my", "zorblat", "is"), DIGITS, 2, "DoorIntent"), seed=0)
    with pytest.raises(OutOfVocabularyError, match=r"become the unknown token.*\['zorblat'\].*fix: write the canary"):
        compute_exposure(scorer, door)


def test_shared_prefix_scoring_refuses_unknown_words_and_bad_choices(scorer):
    with pytest.raises(ValueError, match=r"\['zorblat'\]\), so their sentences would score as other sentences"):
        scorer.score_with_shared_prefix(("my", "zorblat"), DIGITS, np.zeros((2, 2), dtype=int))
    with pytest.raises(ValueError, match=r"choices must be \[B, n\] indices into vocabulary, got shape \[4\]"):
        scorer.score_with_shared_prefix(("my",), DIGITS, np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match=r"indices outside vocabulary \(\|vocabulary\| = 10\); fix: indices in 0 \.\. 9"):
        scorer.score_with_shared_prefix(("my",), DIGITS, np.array([[3, 10]]))


def test_nan_logits_are_a_clear_error_not_a_rank(scorer):
    with torch.no_grad():
        scorer.model.lm_head.weight[5] = float("nan")    # tied: the input row of piece 5 too
    pin = canary("pin", length=2, seed=0)
    with pytest.raises(NonFiniteError, match=r"log-probabilities of GPT2LMHeadModel.*Fix: check the model's weights"):
        compute_exposure(scorer, pin)
    with pytest.raises(NonFiniteError, match=r"log-probabilities of GPT2LMHeadModel"):
        scorer.score_with_shared_prefix(pin.pattern.prefix, DIGITS, np.array([[1, 2]]))
