"""assert_ldp_holds end to end: OME's broken claim fails, correct mechanisms pass, bounds stay below truth."""
import math

import numpy as np
import pytest

from pytest_privleak.ldp import (KRR, OME, OUE, SUE, BoundedLaplace, BoxDomain, assert_ldp_holds, audit,
                                 worst_case_epsilon)
from pytest_privleak.results import PrivacyLeakError


@pytest.mark.parametrize("lam", [10, 100])
@pytest.mark.parametrize("eps", [0.001, 1.0])
def test_ome_large_lambda_fails_far_above_claim(lam, eps):
    ome = OME(lam, eps)
    with pytest.raises(PrivacyLeakError) as info:
        assert_ldp_holds(ome, eps)
    res = info.value.result
    exact = worst_case_epsilon(ome).epsilon
    assert res.attack == "ldp" and res.metric == "epsilon_lcb" and res.threshold == eps
    assert res.value > 4.6 * max(1.0, eps)  # past DP-Sniper's ln(1/c) cap
    assert res.value <= exact  # a bound above the truth is a bug
    assert res.extra["exact_eps"] == pytest.approx(exact)
    assert res.extra["ratio"] == pytest.approx(res.value / eps)
    msg = str(info.value)
    for needle in ("witness", "Pr[M(a) in S]", "1000000 per input", "exact ε over the domain", "remedy"):
        assert needle in msg


@pytest.mark.parametrize("eps", [0.001, 1.0])
def test_ome_lambda_one_passes_and_bound_below_exact(eps):
    ome = OME(1, eps)
    res = assert_ldp_holds(ome, eps)
    assert res.passed and res.value <= worst_case_epsilon(ome).epsilon


@pytest.mark.parametrize("mech", [BoundedLaplace(1.0, low=-10, high=10), KRR(4, 1.0), SUE(8, 1.0), OUE(8, 1.0),
                                  BoundedLaplace(0.3, low=0, high=1, dim=2), KRR(10, 0.1)])
@pytest.mark.parametrize("seed", [0, 1])
def test_no_false_alarm_fast(mech, seed):
    res = assert_ldp_holds(mech, mech.epsilon, seed=seed, samples=300_000)
    assert res.passed
    if hasattr(mech, "bit_probabilities"):
        assert res.value <= worst_case_epsilon(mech).epsilon


def test_correct_mechanisms_are_found_close_to_their_eps():
    # the auditor is not vacuous: at the true ε it certifies most of it
    for mech in (BoundedLaplace(1.0, low=-10, high=10), KRR(4, 1.0), OUE(8, 1.0)):
        assert audit(mech).epsilon_lcb > 0.9 * mech.epsilon


@pytest.mark.slow
@pytest.mark.parametrize("mech", [BoundedLaplace(1.0, low=-10, high=10), KRR(4, 1.0), SUE(8, 1.0), OUE(8, 1.0)])
def test_no_false_alarm_100_seeds(mech):
    passed = 0
    for seed in range(100):
        try:
            passed += assert_ldp_holds(mech, mech.epsilon, seed=seed).passed
        except PrivacyLeakError:
            pass
    assert passed >= 99


def test_understated_claim_fails():
    with pytest.raises(PrivacyLeakError):
        assert_ldp_holds(KRR(4, 2.0), 1.0, samples=300_000)


def test_fixed_c_is_capped_by_ln_one_over_c():
    res = audit(OME(100, 1.0), c=0.01, samples=300_000)
    assert 3.5 < res.epsilon_lcb <= math.log(100) + 0.05
    assert res.c == pytest.approx(0.01, rel=0.05)


def test_wide_user_pair_alone_certifies_past_ten():
    res = audit(OME(100, 1.0), pairs=[(-7.96875, 8.0)], search=False)
    assert res.epsilon_lcb >= 10
    assert {float(res.a[0]), float(res.b[0])} == {-7.96875, 8.0}


def test_same_seed_same_numbers():
    one = audit(KRR(3, 1.0), samples=100_000, seed=3)
    two = audit(KRR(3, 1.0), samples=100_000, seed=3)
    assert (one.epsilon_lcb, one.k1, one.k2) == (two.epsilon_lcb, two.k1, two.k2)


def test_delta_lowers_the_bound():
    plain = audit(KRR(4, 1.0), samples=200_000)
    with_delta = audit(KRR(4, 1.0), samples=200_000, delta=0.05)
    assert with_delta.epsilon_lcb < plain.epsilon_lcb


def test_result_is_json_safe_and_recorded():
    import json

    from pytest_privleak.results import set_sink
    sink = []
    set_sink(sink)
    try:
        res = assert_ldp_holds(KRR(3, 1.0), 1.0, samples=100_000)
    finally:
        set_sink(None)
    assert sink == [res]
    json.dumps({k: v for k, v in res.to_json().items() if k != "interval"})
    assert res.chance == 0.0 and res.ceiling > res.value and res.direction == "at_most"


@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(epsilon=1.0, confidence=1.5), "confidence"),
    (dict(epsilon=1.0, confidence=0.0), "confidence"), (dict(epsilon=1.0, pairs=[(0.0, 11.0)]), "outside"),
    (dict(epsilon=1.0, delta=1.0), "delta"), (dict(epsilon=1.0, samples=10), "samples"),
    (dict(epsilon=1.0, c=2.0), "c must"),
])
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        assert_ldp_holds(OME(10, 1.0), **kwargs)


def test_nan_mechanism_is_rejected():
    class Broken:
        epsilon = 1.0
        domain = BoxDomain(0, 1)

        def __call__(self, inputs, rng):
            return np.full((len(inputs), 1), np.nan)

    with pytest.raises(ValueError, match="NaN"):
        assert_ldp_holds(Broken(), 1.0)


def test_user_mechanism_via_protocol():
    class Leaky:  # claims ε = 1 but reveals the input with probability 0.5
        epsilon = 1.0
        domain = BoxDomain(0, 1)

        def __call__(self, inputs, rng):
            x = np.asarray(inputs, dtype=float)
            reveal = rng.random(x.shape) < 0.5
            return np.where(reveal, x, rng.random(x.shape))

    with pytest.raises(PrivacyLeakError):
        assert_ldp_holds(Leaky(), 1.0, samples=200_000)


def test_mlp_classifier_gives_a_valid_bound():
    res = audit(KRR(3, 1.0), classifier="mlp", samples=50_000, train_samples=3_000, val_samples=10_000)
    assert 0.5 < res.epsilon_lcb <= 1.0


def test_pair_search_includes_domain_ends_and_wide_pairs():
    from pytest_privleak.ldp import pair_epsilon
    from pytest_privleak.ldp.auditor import candidate_pairs
    ome = OME(100, 1.0)
    cands = candidate_pairs(ome, np.random.default_rng(0), pairs=[(np.array([1.0]), np.array([2.0]))])
    sources = {s for _, _, s in cands}
    assert sources == {"user", "pattern", "widest"}
    ends = {frozenset((float(a[0]), float(b[0]))) for a, b, _ in cands}
    assert frozenset((-10.0, 10.0)) in ends
    # the probed widest pairs differ in most bits: their exact ε is far above the default patterns'
    widest = max(pair_epsilon(ome, a, b) for a, b, s in cands if s == "widest")
    assert widest > 40 and widest > pair_epsilon(ome, [1.0], [2.0])
