"""The f-DP one-run bound of Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential privacy in one
run" (arXiv 2410.22235, ICML 2025).

Same experiment as Steinke et al. (m canaries, each in with probability 1/2, c guesses, c' right), read
through a trade-off curve f instead of (ε, δ).  The paper's Sec. 4 bounds the probability τ of making
at least c' correct guesses by a recursion over the guesses ("audit_rh", with r capped at 1): starting from
r = τ c'/m (mass of correct guesses) and h = τ (c - c')/m (mass of wrong ones), for i = c'-1 down to 0

    h' = max(h, f(1 - r)),      r' = min(1, r + i / (c - i) · (h' - h)),

(f(1 - r) is the least probability the "wrong" hypothesis must give an event the "right" one gives
probability r), and an f-DP mechanism must end with r + h <= c/m.  If it ends above c/m with τ equal
to the significance, then seeing c' correct guesses had probability below the significance under the
claim, which is rejected.

Two families of curves are offered:

- ``gaussian``: f_μ(α) = Φ(Φ⁻¹(1 - α) - μ), μ-GDP (Dong, Roth, Su 2022, Def. 2.6).  This is the
  paper's choice for DP-SGD, whose trade-off curve is close to Gaussian.  The largest rejected μ is
  turned into ε at δ with the exact Gaussian conversion (Dong, Roth, Su Cor. 2.13; Balle & Wang 2018),
  via ``dp_accounting.get_epsilon_gaussian``.  Valid as an (ε, δ) bound only for mechanisms whose
  trade-off curve is at least Gaussian-shaped: a mechanism with a sharper curve (randomised response)
  can be (ε, δ)-DP yet reject the Gaussian curve of the same (ε, δ).
- ``eps_delta``: f_{ε,δ}(α) = max(0, 1 - δ - e^ε α, e^-ε (1 - δ - α)), the curve of (ε, δ)-DP itself
  (Kairouz et al. 2015; Dong, Roth, Su Prop. 2.5).  Sound for every (ε, δ)-DP mechanism.

Every candidate guess count is tested at once: the recursion runs on (candidates x grid) arrays.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, ndtri

from .bound_search import largest_rejected_rows

#: μ and ε above which the searches stop (no realistic number of canaries certifies more).
MU_CAP = 32.0
EPSILON_CAP = 50.0


def gaussian_floor(r: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """f_μ(1 - r) = Φ(Φ⁻¹(r) - μ): the least mass a μ-GDP mechanism gives the wrong side of an event of
    mass r."""
    return ndtr(ndtri(np.clip(r, 0.0, 1.0)) - mu)


def eps_delta_floor(delta: float):
    """f_{ε,δ}(1 - r) = max(0, 1 - δ - e^ε (1 - r), e^-ε (r - δ)), as a function of (r, ε)."""
    def floor(r: np.ndarray, eps: np.ndarray) -> np.ndarray:
        r = np.clip(r, 0.0, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            a = 1.0 - delta - np.exp(eps) * (1.0 - r)
        return np.maximum(0.0, np.maximum(np.nan_to_num(a, nan=0.0, neginf=0.0), np.exp(-eps) * (r - delta)))
    return floor


def rejects(floor, theta: np.ndarray, m: int, guesses: np.ndarray, correct: np.ndarray,
            significance: float) -> np.ndarray:
    """Whether each candidate's (guesses, correct) rejects the curve at each θ (``theta``: (J, G)).

    The paper's recursion with τ = ``significance``; a candidate stops once h no longer grows (then
    neither r nor h can change again).
    """
    c = np.asarray(guesses, dtype=float)[:, None]
    right = np.asarray(correct, dtype=np.int64)[:, None]
    shape = np.broadcast_shapes(theta.shape, c.shape)
    r = np.broadcast_to(significance * right / m, shape).astype(float)
    h = np.broadcast_to(significance * (c - right) / m, shape).astype(float)
    live = np.broadcast_to(right > 0, shape).copy()
    for step in range(int(right.max(initial=0))):
        i = right - 1 - step                                  # (J, 1): this candidate's index i
        live &= i >= 0
        if not live.any():
            break
        grown = np.maximum(h, floor(r, theta))
        moved = live & (grown > h)
        ratio = np.where(i >= 0, i / np.maximum(c - i, 1.0), 0.0)
        r = np.where(moved, np.minimum(r + ratio * (grown - h), 1.0), r)
        h = np.where(moved, grown, h)
        live = moved
    return r + h > c / m


def mu_lcb(m: int, guesses, correct, *, significance: float) -> np.ndarray:
    """Largest μ whose μ-GDP claim each candidate's guesses reject at ``significance`` (one per candidate)."""
    guesses, correct = np.atleast_1d(guesses), np.atleast_1d(correct)
    return largest_rejected_rows(lambda mu: rejects(gaussian_floor, mu, m, guesses, correct, significance),
                                 len(guesses), upper=MU_CAP)


def epsilon_lcb_eps_delta(m: int, guesses, correct, *, significance: float, delta: float) -> np.ndarray:
    """Largest ε whose (ε, δ) trade-off curve each candidate's guesses reject at ``significance``."""
    guesses, correct = np.atleast_1d(guesses), np.atleast_1d(correct)
    floor = eps_delta_floor(delta)
    return largest_rejected_rows(lambda eps: rejects(floor, eps, m, guesses, correct, significance),
                                 len(guesses), upper=EPSILON_CAP)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at δ of a μ-GDP mechanism (Dong, Roth, Su Cor. 2.13), computed by dp_accounting (the Gaussian
    mechanism with σ = 1/μ, Balle & Wang 2018)."""
    if mu <= 0.0:
        return 0.0
    return float(_dp_accounting().get_epsilon_gaussian(1.0 / mu, delta))


def gdp_mu(epsilon: float, delta: float) -> float:
    """μ of the Gaussian mechanism that is exactly (ε, δ)-DP (inverse of ``gdp_epsilon``), by dp_accounting."""
    sigma = float(_dp_accounting().get_sigma_gaussian(epsilon, delta))
    return math.inf if sigma == 0.0 else 1.0 / sigma


def _dp_accounting():
    try:
        import dp_accounting
    except ImportError as err:  # pragma: no cover - the dp extra installs it
        raise ImportError("the f-DP bound converts μ to ε with dp-accounting, which is not installed; "
                          "fix: pip install 'pytest-privleak[dp]'") from err
    return dp_accounting
