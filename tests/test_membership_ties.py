"""Ties are not a pass (issue 33 item 1): a fixed FPR whose threshold falls inside a block of tied non-members is
not measurable, the gate says INCONCLUSIVE, coarse scorers are named in a warning, and the adapters' losses keep
float64 precision where float32 rounds them to exactly 0."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from pytest_privleak import expect_leak
from pytest_privleak.adapters.log_probs import cross_entropy64, log_prob_of
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.attacks.membership.assertion import assert_membership_tpr_at_most
from pytest_privleak.attacks.membership.attack import tpr_at_fpr
from pytest_privleak.attacks.membership.methods import CoarseScoresWarning, coarse_scores
from pytest_privleak.data.types import Utterance


class TableScorer:
    """A SequenceScorer whose loss for utterance ``w{i}`` is ``losses[i]``."""

    def __init__(self, losses):
        self.losses = list(losses)

    def score(self, utterances):
        return np.array([self.losses[int(u.tokens[0][1:])] for u in utterances])


def sets(member_losses, non_member_losses):
    losses = list(member_losses) + list(non_member_losses)
    records = [Utterance((f"w{i}",), ("O",), "x") for i in range(len(losses))]
    return TableScorer(losses), records[:len(member_losses)], records[len(member_losses):]


# --- the rule by hand ----------------------------------------------------------------------------

def test_a_tie_block_wider_than_the_fpr_makes_it_unmeasurable():
    # 100 non-members, FPR 5 %: k = 5, the threshold is the 6th highest statistic
    spread = np.arange(100.0)
    five_tied = np.concatenate([np.full(5, 200.0), np.arange(95.0)])       # 5 tie at the top: 5 <= 5 allowed
    point = tpr_at_fpr(np.array([300.0, 250.0, 1.0]), five_tied, 0.05)
    assert point.measurable and point.threshold == 94.0 and point.achieved_fpr == 0.05
    six_tied = np.concatenate([np.full(6, 200.0), np.arange(94.0)])        # 6 tie: the 6th highest is inside them
    point = tpr_at_fpr(np.array([300.0, 200.0, 1.0]), six_tied, 0.05)
    assert not point.measurable and point.tied_out
    assert (point.threshold, point.tied, point.tied_members) == (200.0, 6, 1)
    assert (point.tpr, point.achieved_fpr) == (pytest.approx(1 / 3), 0.0)     # the lower bound it keeps
    assert "6 of 100 non-members (6.0%) and 1 of 3 members share the statistic 200" in point.why
    assert "more than the 5.0% FPR allows (5)" in point.why
    # ties below the threshold do not matter
    low_ties = np.concatenate([np.arange(50.0, 100.0), np.zeros(50)])
    assert tpr_at_fpr(np.array([99.5]), low_ties, 0.05).measurable
    assert tpr_at_fpr(np.array([99.5]), spread, 0.05).tied == 0


def test_ties_at_the_threshold_count_as_non_members_and_a_full_block_is_not_measurable():
    point = tpr_at_fpr(np.array([0.0, 0.0, 1.0]), np.zeros(100), 0.01)
    assert not point.measurable and (point.tpr, point.achieved_fpr) == (pytest.approx(1 / 3), 0.0)


def test_the_gate_is_inconclusive_when_zero_losses_tie_and_fails_when_the_lower_bound_leaks():
    # 8 % of members and 6 % of non-members score exactly 0 (a float32 loss): the loss attack's 1 % FPR
    # threshold is the tied 0, which the old gate read as TPR 0.000 at FPR 0.0000 and passed
    rng = np.random.default_rng(0)
    members = np.concatenate([np.zeros(16), rng.uniform(1e-6, 1.0, 184)])
    non_members = np.concatenate([np.zeros(30), rng.uniform(1e-6, 2.0, 470)])
    scorer, m, n = sets(members, non_members)
    with pytest.warns(CoarseScoresWarning, match=r"46 of 700 scores \(6.6%\) are exactly 0"):
        with expect_leak(match=r"INCONCLUSIVE.*30 non-members and 16 members tie") as err:
            assert_membership_tpr_at_most(scorer, m, n, 0.05, fpr=0.01)
    assert err.type is InconclusiveAuditError
    result = err.value.result
    assert result.value == 0.0 and result.extra["tied_non_members"] == 30.0
    assert "cross_entropy64" in str(err.value) and "not measurable" in result.evidence["TPR @ FPR 1%"]
    accepted = assert_membership_tpr_at_most(scorer, m, n, 0.05, fpr=0.01, allow_inconclusive=True)
    assert accepted.passed and accepted.target["inconclusive_allowed"] is True
    # members strictly above the tied block: the lower bound alone exceeds the limit, a leak whatever the ties
    above = np.concatenate([np.full(40, -1.0), members[40:]])
    scorer, m, n = sets(above, non_members)
    with expect_leak(match=r"tpr_at_fpr_0.01 .* violates the limit"):
        assert_membership_tpr_at_most(scorer, m, n, 0.05, fpr=0.01, method="loss")


def test_coarse_scores_are_named_and_fine_ones_are_not():
    assert coarse_scores(np.linspace(0, 1, 1000), "x") is None
    assert coarse_scores(np.concatenate([np.zeros(20), np.linspace(1, 2, 980)]), "x") is None   # 2 %: allowed
    text = coarse_scores(np.concatenate([np.full(21, 0.5), np.linspace(1, 2, 979)]), "the target's losses")
    assert text.startswith("the target's losses: 21 of 1000 scores (2.1%) are exactly 0.5")


# --- precision ------------------------------------------------------------------------------------

def test_log_prob_of_keeps_what_float32_and_float64_round_to_zero():
    logits = torch.tensor([[0.0, -20.0, -30.0], [0.0, -50.0, -60.0], [0.0, -300.0, -400.0], [1.0, 3.0, 2.0]])
    targets = torch.tensor([0, 0, 0, 1])
    got = log_prob_of(logits, targets)
    assert got.dtype == torch.float64
    # by hand: log Pr = -log1p(sum of exp(d_j)) for the runner-up gaps d_j
    expected = [-np.log1p(np.exp(-20.0) + np.exp(-30.0)), -(np.exp(-50.0) + np.exp(-60.0)), -np.exp(-300.0),
                -np.log1p(np.exp(-2.0) + np.exp(-1.0))]
    assert got.tolist() == pytest.approx(expected, rel=1e-5)
    assert float(F.cross_entropy(logits[1:2], targets[1:2])) == 0.0          # what float32 reads
    assert float(F.cross_entropy(logits[1:2].double(), targets[1:2])) == 0.0  # and float64 F.cross_entropy
    rows = cross_entropy64(torch.tensor([[[0.0, -50.0], [2.0, 1.0]]]), torch.tensor([[0, -100]]), ignore_index=-100)
    assert rows[0, 0].item() == pytest.approx(np.exp(-50.0), rel=1e-5) and rows[0, 1].item() == 0.0


def test_the_classifier_adapter_scores_confident_records_in_float64():
    transformers = pytest.importorskip("transformers")
    from helpers_transformers import bert_config, word_tokenizer

    from pytest_privleak.adapters import from_transformers

    del transformers
    torch.manual_seed(0)
    tokenizer = word_tokenizer(["play", "some", "jazz", "stop"])
    model = transformers_model(tokenizer)
    scorer = from_transformers(model, tokenizer)
    rows = [Utterance(("play", "some", "jazz"), ("O", "O", "O"), "Play"),
            Utterance(("stop",), ("O",), "Play")]
    losses = scorer.score(rows)
    enc = tokenizer([list(u.tokens) for u in rows], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    float32 = F.cross_entropy(logits, torch.tensor([0, 0]), reduction="none")
    assert float32.tolist() == [0.0, 0.0]                     # both tie at 0 in float32
    assert losses.tolist() == pytest.approx(cross_entropy64(logits, torch.tensor([0, 0])).tolist(), rel=1e-4)
    assert 0.0 < losses.min() and losses[0] != losses[1]       # the adapter still tells them apart


def transformers_model(tokenizer):
    from transformers import BertForSequenceClassification

    from helpers_transformers import bert_config

    model = BertForSequenceClassification(bert_config(len(tokenizer), ["Play", "Stop"])).eval()
    with torch.no_grad():                      # an over-confident head: the "Play" logit leads by 25-40
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([30.0, 0.0]))
        model.classifier.weight[0] = 5.0 * torch.randn(model.config.hidden_size)
    return model


# --- end to end: a team's own classifier, scored in float32 and exactly ----------------------------

class BagClassifier(nn.Module):
    """An embedding bag and an MLP, as a team writes one from the torch docs."""

    def __init__(self, words: int, classes: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(words, 64, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, ids, offsets):
        return self.mlp(self.bag(ids, offsets))


class BagScorer:
    """The team's SequenceScorer: ``F.cross_entropy`` in float32 (``exact=False``) or ``cross_entropy64``."""

    def __init__(self, model, words, intents, exact: bool):
        self.model, self.words, self.intents, self.exact = model, words, intents, exact

    def batch(self, utterances):
        ids = [torch.tensor([self.words[w] for w in u.tokens]) for u in utterances]
        offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
        return torch.cat(ids), offsets, torch.tensor([self.intents[u.intent] for u in utterances])

    @torch.no_grad()
    def score(self, utterances):
        ids, offsets, labels = self.batch(utterances)
        logits = self.model(ids, offsets)
        if self.exact:
            return cross_entropy64(logits, labels).numpy()
        return F.cross_entropy(logits, labels, reduction="none").numpy()


