"""The BiLSTM-CRF NER target: token-scorer protocol, determinism and the cache."""
import numpy as np
import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.protocols import LogTokenScorer, TokenScorer
from pytest_privleak.targets import train_target

TINY = dict(epochs=2, embedding_dim=8, hidden_dim=8)
#: CRF marginals are exp(alpha + beta - log Z), the forward-backward in float64 (issue 27); log Z of these 8-token
#: sentences is near 18, where one float64 step is 3.6e-15 (measured: rows sum to 1 within 2.6e-15 after 2 epochs
#: and 4.8e-15 after 40). 16 steps there:
ROW_SUM_RTOL = 16 * float(np.spacing(np.float64(18.0)))
#: The emissions stay float32 and depend (in the last bits) on the padding of the batch: one float32 step at 18
#: is 1.9e-6 (measured: one ragged batch and one sentence at a time differ by up to 2.9e-8). 16 steps there:
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
    assert isinstance(model, TokenScorer) and isinstance(model, LogTokenScorer)
    sentences = [u.tokens for u in data.test[:5]] + [("an", "unseen", "Qwzx")]
    probs = model.token_label_probs(sentences)
    assert [p.shape for p in probs] == [(len(s), len(model.labels)) for s in sentences]
    logs = model.token_label_log_probs(sentences)
    for p, log in zip(probs, logs):
        assert p.dtype == log.dtype == np.float64
        np.testing.assert_allclose(p.sum(1), 1.0, rtol=ROW_SUM_RTOL)
        np.testing.assert_array_equal(p, np.exp(log))
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
