"""Exposure through an own recurrent model with the prefix read once (issue 35 item 4): the plain figures.

``adapters.recurrent_prefix.prefix_outputs`` steps a torch recurrent layer over a canary space, the prefix and
each distinct run of leading (backward: trailing) words once; the sample project's GRU adapter uses it for the
``SharedPrefixScorer`` protocol. Both must give what the whole sentences give, to float resolution.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from pytest_privleak.adapters.recurrent_prefix import prefix_outputs
from pytest_privleak.attacks.exposure.attack import compute_exposure, secret_scorer, takes_labels
from pytest_privleak.canaries import DIGITS, canary, custom_pattern, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.protocols import SequenceScorer, SharedPrefixScorer

SAMPLE = Path(__file__).resolve().parents[1] / "sample_project"
#: float32 outputs computed in steps instead of one call: the same arithmetic, summed in the same order except
#: in the matrix products of batches of another size; measured up to 1.2e-7 absolute on outputs of size <= 1
OUTPUT_ATOL = 1e-6


def _whole(rnn: nn.RNNBase, prefix: torch.Tensor, words: torch.Tensor, choices: torch.Tensor) -> torch.Tensor:
    sentences = torch.cat([prefix.unsqueeze(0).expand(len(choices), -1, -1), words[choices]], dim=1)
    if rnn.batch_first:
        return rnn(sentences)[0]
    return rnn(sentences.transpose(0, 1))[0].transpose(0, 1)


LAYERS = {
    "bigru": lambda: nn.GRU(5, 7, batch_first=True, bidirectional=True),
    "gru": lambda: nn.GRU(5, 7, batch_first=True),
    "bilstm": lambda: nn.LSTM(5, 7, batch_first=True, bidirectional=True),
    "lstm-2-layers": lambda: nn.LSTM(5, 7, num_layers=2, batch_first=True),
    "birnn-time-first": lambda: nn.RNN(5, 7, bidirectional=True, nonlinearity="relu"),
    "bigru-2-layers": lambda: nn.GRU(5, 7, num_layers=2, batch_first=True, bidirectional=True),
    "gru-no-bias": lambda: nn.GRU(5, 7, batch_first=True, bias=False, bidirectional=True),
}


@pytest.mark.parametrize("prefix_length", [3, 0])
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_prefix_outputs_are_the_outputs_on_the_whole_sentences(layer, prefix_length):
    torch.manual_seed(0)
    rnn = LAYERS[layer]().eval()
    prefix, words = torch.randn(prefix_length, 5), torch.randn(4, 5)
    space = torch.tensor(list(itertools.product(range(4), repeat=3)))
    choices = torch.cat([space[torch.randperm(len(space))], space[:5]])    # shuffled, and some repeated
    got = prefix_outputs(rnn, prefix, words, choices)
    want = _whole(rnn, prefix, words, choices)
    assert got.shape == want.shape == (len(choices), prefix_length + 3, 7 * (1 + rnn.bidirectional))
    torch.testing.assert_close(got, want, rtol=0, atol=OUTPUT_ATOL)


def test_prefix_outputs_feed_each_distinct_run_of_leading_words_once(monkeypatch):
    """A batch of 1000 consecutive 3-digit secrets: the forward direction steps 10 + 100 + 1000 rows, not 3000
    plus the prefix 1000 times; the backward one shares trailing words the same way."""
    torch.manual_seed(0)
    rnn = nn.GRU(5, 7, batch_first=True, bidirectional=True).eval()
    fed = []
    real = nn.GRU.forward

    def counting(self, inputs, state=None):
        fed.append(tuple(inputs.shape[:2]))
        return real(self, inputs, state)

    monkeypatch.setattr(nn.GRU, "forward", counting)
    choices = torch.tensor(list(itertools.product(range(10), repeat=3)))
    prefix_outputs(rnn, torch.randn(4, 5), torch.randn(10, 5), choices)
    assert fed == [(1, 4), (10, 1), (100, 1), (1000, 1), (10, 1), (100, 1), (1000, 1), (1000, 4)]


@pytest.fixture(scope="module")
def sample_gru():
    """The sample project's own GRU (its adapter, as its tests wrap it), trained two epochs with a 3-digit
    account number said 50 times."""
    sys.path.insert(0, str(SAMPLE))
    try:
        from intent_model.model import SoftInputAdapter
        from intent_model.train import train
    finally:
        sys.path.remove(str(SAMPLE))
    pattern = custom_pattern("account", ("my", "account", "number", "is"), DIGITS, 3, "AccountIntent")
    secret = canary(pattern, seed=0)
    data = inject_canaries(generate_snips_like(n_train=300, n_valid=40, n_test=40, seed=0), secret, repeats=50)
    torch.manual_seed(0)
    return SoftInputAdapter(train(data, epochs=2, seed=0)), secret


class PlainOnly:
    """The adapter seen through ``score`` alone (what the attack used before the shared prefix)."""

    def __init__(self, adapter) -> None:
        self.adapter, self.vocabulary = adapter, adapter.vocabulary

    def score(self, utterances):
        return self.adapter.score(utterances)


def test_the_sample_gru_adapter_is_a_shared_prefix_scorer_with_the_plain_scores(sample_gru):
    adapter, secret = sample_gru
    assert isinstance(adapter, SharedPrefixScorer) and not isinstance(PlainOnly(adapter), SharedPrefixScorer)
    assert isinstance(PlainOnly(adapter), SequenceScorer)
    space = np.array(list(itertools.product(range(10), repeat=3)))
    fast = secret_scorer(adapter, secret)(space)
    plain = secret_scorer(PlainOnly(adapter), secret)(space)
    # a float32 loss of about 1..10 through another batching of the same products: a few ulps
    np.testing.assert_allclose(fast, plain, rtol=4e-6, atol=0)
    assert np.ptp(plain) > 1e-2          # the scores differ between candidates: the comparison means something


def test_exposure_through_the_shared_prefix_equals_the_plain_exposure(sample_gru):
    adapter, secret = sample_gru
    fast = compute_exposure(adapter, secret, method="exact", batch_size=256)
    plain = compute_exposure(PlainOnly(adapter), secret, method="exact", batch_size=256)
    assert (fast.rank, fast.value, fast.space_size) == (plain.rank, plain.value, plain.space_size)
    assert fast.canary_score == pytest.approx(plain.canary_score, rel=4e-6)
    assert fast.value > 5.0     # the account number said 50 times is exposed: the figure is not a flat zero


def test_the_attack_passes_the_labels_only_to_a_method_that_takes_them(sample_gru):
    adapter, secret = sample_gru
    seen = []

    class ThreeArguments(PlainOnly):
        def score_with_shared_prefix(self, prefix, vocabulary, choices):
            seen.append("three")
            return self.adapter.score_with_shared_prefix(prefix, vocabulary, choices, intent=secret.pattern.intent,
                                                         tags=secret.pattern.tags)

    class Keywords(PlainOnly):
        def score_with_shared_prefix(self, prefix, vocabulary, choices, **labels):
            seen.append(sorted(labels))
            return self.adapter.score_with_shared_prefix(prefix, vocabulary, choices, **labels)

    assert takes_labels(adapter.score_with_shared_prefix) and not takes_labels(
        ThreeArguments(adapter).score_with_shared_prefix)
    choices = np.array([[1, 2, 3], [4, 5, 6]])
    for scorer in (ThreeArguments(adapter), Keywords(adapter)):
        np.testing.assert_allclose(secret_scorer(scorer, secret)(choices),
                                   secret_scorer(adapter, secret)(choices), rtol=0, atol=0)
    assert seen == ["three", ["intent", "tags"]]
