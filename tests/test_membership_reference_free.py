"""zlib and Min-K% Prob: the statistics by hand, auto's choice for a language model, and the bad inputs."""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from pytest_privleak.attacks.membership.attack import membership_inference
from pytest_privleak.attacks.membership.methods import CoarseScoresWarning
from pytest_privleak.attacks.membership.reference_free import min_k_statistic, zlib_bits, zlib_statistic
from pytest_privleak.data.types import Utterance
from pytest_privleak.finite import NonFiniteError


def utt(*tokens: str) -> Utterance:
    return Utterance(tuple(tokens), ("O",) * len(tokens), "x")


class TokenScorer:
    """A language model stand-in: each utterance's token log-probs are given; its loss is their sum in bits."""

    def __init__(self, table: dict[tuple[str, ...], list[float]]):
        self.table = table

    def token_log_probs(self, utterances):
        return [np.array(self.table[u.tokens]) for u in utterances]

    def score(self, utterances):
        return np.array([-sum(self.table[u.tokens]) / math.log(2) for u in utterances])


def test_zlib_bits_are_eight_times_the_compressed_length():
    texts = ["a", "my pin is 1234", "abab" * 50]
    expected = [8 * len(zlib.compress(t.encode(), 9)) for t in texts]
    assert zlib_bits(texts).tolist() == expected
    # a repetitive text compresses: fewer bits per character than a varied one
    assert zlib_bits(["abab" * 50])[0] / 200 < zlib_bits(["my pin is 1234"])[0] / 14


def test_zlib_statistic_divides_the_loss_by_the_zlib_bits():
    texts = ["call me at 555 0100", "hello"]
    bits = [8 * len(zlib.compress(t.encode(), 9)) for t in texts]
    stat = zlib_statistic(np.array([40.0, 40.0]), texts)
    assert stat == pytest.approx([-40.0 / bits[0], -40.0 / bits[1]], rel=1e-12)
    # the same loss on a text that is dearer to compress is more member-like
    assert (stat[0] > stat[1]) == (bits[0] > bits[1])


def test_min_k_averages_the_lowest_tokens_by_hand():
    rows = [np.log([0.9, 0.8, 0.1, 0.7, 0.6]), np.log([0.5, 0.5])]
    # 20 % of 5 tokens -> ceil(1.0) = 1 token: the lowest, log 0.1; of 2 tokens -> ceil(0.4) = 1: log 0.5
    assert min_k_statistic(rows) == pytest.approx([math.log(0.1), math.log(0.5)], rel=1e-12)
    # 50 % of 5 -> 3 lowest: 0.1, 0.6, 0.7
    assert min_k_statistic(rows[:1], 0.5)[0] == pytest.approx(np.log([0.1, 0.6, 0.7]).mean(), rel=1e-12)
    assert min_k_statistic(rows[:1], 1.0)[0] == pytest.approx(rows[0].mean(), rel=1e-12)


def _planted():
    """Members: all tokens likely. Non-members: the same mean loss, but one very unlikely token each."""
    members = [utt("m", str(i)) for i in range(40)]
    non_members = [utt("n", str(i)) for i in range(40)]
    table = {}
    for u in members:
        table[u.tokens] = [-1.0, -1.0]       # sum -2 nats (exact in binary)
    for u in non_members:
        table[u.tokens] = [-0.25, -1.75]     # sum -2 nats too: the same loss, one rarer token
    return TokenScorer(table), members, non_members


@pytest.mark.filterwarnings("ignore::pytest_privleak.attacks.membership.methods.CoarseScoresWarning")
def test_min_k_finds_members_the_loss_cannot():
    scorer, members, non_members = _planted()
    loss = membership_inference(scorer, members, non_members, method="loss")
    assert loss.auc == pytest.approx(0.5)
    min_k = membership_inference(scorer, members, non_members, method="min-k")
    assert min_k.method == "min-k" and min_k.auc == 1.0
    # auto runs every statistic a language model allows and keeps the strongest (issue 33): here Min-K%
    with pytest.warns(CoarseScoresWarning, match="80 of 80 scores"):          # every loss is the same
        auto = membership_inference(scorer, members, non_members)
    assert auto.method == "min-k" and auto.auc == 1.0
    assert [m for m, _ in auto.contest] == ["loss", "zlib", "min-k"]
    assert "Min-K% Prob has the highest AUC, AUC 1.000, +0.500 over the next" in auto.detail["auto"]
    assert auto.confidence == pytest.approx(1 - 0.05 / 3)                      # Bonferroni over 3 methods


def test_auto_keeps_the_loss_attack_without_token_log_probs():
    class LossOnly:
        def score(self, utterances):
            return np.arange(len(utterances), dtype=float)

    members, non_members = [utt("a", str(i)) for i in range(5)], [utt("b", str(i)) for i in range(5)]
    assert membership_inference(LossOnly(), members, non_members).method == "loss"
    with pytest.raises(TypeError, match="token_log_probs.*method='zlib'"):
        membership_inference(LossOnly(), members, non_members, method="min-k")
    assert membership_inference(LossOnly(), members, non_members, method="zlib").method == "zlib"


def test_bad_token_log_probs_are_refused():
    scorer, members, non_members = _planted()
    scorer.score = lambda utterances: np.zeros(len(utterances))     # finite losses: the token rows are checked
    scorer.table[members[0].tokens] = [float("nan"), -1.0]
    with pytest.raises(NonFiniteError, match="utterance 0"):
        membership_inference(scorer, members, non_members, method="min-k")
    scorer.table[members[0].tokens] = [0.5, -1.0]
    with pytest.raises(ValueError, match="positive log-probability"):
        membership_inference(scorer, members, non_members, method="min-k")
    with pytest.raises(ValueError, match="min_k_fraction"):
        min_k_statistic([np.array([-1.0])], 0.0)


def test_the_lstm_lm_gives_token_log_probs_that_sum_to_its_score():
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets import train_target

    data = generate_snips_like(n_train=120, n_valid=20, n_test=20, seed=0)
    model = train_target("lstm-lm", data, epochs=1, progress=False)
    items = list(data.train[:6])
    rows = model.token_log_probs(items)
    assert [len(r) for r in rows] == [len(u.tokens) + 1 for u in items]       # every token and </s>
    assert np.allclose([-r.sum() / math.log(2) for r in rows], model.score(items), rtol=1e-6)
    assert membership_inference(model, items[:3], items[3:], method="min-k").method == "min-k"
