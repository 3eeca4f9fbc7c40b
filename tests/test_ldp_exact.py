"""White-box exact ε for bit-product mechanisms, against hand-derived values and the issue's table."""
import math

import numpy as np
import pytest

from pytest_privleak.ldp import OME, OUE, SUE, ome_corrected_bound, pair_epsilon, worst_case_epsilon
from pytest_privleak.ldp.exact import directional_loss


def test_directional_loss_takes_the_worse_output_per_bit_and_directions_are_not_summed():
    pa, pb = np.array([[0.9]]), np.array([[0.5]])
    # a -> b: max(ln(.9/.5), ln(.1/.5)) = ln 1.8 ; b -> a: max(ln(.5/.9), ln(.5/.1)) = ln 5
    assert directional_loss(pa, pb)[0, 0] == pytest.approx(math.log(1.8))
    assert directional_loss(pb, pa)[0, 0] == pytest.approx(math.log(5))

    class OneBit:
        def bit_probabilities(self, x):
            return np.where(np.asarray(x).reshape(-1, 1) > 0, 0.9, 0.5)

    assert pair_epsilon(OneBit(), 1, 0) == pytest.approx(math.log(5))  # not ln 1.8 + ln 5


def test_certain_bit_gives_infinite_loss():
    assert directional_loss(np.array([[0.5]]), np.array([[1.0]]))[0, 0] == math.inf


@pytest.mark.parametrize("mech", [SUE(5, 0.7), OUE(5, 0.7), SUE(3, 2.0), OUE(9, 0.01)])
def test_unary_encodings_are_exactly_eps(mech):
    # two bits differ: ln(p/q) + ln((1-q)/(1-p)) = ε for both SUE and OUE
    p, q = mech.p, mech.q
    hand = math.log(p / q) + math.log((1 - q) / (1 - p))
    assert hand == pytest.approx(mech.epsilon)
    assert pair_epsilon(mech, 0, 1) == pytest.approx(hand)
    assert worst_case_epsilon(mech).epsilon == pytest.approx(mech.epsilon)


def test_ome_witness_pair_by_hand():
    lam, eps = 100.0, 1.0
    ome = OME(lam, eps)
    pe, po, q = lam / (1 + lam), 1 / (1 + lam ** 3), 1 / (1 + lam * math.exp(eps / 10))
    # a = -7.96875 -> 1 0 1 1 1 1 1 1 1 1 ; b = 8 -> 0 1 0 0 0 0 0 0 0 0 (every bit differs)
    a_to_b = (math.log(pe / q) + max(math.log(q / po), math.log((1 - q) / (1 - po)))
              + 4 * max(math.log(pe / q), math.log((1 - pe) / (1 - q)))
              + 4 * max(math.log(po / q), math.log((1 - po) / (1 - q))))
    b_to_a = (max(math.log(q / pe), math.log((1 - q) / (1 - pe))) + max(math.log(po / q), math.log((1 - po) / (1 - q)))
              + 4 * max(math.log(q / pe), math.log((1 - q) / (1 - pe)))
              + 4 * max(math.log(q / po), math.log((1 - q) / (1 - po))))
    assert pair_epsilon(ome, [-7.96875], [8.0]) == pytest.approx(max(a_to_b, b_to_a))


# (λ, ε, exact ε over the domain, paper's corrected bound) from issue 3's table
ISSUE_TABLE = [
    (1, 0.001, 0.0005, 0.0005),
    (1, 1.0, 0.51, 0.50),
    (10, 0.001, 29.65, 23.03),
    (10, 1.0, 29.73, 23.53),
    (100, 0.001, 59.84, 46.05),
    (100, 1.0, 59.94, 46.55),
]


@pytest.mark.parametrize("lam,eps,exact,corrected", ISSUE_TABLE)
def test_ome_exact_worst_case_reproduces_issue_table(lam, eps, exact, corrected):
    ome = OME(lam, eps)
    tol = 0.00005 if exact < 0.01 else 0.005
    assert worst_case_epsilon(ome).epsilon == pytest.approx(exact, abs=tol)
    assert ome_corrected_bound(lam, eps, 1, 10) == pytest.approx(corrected, abs=tol)


@pytest.mark.parametrize("lam", [10, 100])
@pytest.mark.parametrize("eps", [0.001, 1.0])
def test_paper_corrected_bound_is_still_below_exact_for_large_lambda(lam, eps):
    assert ome_corrected_bound(lam, eps, 1, 10) < worst_case_epsilon(OME(lam, eps)).epsilon - 5


def test_worst_case_separates_over_coordinates():
    one = worst_case_epsilon(OME(10, 1.0)).epsilon
    ome3 = OME(10, 3.0, r=3)  # same per-bit q: ε / (r l) is unchanged
    assert ome3.q == pytest.approx(OME(10, 1.0).q)
    assert worst_case_epsilon(ome3).epsilon == pytest.approx(3 * one)


def test_worst_case_over_explicit_inputs_matches_bruteforce():
    ome = OME(10, 1.0)
    xs = np.array([[-3.0], [0.5], [7.25], [9.0]])
    brute = max(pair_epsilon(ome, a, b) for a in xs for b in xs)
    assert worst_case_epsilon(ome, xs).epsilon == pytest.approx(brute)
