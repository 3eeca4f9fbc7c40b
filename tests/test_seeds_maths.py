"""Figures over training seeds (issue 26): intervals, verdicts and the gate's test on planted per-seed figures.

Expected values are derived by hand from t-table quantiles: t_{0.975, 2} = 4.302653,
t_{0.95, 2} = 2.919986; and the closed form of Student's t CDF with 4 degrees of freedom.
"""
import math

import pytest
from scipy.stats import binom

from pytest_privleak.attacks.over_seeds import aggregate, pooled_rate_summary, t_summary
from pytest_privleak.report.gate import compare, gate_lines
from pytest_privleak.report.seed_rule import seed_test
from pytest_privleak.results import LeakResult

SE_123 = 1 / math.sqrt(3)  # values 1, 2, 3: s = 1, k = 3


def test_t_summary_of_one_two_three():
    s = t_summary([1.0, 2.0, 3.0], 0.95)
    assert s.mean == pytest.approx(2.0)
    assert s.interval == pytest.approx((2 - 4.302653 * SE_123, 2 + 4.302653 * SE_123), abs=1e-5)
    assert s.upper == pytest.approx(2 + 2.919986 * SE_123, abs=1e-5)
    assert s.lower == pytest.approx(2 - 2.919986 * SE_123, abs=1e-5)
    assert "Student t over 3 seeds (2 df)" in s.method


def test_t_summary_with_an_infinite_seed_is_the_range():
    s = t_summary([1.0, math.inf, 3.0])
    assert (s.lower, s.upper) == (1.0, math.inf) and "range" in s.method


def test_pooled_rate_is_clopper_pearson_over_all_trials():
    s = pooled_rate_summary([1, 2], [10, 10], 0.95)
    assert s.mean == pytest.approx(3 / 20)
    assert s.values == (0.1, 0.2)
    # the one-sided upper bound u solves P[X <= 3 | n = 20, p = u] = 0.05 (and the lower P[X >= 3 | l] = 0.05)
    assert binom.cdf(3, 20, s.upper) == pytest.approx(0.05, abs=1e-9)
    assert binom.sf(2, 20, s.lower) == pytest.approx(0.05, abs=1e-9)
    assert "Clopper-Pearson, pooled over 2 seeds (3/20)" in s.method


def _result(value, threshold=None, direction="at_most", **extra):
    return LeakResult(attack="planted", metric="figure", value=value, threshold=threshold, direction=direction,
                      confidence=0.95, label="p", extra=extra)


def test_upper_bound_fails_although_every_seed_is_within_the_limit():
    agg = aggregate([_result(0.1, 0.35), _result(0.3, 0.35), _result(0.2, 0.35)], [0, 1, 2])
    assert agg.value == pytest.approx(0.2 + 2.919986 * 0.1 * SE_123, abs=1e-6)  # 0.36859 > 0.35
    assert not agg.passed
    assert agg.per_seed == (0.1, 0.3, 0.2)
    assert agg.extra["mean"] == pytest.approx(0.2)
    assert agg.extra["worst_seed"] == 1 and agg.extra["share_over_limit"] == 0
    text = agg.explain()
    assert "upper bound over seeds" in text and "Student t over 3 seeds" in text and "seed 1: 0.300" in text


def test_at_least_uses_the_lower_bound_and_counts_seeds_under_the_limit():
    agg = aggregate([_result(v, 4.5, "at_least") for v in (5.0, 6.0, 7.0)], [3, 4, 5])
    assert agg.value == pytest.approx(6 - 2.919986 * SE_123, abs=1e-5)  # 4.314 < 4.5
    assert not agg.passed and agg.extra["worst_seed"] == 3 and agg.extra["share_over_limit"] == 0
    agg = aggregate([_result(v, 4.0, "at_least") for v in (5.0, 6.0, 7.0)], [3, 4, 5])
    assert agg.passed


def test_a_rate_given_as_counts_is_pooled():
    members = [_result(0.1, 0.5, correct=1.0, n_trials=10.0), _result(0.2, 0.5, correct=2.0, n_trials=10.0)]
    agg = aggregate(members, [0, 1])
    assert agg.value == pytest.approx(pooled_rate_summary([1, 2], [10, 10]).upper)
    assert "Clopper-Pearson" in agg.evidence["over seeds"]


