"""The BiLSTM-CRF NER target: token-scorer protocol, determinism and the cache."""
import numpy as np
import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.protocols import TokenScorer
from pytest_privleak.targets import train_target

TINY = dict(epochs=2, embedding_dim=8, hidden_dim=8)
#: CRF marginals are exp(alpha + beta - log Z) in float32; log Z of these 8-token sentences is near 18, where one
#: float32 step is 1.9e-6, and each marginal carries a few such steps (measured: rows sum to 1 within 8e-7 after
#: 2 epochs and 4e-6 after 40). 16 steps there:
MARGINAL_RTOL = 16 * float(np.spacing(np.float32(18.0)))


@pytest.fixture(scope="module")
def data():
    return generate_ner_like(n_train=60, n_valid=10, n_test=10, seed=5)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return TargetCache(tmp_path_factory.mktemp("ner-cache"))


@pytest.fixture(scope="module")
def model(data, cache):
    return train_target("ner-bilstm-crf", data, cache=cache, seed=0, progress=False, **TINY)


def test_token_scorer_gives_marginals_per_token(model, data):
    assert isinstance(model, TokenScorer)
    sentences = [u.tokens for u in data.test[:5]] + [("an", "unseen", "Qwzx")]
    probs = model.token_label_probs(sentences)
    assert [p.shape for p in probs] == [(len(s), len(model.labels)) for s in sentences]
    for p in probs:
        np.testing.assert_allclose(p.sum(1), 1.0, rtol=MARGINAL_RTOL)
    # one ragged batch gives the same as one sentence at a time
    one_by_one = [model.token_label_probs([s])[0] for s in sentences]
    for a, b in zip(probs, one_by_one):
        np.testing.assert_allclose(a, b, rtol=MARGINAL_RTOL, atol=1e-7)


def test_deterministic_and_cached(model, data, cache):
    again = train_target("ner-bilstm-crf", data, cache=cache, seed=0, progress=False, **TINY)
    assert again.loaded_from_cache
    fresh = train_target("ner-bilstm-crf", data, seed=0, progress=False, **TINY)
    for name, tensor in model.net.state_dict().items():
        assert torch.equal(tensor, fresh.net.state_dict()[name]), name
    np.testing.assert_array_equal(again.token_label_probs([data.test[0].tokens])[0],
                                  model.token_label_probs([data.test[0].tokens])[0])


def test_config_errors(data):
    with pytest.raises(TypeError, match="accepted keys"):
        train_target("ner-bilstm-crf", data, layers=2)
    with pytest.raises(ValueError, match="epochs"):
        train_target("ner-bilstm-crf", data, epochs=0)
