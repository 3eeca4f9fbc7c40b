"""ε lower bound from ONE training run with m canaries (the audit's ``one-run`` method).

Each canary was included with probability 1/2 (independently, before training); ``scores`` rank them
(higher = more likely included).  For every candidate guess count the auditor guesses the top
``k_plus`` IN and the bottom ``k_minus`` OUT (``guess_counts``), counts the correct guesses, and turns
them into three bounds (each valid at ``confidence`` on its own; ``method`` picks the reported one):

- f-DP (Mahloujifar, Melis, Chaudhuri 2024, Sec. 4): the Gaussian trade-off curve, ε at δ of the
  largest μ rejected (``fdp``, the issue's default, as in the paper and jax_privacy).  It is a lower
  bound on ε only for mechanisms whose curve is at least the Gaussian one of the same (ε, δ): true of
  the Gaussian mechanism, NOT of randomised response (its bound exceeded RR's true ε in 100 of 100
  seeds, ε = 1, m = 10,000) nor exactly of subsampled DP-SGD (whose privacy profile lies above the
  matching Gaussian's at other ε).  ``fdp-eps-delta`` is the same analysis with the (ε, δ) curve: sound
  for every (ε, δ)-DP mechanism; above Steinke's on Gaussian scores in our tests (on randomised response
  with every canary guessed, Steinke's was higher by about 0.001).
- (ε, δ) of Steinke, Nasr, Jagielski 2023 (Sec. 3 and 5) (``steinke``).

Validity of the choice of guess counts: every candidate is tested at (1 - confidence) / J (Bonferroni
over the J candidates, named in ``threshold_rule``); one pair given in ``guess_counts`` (fixed before
the run, e.g. from a pilot run) is tested at 1 - confidence.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fdp, steinke
from .guess_counts import count_correct, default_candidates
from .inputs import check_confidence, check_delta, check_guess_counts, check_one_run_inputs

METHODS = ("fdp", "fdp-eps-delta", "steinke")


@dataclass(frozen=True)
class OneRunBound:
    """ε lower bounds from one run, with the guesses behind the reported one."""

    epsilon_lcb: float            # the reported bound (of ``method``)
    epsilon_lcb_fdp: float        # Mahloujifar et al. 2024, Gaussian trade-off curve, ε at δ
    epsilon_lcb_steinke: float    # Steinke et al. 2023, (ε, δ)
    method: str                   # "fdp", "fdp-eps-delta" or "steinke"
    guesses: int
    correct: int
    k_plus: int
    k_minus: int
    guessed: tuple[int, ...]      # indices of the canaries guessed by the reported bound, correct ones first
    confidence: float
    delta: float
    threshold_rule: str           # how k_plus / k_minus were chosen so that the bound stays valid
    mu_lcb: float = 0.0           # the largest μ rejected by the f-DP bound (GDP)
    epsilon_lcb_fdp_eps_delta: float = 0.0   # Mahloujifar et al.'s analysis with the (ε, δ) curve
    canaries: int = 0             # m
    ceiling: float = 0.0          # the reported bound had every guess been right: claims >= it cannot fail here


def audit_one_run(scores, included, *, delta: float, confidence: float = 0.95, method: str = "fdp",
                  guess_counts=None) -> OneRunBound:
    """One-run ε lower bound at ``confidence`` from canary ``scores`` and their ``included`` draw.

    ``guess_counts``: None or "both" (the default candidates: balanced and top-only guesses), "balanced"
    or "top" (only that shape), each fixed by m alone with Bonferroni over them; or a list of
    ``(k_plus, k_minus)`` fixed before the run (Bonferroni over that list; none for a single pair).
    ``included`` must be in an order fixed before the inclusion draw (canary ids, not sorted by inclusion).
    """
    scores, included = check_one_run_inputs(scores, included)
    check_delta(delta)
    check_confidence(confidence)
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not a one-run bound; fix: pass one of {', '.join(METHODS)}")
    m = len(scores)
    given = guess_counts is not None and not isinstance(guess_counts, str)
    candidates = check_guess_counts(guess_counts, m) if given else default_candidates(m, guess_counts or "both")
    counts = count_correct(scores, included, candidates)
    significance = (1.0 - confidence) / len(candidates)
    guesses, correct = counts.guesses, counts.correct

    mu = fdp.mu_lcb(m, guesses, correct, significance=significance)
    eps_delta = fdp.epsilon_lcb_eps_delta(m, guesses, correct, significance=significance, delta=delta)
    st, st_j = steinke.best_epsilon_lcb(m, guesses, correct, significance=significance, delta=delta)
    best = {"fdp": int(np.argmax(mu)), "fdp-eps-delta": int(np.argmax(eps_delta)), "steinke": st_j}
    j = best[method]
    mu_best = float(mu[best["fdp"]])
    eps = {"fdp": fdp.gdp_epsilon(mu_best, delta), "fdp-eps-delta": float(eps_delta[best["fdp-eps-delta"]]),
           "steinke": st}
    return OneRunBound(
        epsilon_lcb=eps[method], epsilon_lcb_fdp=eps["fdp"], epsilon_lcb_steinke=eps["steinke"], method=method,
        guesses=int(guesses[j]), correct=int(correct[j]), k_plus=int(counts.k_plus[j]),
        k_minus=int(counts.k_minus[j]), guessed=counts.guessed(j, included), confidence=confidence, delta=delta,
        threshold_rule=_rule(candidates, None if given else (guess_counts or "both"), confidence), mu_lcb=mu_best,
        epsilon_lcb_fdp_eps_delta=eps["fdp-eps-delta"], canaries=m,
        ceiling=ceiling(method, m, guesses, significance=significance, delta=delta))


def ceiling(method: str, m: int, guesses, *, significance: float, delta: float) -> float:
    """The largest bound ``method`` can give with these candidate guess counts: every guess right.

    A claimed ε at or above it cannot be refuted with this many canaries, whatever the model leaks (the
    audit is then inconclusive, not a pass).
    """
    guesses = np.asarray(guesses)
    if method == "steinke":
        return steinke.best_epsilon_lcb(m, guesses, guesses, significance=significance, delta=delta)[0]
    if method == "fdp-eps-delta":
        return float(np.max(fdp.epsilon_lcb_eps_delta(m, guesses, guesses, significance=significance, delta=delta)))
    return fdp.gdp_epsilon(float(np.max(fdp.mu_lcb(m, guesses, guesses, significance=significance))), delta)


def _rule(candidates, sides: str | None, confidence: float) -> str:
    alpha = 1.0 - confidence
    where = "given" if sides is None else f"default {sides!r}, fixed by m alone"
    if len(candidates) == 1:
        return (f"guess counts (k_plus, k_minus) = {candidates[0]} fixed before the run ({where}): no correction, "
                f"significance {alpha:g}")
    return (f"Bonferroni over {len(candidates)} candidate (k_plus, k_minus) ({where}): each tested at "
            f"significance {alpha:g}/{len(candidates)} = {alpha / len(candidates):.3g}, the best kept")
