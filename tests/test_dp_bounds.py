"""The DP audit's lower-bound maths (issue 25): one-run bounds (Steinke et al. 2023; Mahloujifar et al. 2024)
and the many-run distinguishing bound, against hand-derived values and mechanisms whose truth is known.

Soundness checks run a mechanism with a known trade-off curve in place of training, over fixed seeds
(so they cannot flap), and allow the bound above the truth at most as often as a Binomial(seeds,
1 - confidence) count reaches with probability 0.999.
"""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import binom, norm

from pytest_privleak.dp import fdp, steinke
from pytest_privleak.dp.distinguish import audit_distinguish
from pytest_privleak.dp.guess_counts import count_correct, default_candidates
from pytest_privleak.dp.one_run import audit_one_run

DELTA = 1e-5


# --- mechanisms with a known truth --------------------------------------------------------------
def gaussian_canaries(mu: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each canary in w.p. 1/2; its score is N(mu, 1) if in, N(0, 1) if out: exactly mu-GDP per canary."""
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    return rng.normal(size=m) + mu * included, included


def rr_canaries(epsilon: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Randomised response: the score is the inclusion bit, flipped w.p. 1/(1 + e^ε): exactly ε-DP."""
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    keep = rng.random(m) < expit(epsilon)
    return np.where(keep, included, ~included).astype(float), included


def rr_true_epsilon(epsilon: float, delta: float) -> float:
    """ε at δ of randomised response: the smallest ε' with p <= e^ε' (1 - p) + δ, p = e^ε / (1 + e^ε)."""
    p = expit(epsilon)
    return math.log((p - delta) / (1.0 - p))


def allowed_exceedances(seeds: int, confidence: float) -> int:
    return int(binom.ppf(0.999, seeds, 1.0 - confidence))


def separated(m: int, included: np.ndarray) -> np.ndarray:
    """Scores that rank every included canary above every excluded one."""
    return included.astype(float) + np.linspace(0.0, 0.5, m)


# --- Steinke et al. 2023 by hand ----------------------------------------------------------------
def test_steinke_all_correct_is_the_binomial_closed_form():
    """c guesses all right, δ ~ 0: the p-value is q^c, so ε_lcb = logit(β^(1/c)) (Steinke et al. Thm 3.1)."""
    m, c, beta = 1000, 50, 0.05
    included = np.zeros(m, dtype=bool)
    included[:500] = True
    bound = audit_one_run(separated(m, included), included, delta=1e-12, confidence=1 - beta, method="steinke",
                          guess_counts=[(c, 0)])
    assert (bound.guesses, bound.correct, bound.k_plus, bound.k_minus) == (c, c, c, 0)
    assert bound.epsilon_lcb == bound.epsilon_lcb_steinke
    assert bound.epsilon_lcb == pytest.approx(logit(beta ** (1 / c)), abs=1e-5)
    assert bound.ceiling == bound.epsilon_lcb            # every guess was right: the bound is the ceiling
    assert set(bound.guessed) == set(range(450, 500))     # the 50 highest-scored members
    assert "no correction" in bound.threshold_rule


def test_steinke_delta_term_by_hand():
    """r = v = 2, m = 10: P <= F(2) + 2 m δ max((F(1) - F(2)) / 1, (F(0) - F(2)) / 2), F(u) = P[Bin(2, q) >= u]."""
    eps, m, delta = 1.0, 10, 0.01
    q = math.exp(eps) / (1 + math.exp(eps))
    f0, f1, f2 = 1.0, 1 - (1 - q) ** 2, q ** 2
    expected = f2 + 2 * m * delta * max(f1 - f2, (f0 - f2) / 2)
    assert steinke.p_value(m, 2, 2, eps, delta)[0] == pytest.approx(expected, rel=1e-12)


def test_zero_correct_guesses_bound_nothing():
    m = 200
    included = np.arange(m) % 2 == 0
    scores = -separated(m, included)                       # members scored LOWEST: every IN guess is wrong
    bound = audit_one_run(scores, included, delta=DELTA, guess_counts=[(10, 0)])
    assert bound.correct == 0
    assert bound.epsilon_lcb == bound.epsilon_lcb_fdp == bound.epsilon_lcb_steinke == 0.0
    assert bound.epsilon_lcb_fdp_eps_delta == 0.0


@pytest.mark.parametrize("method", ["fdp", "fdp-eps-delta", "steinke"])
def test_ceiling_is_the_bound_of_perfect_separation(method):
    """Perfectly separated scores reach the ceiling; weaker scores stay below it."""
    m = 400
    included = np.arange(m) % 2 == 0
    perfect = audit_one_run(separated(m, included), included, delta=DELTA, method=method)
    assert perfect.epsilon_lcb == pytest.approx(perfect.ceiling, abs=1e-5) and perfect.ceiling > 1.0
    noisy = audit_one_run(*gaussian_canaries(1.0, m, 0), delta=DELTA, method=method)
    assert noisy.epsilon_lcb < noisy.ceiling == pytest.approx(perfect.ceiling, abs=1e-9)


def test_one_right_guess_never_rejects():
    """One guess is right w.p. >= 1/2 under any claim (q >= 1/2, Φ(μ/2) >= 1/2): no bound at significance < 1/2."""
    m = 100
    included = np.arange(m) < 50
    bound = audit_one_run(separated(m, included), included, delta=DELTA, guess_counts=[(1, 0)])
    assert bound.correct == 1
    assert bound.epsilon_lcb_fdp == bound.epsilon_lcb_steinke == 0.0


# --- Mahloujifar et al. 2024 by hand ------------------------------------------------------------
def reference_rejects(floor, theta: float, m: int, c: int, right: int, tau: float) -> bool:
    """The paper's recursion written out plainly, one scalar at a time."""
    r, h = tau * right / m, tau * (c - right) / m
    for i in range(right - 1, -1, -1):
        h_new = max(h, floor(min(r, 1.0), theta))
        r = min(r + i / (c - i) * (h_new - h), 1.0)
        h = h_new
    return r + h > c / m


STANDARD_NORMAL = NormalDist()


def gauss_floor(r: float, mu: float) -> float:
    """Φ(Φ⁻¹(r) - μ) with the standard library's normal (independent of the scipy ufuncs under test)."""
    if r <= 0.0:
        return 0.0
    if r >= 1.0:
        return 1.0
    return STANDARD_NORMAL.cdf(STANDARD_NORMAL.inv_cdf(r) - mu)


@pytest.mark.parametrize("m,c,right", [(100, 20, 20), (100, 40, 33), (1000, 100, 90), (1000, 400, 260), (50, 50, 35)])
def test_fdp_recursion_matches_the_written_out_algorithm(m, c, right):
    mus = np.linspace(0.0, 6.0, 61)
    fast = fdp.rejects(fdp.gaussian_floor, np.tile(mus, (1, 1)), m, np.array([c]), np.array([right]), 0.05)[0]
    slow = [reference_rejects(gauss_floor, mu, m, c, right, 0.05) for mu in mus]
    assert list(fast) == slow
    eps_delta = fdp.eps_delta_floor(DELTA)
    epss = np.linspace(0.0, 8.0, 41)
    fast = fdp.rejects(eps_delta, np.tile(epss, (1, 1)), m, np.array([c]), np.array([right]), 0.05)[0]
    slow = [reference_rejects(lambda r, e: float(eps_delta(np.array(r), np.array(e))), e, m, c, right, 0.05)
            for e in epss]
    assert list(fast) == slow


def test_fdp_two_guesses_by_hand():
    """c = c' = 2: r0 = 2τ/m, h1 = g(r0), r1 = r0 + h1, h2 = max(h1, g(r1)); reject iff r1 + h2 > 2/m,
    g(r) = Φ(Φ⁻¹(r) - μ).  At μ = 0 the sum is 8τ/m, so τ < 1/4 never rejects; at τ = 1/2, m = 2 the
    largest rejected μ solves r1 + h2 = 1."""
    m = 2
    included = np.array([True, False])
    bound = audit_one_run(np.array([1.0, 0.0]), included, delta=DELTA, confidence=0.95, guess_counts=[(1, 1)])
    assert bound.correct == 2 and bound.epsilon_lcb_fdp == 0.0

    def excess(mu):
        r0 = 2 * 0.5 / m
        h1 = norm.cdf(norm.ppf(r0) - mu)
        r1 = r0 + h1
        h2 = max(h1, norm.cdf(norm.ppf(min(r1, 1.0)) - mu))
        return r1 + h2 - 2 / m

    mu_star = brentq(excess, 1e-9, 10.0, xtol=1e-12)
    bound = audit_one_run(np.array([1.0, 0.0]), included, delta=DELTA, confidence=0.5, guess_counts=[(1, 1)])
    assert bound.mu_lcb == pytest.approx(mu_star, abs=1e-4)
    assert bound.epsilon_lcb_fdp == pytest.approx(fdp.gdp_epsilon(mu_star, DELTA), abs=1e-3)


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5])
def test_gdp_conversion_matches_dong_roth_su(mu):
    """δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (Dong, Roth, Su 2022, Cor. 2.13)."""
    eps = fdp.gdp_epsilon(mu, DELTA)
    delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert delta == pytest.approx(DELTA, rel=1e-6)
    assert fdp.gdp_mu(eps, DELTA) == pytest.approx(mu, rel=1e-6)


