"""HoHo (hoho-attack-ome-ldp §3.1, Algorithm 1): linking AUC and reconstruction against derived values."""
import math

import numpy as np
import pytest

from pytest_privleak.ldp import OME, OUE, SUE, hoho_results
from pytest_privleak.ldp.hoho import _auc, expected_reconstruction_accuracy, matching_scores


def test_matching_score_counts_even_bits_only():
    clean = np.array([[1, 0, 1, 0, 0, 1]])
    enc = np.array([[1, 1, 0, 1, 0, 0],   # even bits 1,0,0 vs 1,1,0 -> 2/3
                    [1, 0, 1, 0, 0, 1]])  # all even bits agree -> 1
    assert matching_scores(enc, clean).tolist()[0] == pytest.approx([2 / 3, 1.0])


def test_auc_by_hand():
    assert _auc(np.array([[3.0, 2.0]]), np.array([[1.0, 2.0]]))[0] == pytest.approx((1 + 1 + 1 + 0.5) / 4)


def _by_name(results):
    return {r.metric: r for r in results}


@pytest.mark.parametrize("lam", [10, 100])
@pytest.mark.parametrize("eps", [0.001, 1.0])
def test_linking_is_perfect_for_large_lambda(lam, eps):
    res = _by_name(hoho_results(OME(lam, eps, r=16)))
    assert res["linking_auc"].value >= 0.99
    assert res["linking_auc"].threshold is None and res["linking_auc"].chance == 0.5


@pytest.mark.parametrize("mech", [OME(1, 0.001, r=16), OME(1, 1.0, r=16), SUE(16, 0.001), OUE(16, 0.001)])
def test_linking_is_chance_for_lambda_one_and_unary(mech):
    assert abs(_by_name(hoho_results(mech))["linking_auc"].value - 0.5) < 0.05


def _closed_form(lam, eps, r, l, ones_fraction):
    p = lam / (1 + lam)
    q = 1 / (1 + lam * math.exp(eps / (r * l)))
    return ones_fraction * p + (1 - ones_fraction) * (1 - q)


@pytest.mark.parametrize("lam,eps,about", [(100, 1.0, 0.99), (100, 0.001, 0.99), (10, 1.0, 0.91),
                                           (10, 0.001, 0.91), (1, 1.0, 0.50), (1, 0.001, 0.50)])
def test_reconstruction_matches_derived_formula(lam, eps, about):
    ome = OME(lam, eps, r=16)
    data = np.random.default_rng(5).uniform(-10, 10, size=(800, 16))
    even = ome.encode(data)[:, ::2]
    derived = _closed_form(lam, eps, 16, 10, even.mean())
    assert expected_reconstruction_accuracy(ome, data) == pytest.approx(derived)
    assert derived == pytest.approx(about, abs=0.015)
    res = _by_name(hoho_results(ome, data))["reconstruction_accuracy"]
    bits = even.size
    assert abs(res.value - derived) <= 4 * math.sqrt(derived * (1 - derived) / bits) + 1e-9
    assert res.extra["expected"] == pytest.approx(derived)


def test_hoho_needs_clean_encoding():
    class NoEncode:
        epsilon = 1.0
    with pytest.raises(ValueError, match="encode"):
        hoho_results(NoEncode())
