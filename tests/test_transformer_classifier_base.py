"""The built-in transformer classifier fine-tunes one public base whatever its training seed (issue 26).

Before, the tiny BERT was pretrained with the fine-tuning seed, so a figure over 7 seeds pretrained 7 bases
(and each seed's model differed also in what a team would download once).
"""
import pytest
import torch

from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import tiny_bert, train_target


def test_training_seeds_share_one_pretrained_base(privleak_cache, monkeypatch, one_torch_thread):
    asked = []
    pretrain = tiny_bert.pretrain_tiny_bert

    def recording(**kwargs):
        asked.append(kwargs.get("seed"))
        return pretrain(**kwargs)

    monkeypatch.setattr(tiny_bert, "pretrain_tiny_bert", recording)
    data = generate_snips_like(n_train=60, n_valid=20, n_test=20, seed=0)
    cache = privleak_cache
    small = dict(epochs=1, head_epochs=1)
    first = train_target("transformer-classifier", data, cache=cache, seed=0, **small)
    second = train_target("transformer-classifier", data, cache=cache, seed=1, **small)
    assert asked == [0, 0]
    assert first.history["base_digest"] == second.history["base_digest"]
    assert first.content_hash != second.content_hash
    assert not torch.equal(first.classifier.classifier.weight, second.classifier.classifier.weight)
    other = train_target("transformer-classifier", data, cache=cache, seed=0, base_seed=1, **small)
    assert asked[-1] == 1 and other.history["base_digest"] != first.history["base_digest"]


def test_a_bad_base_seed_names_the_fix():
    data = generate_snips_like(n_train=20, n_valid=5, n_test=5, seed=0)
    with pytest.raises(ValueError, match=r"config base_seed=-1 must be an integer >= 0; fix: e.g. base_seed=0"):
        train_target("transformer-classifier", data, base_seed=-1)