# --- soundness on mechanisms whose truth is known -----------------------------------------------
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_one_run_bounds_are_sound_on_the_gaussian_mechanism(epsilon):
    mu, seeds, m = fdp.gdp_mu(epsilon, DELTA), 12, 1000
    over = np.zeros(3, dtype=int)
    for seed in range(seeds):
        b = audit_one_run(*gaussian_canaries(mu, m, seed), delta=DELTA)
        over += np.array([b.mu_lcb > mu, b.epsilon_lcb_fdp_eps_delta > epsilon, b.epsilon_lcb_steinke > epsilon])
    assert over.max() <= allowed_exceedances(seeds, 0.95), over


def test_one_run_bounds_are_sound_on_a_mechanism_that_leaks_nothing():
    """Scores independent of inclusion (ε = 0 at every δ): any bound above 0 is a false alarm, so this is the
    sharpest check that the Bonferroni over guess counts keeps the confidence."""
    seeds, over = 40, np.zeros(3, dtype=int)
    for seed in range(seeds):
        b = audit_one_run(*gaussian_canaries(0.0, 500, 100 + seed), delta=DELTA)
        over += np.array([b.epsilon_lcb_fdp, b.epsilon_lcb_fdp_eps_delta, b.epsilon_lcb_steinke]) > 0.0
    assert over.max() <= allowed_exceedances(seeds, 0.95), over


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_eps_delta_bounds_are_sound_on_randomised_response(epsilon):
    truth, seeds, m = rr_true_epsilon(epsilon, DELTA), 12, 1000
    over = np.zeros(2, dtype=int)
    for seed in range(seeds):
        b = audit_one_run(*rr_canaries(epsilon, m, seed), delta=DELTA, method="fdp-eps-delta")
        over += np.array([b.epsilon_lcb_fdp_eps_delta, b.epsilon_lcb_steinke]) > truth
        assert b.epsilon_lcb == b.epsilon_lcb_fdp_eps_delta
    assert over.max() <= allowed_exceedances(seeds, 0.95), over


