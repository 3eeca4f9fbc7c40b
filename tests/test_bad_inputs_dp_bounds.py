"""Bad inputs of the DP audit's bounds (issue 25): each gives a clear ValueError naming the argument and the fix."""
import math

import numpy as np
import pytest

from pytest_privleak.dp.distinguish import audit_distinguish
from pytest_privleak.dp.one_run import audit_one_run
from pytest_privleak.finite import NonFiniteError

SCORES = np.linspace(0.0, 1.0, 20)
INCLUDED = np.arange(20) % 2 == 0


@pytest.mark.parametrize("delta", [0.0, -1e-5, 1.0, 1.5, math.nan, math.inf, "1e-5", True, None])
def test_one_run_bad_delta(delta):
    with pytest.raises(ValueError, match=r"delta=.* must lie strictly between 0 and 1 .*fix: pass the δ"):
        audit_one_run(SCORES, INCLUDED, delta=delta)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, math.nan, "0.95", True])
def test_one_run_bad_confidence(confidence):
    with pytest.raises(ValueError, match=r"confidence=.* must lie strictly between 0 and 1; fix"):
        audit_one_run(SCORES, INCLUDED, delta=1e-5, confidence=confidence)


def test_one_run_mismatched_lengths():
    with pytest.raises(ValueError, match=r"included has shape \(19,\) but scores has 20 entries; fix"):
        audit_one_run(SCORES, INCLUDED[:19], delta=1e-5)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_one_run_non_finite_scores(bad):
    scores = SCORES.copy()
    scores[3] = bad
    with pytest.raises(NonFiniteError, match=r"scores \(canary scores\): 1 of 20 value\(s\) are NaN or infinite.*Fix"):
        audit_one_run(scores, INCLUDED, delta=1e-5)


def test_one_run_fewer_than_two_canaries():
    with pytest.raises(ValueError, match=r"needs at least 2 canaries, got 1; fix"):
        audit_one_run([0.3], [True], delta=1e-5)


@pytest.mark.parametrize("included", [np.arange(20) % 2, (np.arange(20) % 2).astype(float), ["yes"] * 20])
def test_one_run_included_not_boolean(included):
    with pytest.raises(ValueError, match=r"included must be a boolean array .*got dtype .*fix: pass the inclusion"):
        audit_one_run(SCORES, included, delta=1e-5)


def test_one_run_scores_not_1d():
    with pytest.raises(ValueError, match=r"scores must be 1-D .*got shape \(4, 5\); fix"):
        audit_one_run(SCORES.reshape(4, 5), INCLUDED, delta=1e-5)


def test_one_run_scores_not_numbers():
    with pytest.raises(ValueError, match=r"scores must be a 1-D array of numbers, got list; fix"):
        audit_one_run(["a"] * 20, INCLUDED, delta=1e-5)


@pytest.mark.parametrize("counts,match", [
    ([], r"guess_counts is empty; fix"),
    ([(0, 0)], r"guess_counts\[0\]=\(0, 0\) guesses no canary .*empty guess set.*fix"),
    ([(5, 5), (15, 10)], r"guess_counts\[1\]=\(15, 10\) guesses 25 canaries but only 20 were scored; fix"),
    ([(5, -1)], r"guess_counts\[0\]=\(5, -1\) must hold two non-negative integers; fix"),
    ([(2.5, 1)], r"guess_counts\[0\]=\(2.5, 1\) must hold two non-negative integers; fix"),
    ([(3,)], r"guess_counts\[0\]=\(3,\) is not a \(k_plus, k_minus\) pair; fix"),
    ("sideways", r"guess_counts='sideways' names no candidate set; fix: pass one of both, balanced, top"),
])
def test_one_run_bad_guess_counts(counts, match):
    with pytest.raises(ValueError, match=match):
        audit_one_run(SCORES, INCLUDED, delta=1e-5, guess_counts=counts)


def test_one_run_unknown_method():
    with pytest.raises(ValueError, match=r"method='gdp' is not a one-run bound; fix: pass one of fdp, fdp-eps-delta, "
                                           r"steinke"):
        audit_one_run(SCORES, INCLUDED, delta=1e-5, method="gdp")


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, math.nan])
def test_distinguish_bad_delta(delta):
    with pytest.raises(ValueError, match=r"delta=.* must lie strictly between 0 and 1"):
        audit_distinguish([1.0, 2.0], [0.0, 0.5], delta=delta)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 2.0])
def test_distinguish_bad_confidence(confidence):
    with pytest.raises(ValueError, match=r"confidence=.* must lie strictly between 0 and 1"):
        audit_distinguish([1.0, 2.0], [0.0, 0.5], delta=1e-5, confidence=confidence)


def test_distinguish_too_few_runs():
    with pytest.raises(ValueError, match=r"scores_without holds 1 run\(s\); .*at least 2 runs per "
                                           r"group.*fix: train more"):
        audit_distinguish([1.0, 2.0], [0.0], delta=1e-5)


def test_distinguish_non_finite_scores():
    with pytest.raises(NonFiniteError, match=r"scores_with \(canary scores\): 1 of 3 value\(s\) are NaN"):
        audit_distinguish([1.0, math.nan, 2.0], [0.0, 0.5], delta=1e-5)


def test_distinguish_scores_not_1d():
    with pytest.raises(ValueError, match=r"scores_without must be 1-D"):
        audit_distinguish([1.0, 2.0], [[0.0, 0.5]], delta=1e-5)
