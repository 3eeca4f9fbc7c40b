"""The LSTM language-model target: log-perplexity scores, determinism, cache round trip, config errors."""
import math

import numpy as np
import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.protocols import SequenceScorer
from pytest_privleak.targets import train_target

TINY = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=16)


@pytest.fixture(scope="module")
def data():
    return inject_canaries(generate_snips_like(n_train=120, n_valid=20, n_test=0, seed=2), canary("pin", 4, seed=1),
                           repeats=5)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return TargetCache(tmp_path_factory.mktemp("lm-cache"))


@pytest.fixture(scope="module")
def model(data, cache):
    return train_target("lstm-lm", data, cache=cache, seed=0, progress=False, **TINY)


def test_is_a_sequence_scorer(model):
    assert isinstance(model, SequenceScorer)


def test_score_is_the_log_perplexity_in_bits(model, data):
    """Recompute -log2 Pr(<s> x </s>) token by token from the network's softmax."""
    u = data.train[0]
    ids = torch.tensor(model.vocab.token_ids(u.tokens))
    net, boundary = model.net, model.net.boundary
    inputs = torch.cat([torch.tensor([boundary]), ids]).unsqueeze(0)
    with torch.no_grad():
        probs = torch.softmax(net.output(net.lstm(net.embedding(inputs))[0]), -1)[0]
    targets = torch.cat([ids, torch.tensor([boundary])])
    by_hand = -sum(math.log2(float(probs[t, y])) for t, y in enumerate(targets))
    assert model.score([u])[0] == pytest.approx(by_hand, rel=1e-5)


def test_fast_path_matches_utterance_scores_and_ragged_batches(model, data):
    same = [u for u in data.train if len(u.tokens) == len(data.train[0].tokens)][:6]
    ids = torch.tensor([model.vocab.token_ids(u.tokens) for u in same])
    fast = model.score_token_ids(ids).numpy()
    np.testing.assert_allclose(fast, model.score(same), rtol=1e-5)
    mixed = list(data.train[:10])  # different lengths in one padded batch
    np.testing.assert_allclose(model.score(mixed), np.concatenate([model.score([u]) for u in mixed]), rtol=1e-5)


def test_training_is_deterministic_and_cached(data, cache, model):
    again = train_target("lstm-lm", data, cache=cache, seed=0, progress=False, **TINY)
    assert again.loaded_from_cache and again.content_hash == model.content_hash
    fresh = train_target("lstm-lm", data, cache=None, seed=0, progress=False, **TINY)
    for name, tensor in model.net.state_dict().items():
        assert torch.equal(tensor, fresh.net.state_dict()[name]), name
    other = train_target("lstm-lm", data, cache=None, seed=1, progress=False, **TINY)
    assert not torch.equal(other.net.output.weight, model.net.output.weight)
    entry = cache.entry(model.content_hash)
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "model.safetensors", "target.json"]


def test_bad_config_is_named(data):
    with pytest.raises(TypeError, match="hidden_size"):
        train_target("lstm-lm", data, hidden_size=3)
    with pytest.raises(ValueError, match="dropout"):
        train_target("lstm-lm", data, dropout=1.5)