def test_measure_over_seeds_reports_the_mean():
    agg = aggregate([_result(1.0), _result(3.0)], [0, 1])
    assert agg.value == 2.0 and agg.threshold is None and agg.verdict == "measured"


def test_one_seed_is_the_member_result_said_to_be_one_draw():
    one = aggregate([_result(0.3, 0.35)], [7])
    assert one.value == 0.3 and one.per_seed == () and one.passed
    assert "one draw" in one.explain() and "training seed 7" in one.explain()


def test_welch_p_value_matches_the_closed_form_for_four_df():
    # before 1,2,3 and after 4,5,6: t = 3 / sqrt(2/3) = 3.6742, Welch df = 4;
    # F_4(t) = 1/2 + (3/8) * u * (1 - t^2 / (12 (1 + t^2/4))), u = t / sqrt(1 + t^2/4)
    t = 3 / math.sqrt(2 / 3)
    u = t / math.sqrt(1 + t * t / 4)
    p = 0.5 - 3 / 8 * u * (1 - t * t / (12 * (1 + t * t / 4)))
    worse, better = seed_test("at_most", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert worse == pytest.approx(p, rel=1e-9) and p == pytest.approx(0.01066, abs=1e-4)
    assert better == pytest.approx(1 - p, rel=1e-9)
    # at_least mirrors: the same samples are an improvement there
    assert seed_test("at_least", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0])[1] == pytest.approx(p, rel=1e-9)
    assert seed_test("at_most", [1.0, 1.0], [2.0, 2.0]) is None


def _report(values, nodeid="t.py::t", direction="at_most", per_seed=True, tolerance=0.05):
    mean = sum(values) / len(values)
    result = {"key": f"{nodeid}::planted.figure", "attack": "planted", "metric": "figure", "value": mean,
              "direction": direction, "label": "", "per_seed": list(values) if per_seed else [],
              "tolerance": tolerance}
    return {"tests": [{"nodeid": nodeid, "results": [result]}]}


def test_gate_flags_a_shift_over_seeds_and_passes_noise():
    regressed = compare(_report([4.0, 5.0, 6.0]), _report([1.0, 2.0, 3.0]), {}, "b.json")
    assert [c["key"] for c in regressed["regressions"]] == ["t.py::t::planted.figure"]
    change = regressed["regressions"][0]
    assert change["p_value"] == pytest.approx(0.01066, abs=1e-4)
    assert change["before"] == 2.0 and change["after"] == 5.0
    assert regressed["seeds"][0]["before_seeds"] == [1.0, 2.0, 3.0]
    text = "\n".join(gate_lines(regressed))
    assert "one-sided Welch t over seeds, alpha 0.05: p = 0.0107" in text and "(1.000, 2.000, 3.000)" in text
    # a mean shift of 1 with s = 1 (p = 0.14) is noise for the test, though far beyond the 0.05 tolerance
    noise = compare(_report([2.0, 3.0, 4.0]), _report([1.0, 2.0, 3.0]), {}, "b.json")
    assert noise["passed"] and not noise["regressions"]
    assert "1 over training seeds, by the seed rule at alpha 0.05" in "\n".join(gate_lines(noise))
    improved = compare(_report([1.0, 2.0, 3.0]), _report([4.0, 5.0, 6.0]), {}, "b.json")
    assert improved["passed"] and len(improved["improvements"]) == 1


def test_a_significant_shift_within_the_tolerance_is_not_a_regression():
    # old: every seed 0.02 bits higher (another BLAS, say) against a 1-bit tolerance failed as "beyond tolerance"
    before = [5.00, 5.01, 4.99, 5.02, 5.00, 5.01, 5.03]
    after = [b + 0.02 for b in before]
    shifted = compare(_report(after, tolerance=1.0), _report(before, tolerance=1.0), {}, "b.json")
    assert shifted["passed"] and not shifted["regressions"]
    assert shifted["seeds"][0]["p_value"] < 0.05 and shifted["seeds"][0]["outcome"] == "same"
    # beyond the tolerance and significant: a regression, whose line gives both
    moved = compare(_report([a + 1.5 for a in before]), _report(before), {}, "b.json")
    line = "\n".join(gate_lines(moved))
    assert len(moved["regressions"]) == 1 and "mean moved 1.500 against tolerance 0.050" in line


