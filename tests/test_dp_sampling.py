"""The sampler and accounting tests of the DP-SGD audit (issue 32, item 4): maths against hand-derived values,
exactness under Poisson sampling (a false-alarm rate measured on simulated loaders), and each broken sampler
recognised by the property it breaks."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from pytest_privleak.dp.sampling import (central_set, neighbour_normalisation, sampling_properties, two_sided,
                                         within_run_normalisation)


def _by_name(properties):
    return {p.name: p for p in properties}


# --- hand-derived values ------------------------------------------------------------------------------------------

def test_two_sided_binomial_p_value_is_twice_the_smaller_tail():
    assert two_sided(0, 10, 0.5) == pytest.approx(2 / 1024)
    assert two_sided(10, 10, 0.5) == pytest.approx(2 / 1024)
    assert two_sided(5, 10, 0.5) == 1.0   # both tails above 1/2
    assert two_sided(1, 4, 0.25) == 1.0


def test_central_set_of_binomial_4_half():
    # pmf 1, 4, 6, 4, 1 over 16: the mode 2 holds 6/16 < 1/2, so one neighbour joins (the right on a tie): 10/16
    assert central_set(4, 0.5) == (2, 3, pytest.approx(10 / 16))


def test_shuffled_epochs_by_hand():
    # N = 4, q = 1/2, epochs shuffled into batches of 2: [0, 1], [2, 3], [1, 3], [0, 2]
    batches = [[0, 1], [2, 3], [1, 3], [0, 2]]
    got = _by_name(sampling_properties(batches, 4, 0.5))
    assert got["sampling rate"].p_value == 1.0                     # 8 of 16 inclusions: exactly N T q
    # pairs of steps (0, 1) and (2, 3) share no record: Binomial(8, 1/4) at 0 is 0.75^8, twice that two-sided
    assert got["independent steps"].p_value == pytest.approx(2 * 0.75 ** 8)
    # every record twice in 4 steps: the central half of Binomial(4, 1/2) is {2, 3} (10/16), all 4 records in it
    # (P = (10/16)^4, doubled), and the largest count 2 (P(max >= 2) = 1 - (5/16)^4, not small)
    assert got["equal per-record frequencies"].p_value == pytest.approx(min(1.0, 2 * 2 * (10 / 16) ** 4))
    assert got["each record at most once per step"].p_value == 1.0


def test_a_record_twice_in_one_batch_is_impossible_under_poisson():
    got = _by_name(sampling_properties([[0, 1], [2, 2, 3]], 4, 0.5))
    assert got["each record at most once per step"].p_value == 0.0
    assert "1 repeated records in one batch (first at step 2)" in got["each record at most once per step"].measured


def test_fixed_batch_sizes_fail_the_equal_pairs_count():
    rng = np.random.default_rng(0)
    batches = [rng.permutation(300)[:64] for _ in range(20)]   # fixed size 64, accounted q = 64 / 300
    got = _by_name(sampling_properties(batches, 300, 64 / 300))
    sizes = got["batch sizes Binomial(N, q)"]
    assert "10 of 10 disjoint pairs of steps of equal size" in sizes.measured and sizes.p_value < 1e-10


def test_within_run_normalisation_reads_the_slope_by_hand():
    sizes = np.array([50, 60, 70, 80, 90, 100.0])
    # noise RMS exactly proportional to 1 / batch size: slope -1 whatever the coordinates
    actual = within_run_normalisation(sizes, 3.0 / sizes, coordinates=10_001)
    assert "^-1.000" in actual.measured and actual.p_value < 1e-12
    constant = within_run_normalisation(sizes, np.full(6, 0.04), coordinates=10_001)
    assert "^0.000" in constant.measured and constant.p_value == 1.0
    # with P coordinates log RMS has variance 1 / (2 (P - 1)): the slope's standard error below
    se = math.sqrt(1 / (2 * 10_000) / np.sum((np.log(sizes) - np.log(sizes).mean()) ** 2))
    assert f"± {se:.3f}" in constant.measured
    assert within_run_normalisation(sizes, np.zeros(6), coordinates=100).p_value is None   # no noise: not tested


def test_neighbour_normalisation_tolerates_an_eighth_of_a_record_and_flags_one():
    base = np.full(20, 0.05)
    one_record = {"the data": (base, 300), "one record removed": (base * 60 / 59, 299)}
    flagged = neighbour_normalisation(one_record, coordinates=7175, expected_batch=60)
    assert flagged.p_value < 1e-5 and "x1.0169" in flagged.measured
    # sigma(q = B / N) moves 0.2 % a record: an eighth of a record's share of 64 is tolerated, the rest is far
    # inside the noise (z = (log 1.002 - log(65/64) / 8) / sqrt((1/20 + 1/20) / (2 * 7174)))
    drift = {"the data": (base, 300), "one record removed": (base * 1.002, 299)}
    z = (math.log(1.002) - math.log1p(1 / 64) / 8) / math.sqrt(0.1 / (2 * 7174))
    assert neighbour_normalisation(drift, coordinates=7175, expected_batch=64).p_value == pytest.approx(
        2 * norm.sf(z)) and z < 0.1


# --- exact under Poisson: the false-alarm rate on simulated loaders --------------------------------------------

def _false_alarms(runs: int, seed: int = 32, level: float = 0.05) -> int:
    """Correct Poisson loaders at the audit's setting (N = 300, q = 64 / 300, 19 steps) flagged at ``level``."""
    rng = np.random.default_rng(seed)
    n, q, steps = 300, 64 / 300, 19
    fired = 0
    for _ in range(runs):
        batches = [np.flatnonzero(rng.random(n) < q) for _ in range(steps)]
        tested = [p.p_value for p in sampling_properties(batches, n, q) if p.p_value is not None]
        fired += min(p * len(tested) for p in tested) <= level
    return fired


def test_false_alarm_rate_on_simulated_poisson_loaders_is_within_the_level():
    # each test is exact, so the Bonferroni-combined verdict at level 0.05 fires at most 5 % of the time
    # (measured: 57 of 2000, 2.9 %, .notes/issue32_sampling_false_alarms.txt); 200 loaders: 20 or more flagged
    # would happen with probability below 0.3 % at a true 5 %
    assert _false_alarms(200) < 20


@pytest.mark.slow
def test_false_alarm_rate_over_2000_simulated_poisson_loaders_at_the_default_level():
    # the audit's default confidence 0.999: at most 0.1 %, so 2000 correct loaders flag at most a handful (6 or
    # more would happen with probability below 1.7 % at a true 0.1 %)
    fired = _false_alarms(2000, seed=33, level=0.001)
    assert fired <= 5, f"{fired} of 2000 correct loaders flagged at 0.001"