def test_gaussian_curve_is_no_eps_delta_bound_for_randomised_response():
    """Documented limit: RR's trade-off curve is sharper than the Gaussian one of the same (ε, δ), so the
    Gaussian f-DP bound rejects a true claim; ``fdp-eps-delta`` and ``steinke`` stay below the truth."""
    truth = rr_true_epsilon(1.0, DELTA)
    b = audit_one_run(*rr_canaries(1.0, 1000, 0), delta=DELTA)
    assert b.epsilon_lcb_fdp > truth > max(b.epsilon_lcb_fdp_eps_delta, b.epsilon_lcb_steinke)


# --- tightness ----------------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [4.0, 8.0])
def test_fdp_is_at_least_steinke_on_gaussian_scores(epsilon):
    """Mahloujifar et al. (Sec. 5) report their bound above Steinke et al.'s on the same guesses."""
    mu = fdp.gdp_mu(epsilon, DELTA)
    for seed in range(4):
        b = audit_one_run(*gaussian_canaries(mu, 1000, seed), delta=DELTA)
        assert b.epsilon_lcb_fdp > b.epsilon_lcb_steinke > 0.0
        assert b.epsilon_lcb_fdp_eps_delta >= b.epsilon_lcb_steinke - 1e-5
        assert b.epsilon_lcb == b.epsilon_lcb_fdp and b.method == "fdp"