def test_gate_without_spread_over_seeds_uses_the_tolerance():
    same = compare(_report([2.0, 2.0, 2.0]), _report([2.03, 2.03, 2.03]), {}, "b.json")
    assert same["passed"]
    worse = compare(_report([2.1, 2.1, 2.1]), _report([2.0, 2.0, 2.0]), {}, "b.json")
    assert len(worse["regressions"]) == 1 and "tolerance" in worse["regressions"][0]["rule"]


def test_gate_refuses_a_baseline_saved_with_another_k():
    mixed = compare(_report([1.0, 2.0, 3.0, 4.0, 5.0]), _report([1.0, 2.0, 3.0]), {}, "b.json")
    assert not mixed["passed"] and len(mixed["invalid"]) == 1
    reason = mixed["invalid"][0]["reason"]
    assert "saved with 3 training seed(s) (k=3)" in reason and "measured 5 (k=5)" in reason
    assert "--privleak-seeds 3" in reason
    one = compare(_report([2.0], per_seed=False), _report([1.0, 2.0, 3.0]), {}, "b.json")
    assert "k=1" in one["invalid"][0]["reason"]


def test_gate_alpha_must_be_a_level():
    with pytest.raises(ValueError, match="alpha=0.7"):
        compare(_report([1.0, 2.0]), _report([1.0, 2.0]), {}, "b.json", alpha=0.7)


def test_a_t_interval_over_seeds_stays_within_the_figures_range():
    # the sample report showed Mix And Match's rank over 7 seeds as -4.03 (interval -11.1 .. 57.4)
    from pytest_privleak.attacks.over_seeds import aggregate
    from pytest_privleak.results import LeakResult

    ranks = [1, 1, 1, 1, 1, 1, 200]
    members = [LeakResult("mix-and-match", "rank", float(r), threshold=10.0, direction="at_least", ceiling=584.0,
                          label="towels") for r in ranks]
    agg = aggregate(members, list(range(7)))
    assert agg.value == 1.0 and agg.interval[0] == 1.0 and not agg.passed   # cut at rank 1, still a leak
    near_top = [LeakResult("exposure", "exposure_bits", v, threshold=13.0, direction="at_most", ceiling=13.29,
                           label="pin") for v in (13.29, 13.29, 13.29, 12.0, 13.29, 13.29, 13.29)]
    top = aggregate(near_top, list(range(7)))
    assert top.interval[1] == 13.29 and top.value == 13.29 and not top.passed


def test_an_infinite_seed_figure_cannot_be_compared_over_seeds():
    # old: inf on both sides read as "no spread", the means were equal and every other seed could move freely
    invalid = compare(_report([float("inf"), 9.0, 9.0]), _report([float("inf"), 1.0, 1.0]), {}, "b.json")
    assert not invalid["passed"] and "infinite or NaN" in invalid["invalid"][0]["reason"]


def test_a_tpr_at_a_low_fpr_has_a_tolerance_of_the_order_of_the_fpr():
    # old: "tpr" never matched "tpr_at_fpr_0.01", so the fallback 0.05 let TPR at 1 % FPR go from 0.010 to
    # 0.054 on every seed (5x chance) and pass under "Welch and beyond the tolerance"
    from pytest_privleak.report.gate import configured_tolerance

    assert configured_tolerance("membership", "tpr_at_fpr_0.01", {}) == (0.01, "built-in default")
    assert configured_tolerance("membership", "tpr_at_fpr_0.001", {}) == (0.01, "built-in default")
    assert configured_tolerance("membership", "tpr_at_fpr_0.05", {}) == (0.05, "built-in default")
    assert configured_tolerance("membership", "tpr_at_fpr_0.01", {"tpr_at_fpr_0.01": 0.2}) == (0.2, "ini")
    base = [0.010, 0.012, 0.008, 0.011, 0.009, 0.013, 0.010]
    run = [0.052, 0.058, 0.049, 0.055, 0.060, 0.051, 0.054]
    old, new = _report(base, tolerance=0.01), _report(run, tolerance=0.01)
    for r in (old, new):
        r["tests"][0]["results"][0].update(attack="membership", metric="tpr_at_fpr_0.01",
                                           key="t.py::t::membership.tpr_at_fpr_0.01")
    assert len(compare(new, old, {}, "b.json")["regressions"]) == 1