@pytest.fixture(scope="module")
def own_classifier():
    """400 members and 1000 non-members of the bundled NLU corpus with labels drawn at random (so a member's low
    loss can only be memorisation, as a canary's), and a bag-of-words MLP trained on the members 100 epochs
    (Adam, lr 5e-2): its logits grow until F.cross_entropy in float32 reads exactly 0 for 34-51 % of the
    members and 3.1-4.4 % of the non-members (seeds 0-2), while the exact loss finds 12.8-14.3 % of the
    members at 1 % FPR."""
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets.training import torch_threads

    corpus = generate_snips_like(n_train=4000, n_valid=10, n_test=10, seed=3, unseen_share=0.5)
    pool = list(dict.fromkeys(corpus.train))
    random.Random(0).shuffle(pool)
    draw = random.Random(1)
    intents = sorted({u.intent for u in pool})
    pool = [Utterance(u.tokens, u.tags, draw.choice(intents)) for u in pool]
    members, non_members = pool[:400], pool[400:1400]
    words = {w: i + 1 for i, w in enumerate(sorted({w for u in pool for w in u.tokens}))}
    labels = {k: i for i, k in enumerate(intents)}
    with torch_threads(1):
        torch.manual_seed(0)
        model = BagClassifier(len(words) + 1, len(intents))
        optimiser = torch.optim.Adam(model.parameters(), lr=5e-2)
        fit = BagScorer(model, words, labels, exact=True)
        for _ in range(100):
            order = torch.randperm(len(members))
            for start in range(0, len(members), 32):
                ids, offsets, y = fit.batch([members[i] for i in order[start:start + 32]])
                loss = F.cross_entropy(model(ids, offsets), y)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
    model.eval()
    return model, words, labels, members, non_members


def test_a_float32_loss_with_tied_zeros_no_longer_passes_and_the_exact_one_fails(own_classifier):
    model, words, labels, members, non_members = own_classifier
    float32 = BagScorer(model, words, labels, exact=False)
    with pytest.warns(CoarseScoresWarning, match=r"BagScorer.score.*are exactly 0"):
        with expect_leak(match=r"TPR at FPR 1% is not measurable") as err:
            assert_membership_tpr_at_most(float32, members, non_members, 0.05, fpr=0.01)
    assert err.type is InconclusiveAuditError
    assert err.value.result.value == 0.0 and err.value.result.extra["tied_non_members"] > 10
    exact = BagScorer(model, words, labels, exact=True)
    with expect_leak(match=r"membership.tpr_at_fpr_0.01 .* violates the limit \(at most 0.050\)") as leak:
        assert_membership_tpr_at_most(exact, members, non_members, 0.05, fpr=0.01)
    assert leak.value.result.value > 0.1