def test_guessed_lists_the_reported_candidates_guesses_correct_first():
    scores, included = gaussian_canaries(fdp.gdp_mu(8.0, DELTA), 1000, 0)
    b = audit_one_run(scores, included, delta=DELTA)
    assert len(b.guessed) == b.guesses == b.k_plus + b.k_minus
    first = np.array(b.guessed[: b.correct])
    order = np.argsort(-scores, kind="stable")
    top, bottom = set(order[: b.k_plus].tolist()), set(order[len(scores) - b.k_minus:].tolist())
    assert set(b.guessed) == top | bottom
    assert all(included[i] == (i in top) for i in first)          # the first `correct` are the right ones
    assert "Bonferroni over" in b.threshold_rule


def test_default_candidates_depend_on_m_only():
    assert default_candidates(1000) == default_candidates(1000)
    assert default_candidates(16, "balanced") == [(8, 8), (4, 4)]
    assert default_candidates(16, "top") == [(8, 0)]
    assert all(kp + km <= 1000 for kp, km in default_candidates(1000))
    counts = count_correct(np.arange(10.0), np.arange(10) >= 5, [(5, 0), (2, 3), (5, 5)])
    assert counts.correct.tolist() == [5, 5, 10]


def test_one_run_is_deterministic():
    scores, included = rr_canaries(2.0, 500, 3)
    assert audit_one_run(scores, included, delta=DELTA) == audit_one_run(scores, included, delta=DELTA)


# --- jax_privacy's CanaryScoreAuditor on the same scores (bench-only peer) ----------------------
def load_jax_auditing():
    """jax_privacy's auditing module, loaded by file path (its package __init__ needs chex)."""
    spec = importlib.util.find_spec("jax_privacy")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("jax-privacy is not installed (bench-only peer: pip install --no-deps jax-privacy)")
    path = Path(list(spec.submodule_search_locations)[0]) / "auditing.py"
    if not path.exists():
        pytest.skip(f"jax_privacy has no auditing.py at {path}")
    name = "_jax_privacy_auditing"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except ImportError as err:
        del sys.modules[name]
        pytest.skip(f"jax_privacy/auditing.py cannot be loaded without its dependencies: {err}")
    return module


def test_our_maths_matches_jax_privacy_at_equal_counts():
    """Same (m, guesses, correct, significance): Steinke's and the f-DP ε agree with jax_privacy's helpers."""
    ja = load_jax_auditing()
    for m, c, right in [(1000, 100, 95), (1000, 400, 300), (10000, 600, 590)]:
        ours = steinke.epsilon_lcb(m, c, right, significance=0.01, delta=DELTA)
        assert ours == pytest.approx(ja._epsilon_one_run(0, m, c, right, 0.01, DELTA), abs=1e-4)
        mu = fdp.mu_lcb(m, [c], [right], significance=0.01)[0]
        theirs = ja._epsilon_one_run_fdp(0, m, c, right, 0.01, DELTA)
        assert fdp.gdp_epsilon(mu, DELTA) == pytest.approx(theirs, abs=2e-3)


