"""A limit at the end of a pooled rate's range (at most 0, at least 1) over seeds is judged on the counts.

No one-sided Clopper-Pearson bound reaches 0 or 1: the upper bound of 0/n solves (1 - u)^n = 0.05, so
u = 1 - 0.05^(1/n); for n = 50 (5 seeds x 10 trials), 0.05^(1/50) = exp(ln 0.05 / 50) = exp(-0.0599146) =
0.9418446, u = 0.0581554 > 0 whatever the counts. Before this rule a limit of 0 with k > 1 could never pass.
"""
import pytest

from pytest_privleak.attacks.over_seeds import aggregate, limit_at_range_end, pooled_rate_summary, t_summary
from pytest_privleak.results import LeakResult

UPPER_0_OF_50 = 0.0581554  # by hand, above


def _cea(correct: int, threshold: float, direction: str = "at_most", trials: int = 10) -> LeakResult:
    return LeakResult(attack="cea", metric="accuracy", value=correct / trials, threshold=threshold,
                      direction=direction, confidence=0.95, label="pin",
                      extra={"correct": float(correct), "n_trials": float(trials)})


def test_no_extraction_in_any_seed_passes_a_zero_limit_and_says_the_bound_is_not_zero():
    agg = aggregate([_cea(0, 0.0) for _ in range(5)], [0, 1, 2, 3, 4])
    assert agg.passed and agg.value == 0.0
    assert agg.extra["upper_bound"] == pytest.approx(UPPER_0_OF_50, abs=1e-6)
    assert agg.interval[0] == 0.0 and agg.interval[1] > UPPER_0_OF_50  # two-sided: 1 - 0.025^(1/50) = 0.0711
    text = agg.explain()
    assert "can never certify 0" in text and "0 of 50 trials over 5 seeds succeeded (no seed)" in text
    assert "none seen in 50 trials, which bounds the rate by 0.058" in text


def test_one_extraction_by_one_seed_fails_a_zero_limit_naming_the_seed():
    agg = aggregate([_cea(0, 0.0), _cea(0, 0.0), _cea(1, 0.0), _cea(0, 0.0), _cea(0, 0.0)], [10, 11, 12, 13, 14])
    assert not agg.passed and agg.value == pytest.approx(1 / 50)  # the observed pooled rate, not a bound
    assert agg.extra["share_over_limit"] == pytest.approx(1 / 5) and agg.extra["worst_seed"] == 12
    assert "1 of 50 trials over 5 seeds succeeded (seed 12)" in agg.explain()


def test_at_least_one_is_judged_on_the_counts_too():
    assert aggregate([_cea(10, 1.0, "at_least"), _cea(10, 1.0, "at_least")], [0, 1]).passed
    missed = aggregate([_cea(10, 1.0, "at_least"), _cea(9, 1.0, "at_least")], [0, 1])
    assert not missed.passed and missed.value == pytest.approx(19 / 20)
    assert "1 of 20 trials over 2 seeds missed (seed 1)" in missed.explain()


def test_an_inner_limit_keeps_the_bound_rule():
    # 0/50 under a limit of 0.05: the bound 0.058 exceeds it, so the pipeline plausibly extracts > 5 %
    agg = aggregate([_cea(0, 0.05) for _ in range(5)], [0, 1, 2, 3, 4])
    assert not agg.passed and agg.value == pytest.approx(UPPER_0_OF_50, abs=1e-6)
    assert aggregate([_cea(0, 0.06) for _ in range(5)], [0, 1, 2, 3, 4]).passed


def test_only_pooled_rates_at_the_range_end_are_judged_on_counts():
    pooled = pooled_rate_summary([0, 0], [10, 10])
    assert limit_at_range_end(pooled, "at_most", 0.0) and limit_at_range_end(pooled, "at_least", 1.0)
    assert not limit_at_range_end(pooled, "at_most", 0.01) and not limit_at_range_end(pooled, "at_least", 0.99)
    assert not limit_at_range_end(pooled, "at_most", None)
    assert not limit_at_range_end(t_summary([0.0, 0.0, 0.0]), "at_most", 0.0)  # a real figure: no counts


def test_one_seed_keeps_the_observed_figure_as_before():
    one = aggregate([_cea(0, 0.0)], [3])
    assert one.passed and one.value == 0.0 and "one draw" in one.explain()
