"""Loss-based membership inference: the AUC / TPR maths by hand, then an overfit model vs one with no members."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_privleak.attacks.membership.attack import (auc_from_statistics, auc_interval, delong_variance,
                                                membership_inference, tpr_at_fpr)
from pytest_privleak.attacks.membership.assertion import assert_membership_auc_at_most, measure_membership
from pytest_privleak.data.types import Utterance
from pytest_privleak.results import set_sink
from pytest_privleak import expect_leak


def utt(i: int) -> Utterance:
    return Utterance((f"w{i}",), ("O",), "x")


class TableScorer:
    """A SequenceScorer whose loss for utterance ``w{i}`` is ``losses[i]``."""

    def __init__(self, losses: dict[int, float]):
        self.losses = losses

    def score(self, utterances):
        return np.array([self.losses[int(u.tokens[0][1:])] for u in utterances])


def sets(member_losses, non_member_losses):
    """(scorer, members, non_members) with the given losses."""
    losses = dict(enumerate(list(member_losses) + list(non_member_losses)))
    members = [utt(i) for i in range(len(member_losses))]
    non_members = [utt(i) for i in range(len(member_losses), len(losses))]
    return TableScorer(losses), members, non_members


# --- maths by hand -------------------------------------------------------------------------

def test_auc_counts_ties_one_half():
    # statistics (higher = member): members 3, 2, 1; non-members 2, 0.
    # pairs: 3>2, 3>0, 2=2 (1/2), 2>0, 1<2, 1>0 -> 4.5 of 6
    assert auc_from_statistics([3, 2, 1], [2, 0]) == pytest.approx(0.75, rel=1e-12)
    assert auc_from_statistics([1, 1], [1, 1, 1]) == pytest.approx(0.5, rel=1e-12)
    assert auc_from_statistics([5, 6], [1, 2]) == 1.0 and auc_from_statistics([1, 2], [5, 6]) == 0.0


def test_delong_variance_by_hand():
    # per member, share of non-members beaten: 3 -> 1, 2 -> 0.75, 1 -> 0.5: S10 = 0.0625
    # per non-member, share of members beating it: 2 -> 0.5, 0 -> 1: S01 = 0.125
    # var = S10/3 + S01/2 = 0.0625/3 + 0.0625 = 1/12
    assert delong_variance([3, 2, 1], [2, 0]) == pytest.approx(1 / 12, rel=1e-12)
    (low, high), method = auc_interval([3, 2, 1], [2, 0], 0.95)
    half = 1.959963984540054 * math.sqrt(1 / 12)
    assert method == "DeLong"
    assert (low, high) == (pytest.approx(0.75 - half, rel=1e-9), 1.0)


def test_perfect_separation_interval_is_clopper_pearson_over_disjoint_pairs():
    (low, high), method = auc_interval(np.arange(10, 20), np.arange(0, 30) - 40, 0.95)
    assert "Clopper-Pearson over 10 disjoint pairs" in method
    # 10 of 10 pairs: two-sided 95 % lower bound is (0.025)^(1/10)
    assert low == pytest.approx(0.025 ** 0.1, rel=1e-9) and high == 1.0


def test_tpr_at_fpr_by_hand():
    non = np.arange(100.0)                       # non-member statistics 0..99
    members = np.array([99.5, 98.5, 50.0, 10.0])
    point = tpr_at_fpr(members, non, 0.01)       # k = 1: threshold = 2nd highest non-member, 98
    assert (point.threshold, point.tpr, point.achieved_fpr) == (98.0, 0.5, 0.01)
    low, high = point.interval
    assert 0 < low < 0.5 < high < 1
    rare = tpr_at_fpr(members, non, 0.001)
    assert not rare.measurable and "needs at least 1000 non-members" in rare.why and "have 100" in rare.why


def test_ties_at_the_threshold_count_as_non_members():
    point = tpr_at_fpr(np.array([0.0, 0.0, 1.0]), np.zeros(100), 0.01)
    assert (point.tpr, point.achieved_fpr) == (pytest.approx(1 / 3), 0.0)
    assert not point.measurable and "100 of 100 non-members" in point.why       # issue 33: ties hide the FPR
    single = tpr_at_fpr(np.array([0.0, 0.0, 1.0]), np.concatenate([[5.0, 0.0], -np.arange(1.0, 99.0)]), 0.01)
    assert single.measurable and (single.tpr, single.threshold) == (pytest.approx(1 / 3), 0.0)
    assert auc_from_statistics([0.0, 0.0, 1.0], np.zeros(100)) == pytest.approx(2 / 3, rel=1e-12)


def test_losses_become_statistics_lower_loss_is_member():
    scorer, members, non_members = sets([0.1, 0.2, 3.0], [0.15, 5.0])
    # statistics -loss: members -0.1, -0.2, -3; non-members -0.15, -5 -> pairs won: 1+1+0+1+0+1 = 4 of 6
    assert membership_inference(scorer, members, non_members).auc == pytest.approx(4 / 6, rel=1e-12)


def test_reference_calibration_removes_difficulty():
    # difficulty d; the target's loss is d - 0.5 on members and d on non-members
    difficulty_m, difficulty_n = [5.0, 1.0], [4.0, 2.0]
    target, members, non_members = sets([d - 0.5 for d in difficulty_m], difficulty_n)
    reference, _, _ = sets(difficulty_m, difficulty_n)
    assert membership_inference(target, members, non_members).auc == pytest.approx(0.5)
    calibrated = membership_inference(target, members, non_members, reference=reference)
    assert calibrated.auc == 1.0 and calibrated.calibrated


def test_measure_records_an_ungated_result_with_a_stable_label():
    scorer, members, non_members = sets(np.linspace(0, 1, 120), np.linspace(0.5, 1.5, 150))
    sink: list = []
    set_sink(sink)
    try:
        result = measure_membership(scorer, members, non_members)
        named = measure_membership(scorer, members, non_members, name="bert-intent")
    finally:
        set_sink(None)
    assert sink == [result, named]
    assert result.threshold is None and result.verdict == "measured" and result.chance == 0.5
    assert result.label == "TableScorer loss: 120 members vs 150 non-members" and named.label == "bert-intent"
    assert "0x" not in result.label
    assert "not measurable" in result.evidence["TPR @ FPR 0.1%"]
    assert set(result.extra) == {"tpr_at_fpr_0.01"}


def test_same_scores_give_the_same_figures_twice():
    rng = np.random.default_rng(0)
    scorer, members, non_members = sets(rng.normal(0, 1, 200), rng.normal(0.3, 1, 300))
    a = measure_membership(scorer, members, non_members)
    b = measure_membership(scorer, members, non_members)
    assert (a.value, a.interval, a.extra) == (b.value, b.interval, b.extra)


def test_assertion_fails_on_auc_and_on_tpr_separately():
    # members clearly lower loss, but some overlap: AUC high; at 1 % FPR part of the members caught
    rng = np.random.default_rng(1)
    scorer, members, non_members = sets(rng.normal(0, 1, 200), rng.normal(2, 1, 400))
    with expect_leak(match=r"membership.auc .* violates the limit \(at most 0.600\)") as err:
        assert_membership_auc_at_most(scorer, members, non_members, 0.6)
    message = str(err.value)
    for part in ("CI", "chance     : 0.500", "TPR @ FPR 1%", "remedy", "DeLong"):
        assert part in message
    passed = assert_membership_auc_at_most(scorer, members, non_members, 0.99)
    assert passed.passed
    with expect_leak(match=r"membership.tpr_at_fpr_0.01 .* violates"):
        assert_membership_auc_at_most(scorer, members, non_members, 0.99, max_tpr_at_fpr=0.02)


# --- end to end: an overfit language model -------------------------------------------------

@pytest.fixture(scope="module")
def overfit_lm():
    """The built-in lstm-lm trained 40 epochs on 100 utterances (about 3 s on one CPU thread)."""
    import torch

    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets import train_target

    torch.set_num_threads(1)
    data = generate_snips_like(n_train=100, n_valid=20, n_test=700, seed=3)
    model = train_target("lstm-lm", data, epochs=40, progress=False)
    members = list(dict.fromkeys(data.train))
    unseen = [u for u in dict.fromkeys(data.test) if u not in set(data.train)]
    return model, members, unseen


def test_overfit_model_fails_the_membership_gate(overfit_lm):
    model, members, unseen = overfit_lm
    with expect_leak() as err:
        assert_membership_auc_at_most(model, members, unseen[:300], 0.6, max_tpr_at_fpr=0.05)
    result = err.value.result
    assert result.value > 0.95 and result.interval[0] > 0.9           # AUC, chance 0.5
    assert result.extra["tpr_at_fpr_0.01"] > 0.5                      # TPR at 1 % FPR, chance 0.01


def test_model_with_no_members_passes(overfit_lm):
    model, _, unseen = overfit_lm
    # both sets unseen by the model: any separation is luck
    result = assert_membership_auc_at_most(model, unseen[300:450], unseen[450:], 0.6, max_tpr_at_fpr=0.05)
    assert result.interval[0] < 0.5 < result.interval[1]
    assert result.extra["tpr_at_fpr_0.01"] < 0.05