@pytest.mark.parametrize("epsilon,m", [(4.0, 1000), (8.0, 1000), (4.0, 10000)])
def test_our_fdp_bound_is_at_least_jax_privacys_and_never_above_the_truth(epsilon, m):
    """On identical Gaussian canary scores (6 fixed seeds; 4 at m = 10000): our f-DP bound's mean is at least
    jax_privacy's ``epsilon_one_run_fdp`` (Bonferroni, its default) and every bound of both stays below the true ε.

    Where it does NOT hold: per seed jax's can be higher, and at ε = 1 with m = 1000 (both bounds near 0)
    its mean was (0.168 vs our 0.159 on these seeds): jax divides the significance by the number of ROC-hull
    vertices (~8-11, found on the labelled scores), we by our 13-21 candidates fixed by m alone, which is
    what keeps ours valid whatever the scores; ``test_both_bounds_stay_below_the_truth_at_small_epsilon``
    keeps that case checked for soundness."""
    ja = load_jax_auditing()
    mu = fdp.gdp_mu(epsilon, DELTA)
    ours, theirs = [], []
    for seed in range(6 if m <= 1000 else 4):
        scores, included = gaussian_canaries(mu, m, seed)
        ours.append(audit_one_run(scores, included, delta=DELTA).epsilon_lcb_fdp)
        theirs.append(ja.CanaryScoreAuditor(scores[included], scores[~included]).epsilon_one_run_fdp(0.05, DELTA))
    assert np.mean(ours) >= np.mean(theirs), (ours, theirs)
    assert max(ours) < epsilon and max(theirs) < epsilon


def test_both_bounds_stay_below_the_truth_at_small_epsilon():
    ja = load_jax_auditing()
    mu = fdp.gdp_mu(1.0, DELTA)
    for seed in range(6):
        scores, included = gaussian_canaries(mu, 1000, seed)
        assert audit_one_run(scores, included, delta=DELTA).epsilon_lcb_fdp < 1.0
        assert ja.CanaryScoreAuditor(scores[included], scores[~included]).epsilon_one_run_fdp(0.05, DELTA) < 1.0


# --- distinguishing audit -----------------------------------------------------------------------
def test_distinguish_perfect_separation_is_the_clopper_pearson_ceiling():
    """Every with-run above every without-run: on each half FP = FN = 0, the CP upper bound at 1 - β/2 of
    0 of n is 1 - (β/2)^(1/n), so ε_lcb = ln((1 - δ - u) / u) by hand."""
    t, beta = 40, 0.05
    b = audit_distinguish(np.arange(t) + 100.0, np.arange(t, dtype=float), delta=DELTA, confidence=1 - beta)
    u = 1 - (beta / 2) ** (1 / (t // 2))
    assert b.fpr_upper == pytest.approx(u, rel=1e-9) and b.fnr_upper == pytest.approx(u, rel=1e-9)
    assert b.epsilon_lcb == pytest.approx(math.log((1 - DELTA - u) / u), rel=1e-9)
    assert b.epsilon_lcb == pytest.approx(b.ceiling, rel=1e-12)
    assert 39.0 < b.threshold < 100.0
    assert b.replicate_bounds == (b.epsilon_lcb, b.epsilon_lcb)
    assert (b.runs_with, b.runs_without) == (t, t)


def test_distinguish_indistinguishable_runs_bound_nothing():
    rng = np.random.default_rng(0)
    b = audit_distinguish(rng.normal(size=200), rng.normal(size=200), delta=DELTA)
    assert b.epsilon_lcb == 0.0


def test_distinguish_reports_the_smaller_replicate():
    rng = np.random.default_rng(1)
    mu = fdp.gdp_mu(8.0, DELTA)
    b = audit_distinguish(rng.normal(size=300) + mu, rng.normal(size=300), delta=DELTA)
    assert b.epsilon_lcb == min(b.replicate_bounds) > 0.0
    assert "cross-fitted halves" in b.rule


@pytest.mark.parametrize("epsilon", [2.0, 8.0])
def test_distinguish_is_sound_on_the_gaussian_mechanism(epsilon):
    mu, seeds, over, bounds = fdp.gdp_mu(epsilon, DELTA), 100, 0, []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        b = audit_distinguish(rng.normal(size=200) + mu, rng.normal(size=200), delta=DELTA)
        over += b.epsilon_lcb > epsilon
        bounds.append(b.epsilon_lcb)
    assert over <= allowed_exceedances(seeds, 0.95)
    if epsilon == 8.0:
        assert np.median(bounds) > 1.0       # the audit finds the leak, it does not just stay at 0
