"""Clopper-Pearson bounds against values derived by hand."""
import math

import pytest

from pytest_privleak.stats import clopper_pearson, clopper_pearson_lower, clopper_pearson_upper


def test_zero_successes_upper_bound_is_closed_form():
    # k = 0: the upper bound solves (1 - p)^n = 1 - confidence.
    assert clopper_pearson_upper(0, 10, 0.95) == pytest.approx(1 - 0.05 ** (1 / 10))
    assert clopper_pearson_lower(0, 10, 0.95) == 0.0


def test_all_successes_lower_bound_is_closed_form():
    # k = n: the lower bound solves p^n = 1 - confidence.
    assert clopper_pearson_lower(10, 10, 0.95) == pytest.approx(0.05 ** (1 / 10))
    assert clopper_pearson_upper(10, 10, 0.95) == 1.0


def test_two_sided_splits_alpha():
    lo, hi = clopper_pearson(0, 10, 0.95)
    assert lo == 0.0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 10))
    lo, hi = clopper_pearson(5, 10, 0.95)
    assert lo < 0.5 < hi
    assert lo == pytest.approx(1 - hi)  # symmetric at k = n/2


@pytest.mark.parametrize("k,n,conf", [(-1, 10, 0.9), (11, 10, 0.9), (1, 0, 0.9), (1, 10, 1.0), (1, 10, 0.0)])
def test_bad_arguments_are_rejected(k, n, conf):
    with pytest.raises(ValueError):
        clopper_pearson(k, n, conf)


def test_bounds_bracket_the_estimate():
    for k in range(0, 21):
        lo, hi = clopper_pearson(k, 20, 0.9)
        assert lo <= k / 20 <= hi
        assert not math.isnan(lo) and not math.isnan(hi)
