"""Membership cases found by a held-out probe (session 7), who wrote them from the docs alone.

1. Ties that straddle the FPR: 150 of 300 members and 8 non-members share one score; 6 non-members score above
   it (more member-like). At FPR 1 % of 1000 non-members (10 false positives allowed) the old reading took the
   members strictly above the tie block (none: TPR 0 at FPR 0.6 %) and passed; a randomised threshold that calls
   q = (10 - 6) / 8 = 1/2 of the block members calls 75 of 300 members at exactly 1 %: TPR 0.25 (Fawcett 2006).
2. A scorer that returns the log-probability of the label (higher = member) where the protocol asks for a loss
   read AUC 0.13 for a model that leaks at 0.87, and passed every limit.
"""
import numpy as np
import pytest

from pytest_privleak import assert_membership_auc_at_most, assert_membership_tpr_at_most, expect_leak
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.attacks.membership.figures import tpr_at_fpr
from pytest_privleak.results import PrivacyLeakError

MEMBERS = [f"member {i}" for i in range(300)]
NON_MEMBERS = [f"held out {i}" for i in range(1000)]


class FixedLoss:
    """A SequenceScorer with planted per-record losses (lower = member)."""

    def __init__(self, losses: dict[str, float]) -> None:
        self.losses = losses

    def score(self, records):
        return np.array([self.losses[r] for r in records], dtype=np.float64)


def _straddling_losses() -> dict[str, float]:
    losses = {r: (0.5 if i < 150 else 5.0) for i, r in enumerate(MEMBERS)}
    losses.update({r: (0.1 if i < 6 else 0.5 if i < 14 else 5.0) for i, r in enumerate(NON_MEMBERS)})
    return losses


def test_a_tie_block_that_straddles_the_fpr_is_read_by_the_randomised_threshold():
    members = -np.array([_straddling_losses()[r] for r in MEMBERS])       # statistic: higher = member
    non_members = -np.array([_straddling_losses()[r] for r in NON_MEMBERS])
    point = tpr_at_fpr(members, non_members, 0.01)
    assert point.measurable and point.tpr == pytest.approx(75 / 300) and point.achieved_fpr == pytest.approx(0.01)
    low, high = point.interval
    assert low < 0.25 < high


def test_without_ties_the_point_is_the_plain_one():
    rng = np.random.default_rng(0)
    members, non_members = rng.normal(1, 1, 300), rng.normal(0, 1, 1000)
    point = tpr_at_fpr(members, non_members, 0.01)
    threshold = np.sort(non_members)[::-1][10]
    assert point.tpr == pytest.approx(np.mean(members > threshold)) and point.achieved_fpr == pytest.approx(0.01)


def test_the_straddling_tie_block_fails_the_gate_it_used_to_pass():
    with expect_leak() as caught:
        assert_membership_tpr_at_most(FixedLoss(_straddling_losses()), MEMBERS, NON_MEMBERS, max_tpr=0.03,
                                      fpr=0.01, method="loss")
    assert not isinstance(caught.value, InconclusiveAuditError)
    assert caught.value.result.value == pytest.approx(0.25)


def _leaking_losses(rng) -> dict[str, float]:
    losses = {r: float(v) for r, v in zip(MEMBERS, rng.gamma(2.0, 0.2, len(MEMBERS)))}
    losses.update({r: float(v) for r, v in zip(NON_MEMBERS, rng.gamma(2.0, 1.0, len(NON_MEMBERS)))})
    return losses


def test_a_scorer_the_wrong_way_round_is_inconclusive_not_a_pass():
    losses = _leaking_losses(np.random.default_rng(1))
    with expect_leak():                                         # the right way round: a leak
        assert_membership_auc_at_most(FixedLoss(losses), MEMBERS, NON_MEMBERS, max_auc=0.6, method="loss")
    log_probability = FixedLoss({r: -v for r, v in losses.items()})     # higher = member: the wrong convention
    for gate in (lambda: assert_membership_auc_at_most(log_probability, MEMBERS, NON_MEMBERS, max_auc=0.6),
                 lambda: assert_membership_tpr_at_most(log_probability, MEMBERS, NON_MEMBERS, max_tpr=0.03,
                                                       fpr=0.01)):
        with expect_leak() as caught:
            gate()
        assert isinstance(caught.value, InconclusiveAuditError)
        assert "LESS likely than non-members" in str(caught.value)
        assert "lower = more likely a member" in str(caught.value)


def test_a_sound_scorer_with_no_signal_still_passes():
    rng = np.random.default_rng(2)
    losses = {r: float(v) for r, v in zip(MEMBERS + NON_MEMBERS, rng.gamma(2.0, 1.0, 1300))}
    assert_membership_auc_at_most(FixedLoss(losses), MEMBERS, NON_MEMBERS, max_auc=0.6, method="loss")


def test_measure_membership_reports_each_fpr_by_the_method_strongest_there():
    # held-out probe: under auto, measure_membership's "TPR @ FPR" lines and extra came from the AUC winner
    # (the loss attack's 0.030 at 1 % FPR where RMIA reached 0.087, which the gate used)
    from pytest_privleak.attacks.membership.attack import measure_methods
    from pytest_privleak.attacks.membership.assertion import measured_membership

    rng = np.random.default_rng(3)
    losses = _leaking_losses(rng)
    # the reference explains most of each record's loss: calibrated, the members stand out at low FPR
    difficulty = {r: float(v) for r, v in zip(MEMBERS + NON_MEMBERS, rng.gamma(2.0, 2.0, 1300))}
    target = FixedLoss({r: losses[r] + difficulty[r] for r in losses})
    reference = FixedLoss(difficulty)
    ran = measure_methods(target, MEMBERS, NON_MEMBERS, reference=reference, confidence=0.95, fprs=(0.01,),
                          method="auto")
    assert len(ran) >= 2
    best = max(m.point(0.01).tpr for m in ran if m.point(0.01).measurable)
    [auc] = measured_membership(target, MEMBERS, NON_MEMBERS, reference=reference, name=None, confidence=0.95,
                                fprs=(0.01,), options={"method": "auto"})
    assert auc.extra["tpr_at_fpr_0.01"] == pytest.approx(best)
    assert "the strongest of" in auc.evidence["TPR @ FPR 1%"]
