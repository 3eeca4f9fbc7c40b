"""The gate's seed rule (issue 37, report/seed_rule.py): hand-derived p-values and the verdicts they give."""
import math

import numpy as np
import pytest

from pytest_privleak.report.gate import compare, gate_lines
from pytest_privleak.report.seed_rule import exact_rate_test, permutation_test, splits


def _report(values, *, table=None, counts=None, canary_set="s1", ceiling=None, tolerance=1.0, metric="figure"):
    result = {"key": f"t.py::t::planted.{metric}", "attack": "planted", "metric": metric,
              "value": sum(values) / len(values), "direction": "at_most", "label": "", "per_seed": list(values),
              "tolerance": tolerance, "ceiling": ceiling, "target": {"canary_set": canary_set}, "extra": {}}
    if table is not None:
        result["per_canary"] = [list(row) for row in table]
    if counts is not None:
        result["extra"] = {"pooled_successes": float(counts[0]), "pooled_trials": float(counts[1])}
    return {"tests": [{"nodeid": "t.py::t", "results": [result]}]}


def test_the_splits_enumerate_every_choice_and_start_with_the_observed_one():
    rows = splits(2)
    assert rows.shape == (6, 4) and rows[0].tolist() == [False, False, True, True]
    assert len({tuple(r) for r in rows.tolist()}) == 6 and (rows.sum(axis=1) == 2).all()
    assert splits(7).shape == (math.comb(14, 7), 14)
    assert splits(9).shape == (20_000, 18) and splits(9)[0].tolist() == [False] * 9 + [True] * 9


def test_a_shift_of_every_seed_reaches_the_smallest_p_of_the_splits():
    # k = 4: 70 splits; only the observed one puts all four 1s on the run's side, for every statistic
    parts = permutation_test([0.0] * 4, [1.0] * 4)
    assert parts["welch"] == parts["above"] == parts["combined"] == pytest.approx(1 / 70)


def test_four_of_seven_seeds_jumping_is_seen_by_the_count_above_the_old_maximum():
    # the run's four 20s all exceed the baseline's largest only in splits that put all four on the run's side:
    # choose the other 3 of its 7 among the remaining 10 seeds: C(10, 3) / C(14, 7) = 120 / 3432
    before = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    after = [1.5, 2.5, 3.5, 20.0, 20.0, 20.0, 20.0]
    parts = permutation_test(before, after)
    assert parts["above"] == pytest.approx(120 / 3432)
    assert parts["combined"] <= 2 * min(parts["welch"], parts["above"])   # min-p never costs more than Bonferroni
    assert parts["combined"] >= min(parts["welch"], parts["above"])


def test_boschloo_by_hand():
    # 0 of 1 before, 1 of 1 after: only the observed table is as extreme; its probability pi (1 - pi) <= 1/4
    assert exact_rate_test((0, 1), (1, 1)) == (pytest.approx(0.25), pytest.approx(1.0))


def test_pooled_counts_are_compared_exactly_unless_the_seeds_disagree():
    # 8 canaries a seed: 0 of 56 before; after, seeds 3 and 5 extract every canary: 16 of 56. The run's seeds
    # disagree (chi-square), so the seeds are the unit: 2 of 14 seeds extracting, both on the run's side, is
    # C(12, 5) / C(14, 7) = 792 / 3432 = 0.23 likely under a seed-only change: not a regression
    before, after = [0.0] * 7, [0, 0, 0, 1, 0, 1, 0]
    counted = compare(_report(after, counts=(16, 56), tolerance=0.05), _report(before, counts=(0, 56), tolerance=0.05),
                      {}, "b.json")
    assert not counted["regressions"] and "splits of the 14 seeds" in counted["seeds"][0]["rule"]
    assert counted["seeds"][0]["p_parts"]["above"] == pytest.approx(792 / 3432)
    # homogeneous sides: 0/56 -> 6/56 spread over six seeds is the exact test's
    spread = [0, 1 / 8, 1 / 8, 1 / 8, 1 / 8, 1 / 8, 1 / 8]
    exact = compare(_report(spread, counts=(6, 56), tolerance=0.05), _report(before, counts=(0, 56), tolerance=0.05),
                    {}, "b.json")
    (change,) = exact["regressions"]
    assert change["rule"].startswith("one-sided Boschloo exact test of the pooled counts (0/56 before, 6/56 after)")
    assert change["p_value"] == pytest.approx(exact_rate_test((0, 56), (6, 56))[0]) and change["p_value"] < 0.05


def test_a_shift_of_some_canaries_is_caught_by_the_largest_canary_growth():
    rng = np.random.default_rng(0)
    base = rng.normal(3.0, 1.0, size=(7, 8))
    run = rng.normal(3.0, 1.0, size=(7, 8))
    run[:, 0] += 3.0                                        # one canary of eight said far more often
    moved = compare(_report(run.mean(axis=1).tolist(), table=run, tolerance=0.2),
                    _report(base.mean(axis=1).tolist(), table=base, tolerance=0.2), {}, "b.json")
    (change,) = moved["regressions"]
    # the canary's growth is the largest of all 3432 splits; the seed means moved 3/8 against their noise
    assert change["p_parts"]["canary"] == pytest.approx(1 / 3432) and change["p_parts"]["welch"] > 0.05
    assert "largest canary growth" in change["rule"]
    # another canary set on the run's side: the canaries are not the same, so no per-canary statistic
    other = compare(_report(run.mean(axis=1).tolist(), table=run, canary_set="s2", tolerance=0.2),
                    _report(base.mean(axis=1).tolist(), table=base, tolerance=0.2), {}, "b.json")
    assert "canary" not in other["seeds"][0].get("p_parts", {})


def test_seed_only_noise_passes_and_the_line_names_the_rule():
    rng = np.random.default_rng(1)
    noise = compare(_report(rng.normal(3, 1, 7).tolist()), _report(rng.normal(3, 1, 7).tolist()), {}, "b.json")
    assert noise["passed"] and not noise["regressions"]
    assert "by the seed rule at alpha 0.05" in "\n".join(gate_lines(noise))


def test_a_figure_at_its_ceiling_on_both_sides_says_it_cannot_show_growth():
    top = [13.29] * 7
    stuck = compare(_report(top, ceiling=13.29), _report([13.29] * 6 + [12.9], ceiling=13.29), {}, "b.json")
    lines = "\n".join(gate_lines(stuck))
    assert stuck["passed"] and len(stuck["ceiling"]) == 1
    assert "passed" not in lines and "cannot show growth (at the ceiling on both sides)" in lines
    assert "CEILING t.py::t planted.figure" in lines and "fewer training epochs, a smaller repeat count R" in lines
    # one seed below the ceiling by more than the tolerance on the baseline's side: room to grow, no CEILING line
    room = compare(_report(top, ceiling=13.29), _report([10.0] * 7, ceiling=13.29), {}, "b.json")
    assert not room.get("ceiling")


def test_the_baseline_signature_covers_the_per_canary_figures(monkeypatch, tmp_path):
    # the seed rule reads per_canary (the largest canary growth): an unsigned table would let an edited baseline pass
    from pytest_privleak.report.baseline_file import check_signature, sign
    from pytest_privleak.report.model import ReportFileError

    monkeypatch.setenv("PRIVLEAK_CACHE_HMAC_KEY", "k" * 32)
    entry = {"key": "t::exposure.mean_exposure_bits", "attack": "exposure", "metric": "mean_exposure_bits",
             "direction": "at_most", "value": 2.5, "tolerance": 0.35, "per_seed": [2.0, 3.0],
             "per_canary": [[1.0, 3.0], [2.0, 4.0]]}
    signed = sign({"tests": [{"nodeid": "t", "results": [entry]}]})
    check_signature(signed, tmp_path / "base.json")
    signed["tests"][0]["results"][0]["per_canary"] = [[3.0, 1.0], [4.0, 2.0]]
    with pytest.raises(ReportFileError, match="signature does not match"):
        check_signature(signed, tmp_path / "base.json")


def test_redrawn_canary_sets_compare_the_means_by_both_sides_variance_components():
    from scipy.stats import t as student

    from pytest_privleak.report.seed_rule import redrawn_sets_test

    before, after = np.array([[0.0, 4.0], [2.0, 6.0]]), np.array([[1.0, 5.0], [3.0, 7.0]])
    # each side: mean 3 (4), Var(mean) = 5 with 25/17 df (tests/test_canary_sets.py derives it); the difference
    # 1 over sqrt(5 + 5); Satterthwaite: 10^2 / (5^2 / (25/17) + 5^2 / (25/17)) = 100 / 34
    worse, better, rule = redrawn_sets_test(before, after, "at_most")
    assert worse == pytest.approx(float(student.sf(1 / math.sqrt(10), 100 / 34)))
    assert better == pytest.approx(1 - worse) and "the canary sets differ" in rule
    seeds = [float(v) for v in before.mean(axis=1)]
    run = [float(v) for v in after.mean(axis=1)]
    judged = compare(_report(run, table=after, canary_set="s2"), _report(seeds, table=before, canary_set="s1"), {},
                     "b.json")
    assert judged["seeds"][0]["rule"].startswith("one-sided t of the means over seeds and canaries")
    assert judged["seeds"][0]["p_value"] == pytest.approx(worse)


def test_the_same_seeds_on_both_sides_are_compared_in_pairs():
    from pytest_privleak.report.seed_rule import flips, paired_test

    assert flips(3).tolist()[0] == [1.0, 1.0, 1.0] and len({tuple(r) for r in flips(3).tolist()}) == 8
    # every difference +1: only the observed signs (of 2^7 = 128) give the largest paired t
    assert paired_test([0.0] * 7, [1.0] * 7)["paired"] == pytest.approx(1 / 128)
    # a seed effect shared by both sides (one seed's models memorise more): the differences are all about +1,
    # the paired rule sees it, the unpaired split test does not (the seeds' spread hides it)
    base = [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0]
    run = [b + 1.0 + 0.1 * (i % 2) for i, b in enumerate(base)]
    same = {"canary_set": "s1", "seeds": list(range(7))}

    def rep(values, target):
        r = _report(values, tolerance=0.5)
        r["tests"][0]["results"][0]["target"] = target
        return r

    paired = compare(rep(run, same), rep(base, same), {}, "b.json")
    (change,) = paired["regressions"]
    assert "sign flips of the 7 seeds both sides trained" in change["rule"] and change["p_value"] == pytest.approx(1 / 128)
    unpaired = compare(rep(run, {**same, "seeds": list(range(50, 57))}), rep(base, same), {}, "b.json")
    assert not unpaired["regressions"] and "splits of the 14 seeds" in unpaired["seeds"][0]["rule"]
    # the same figures on both sides: nothing changed
    untouched = compare(rep(base, same), rep(base, same), {}, "b.json")
    assert untouched["seeds"][0]["rule"] == "the same seeds gave the same figures on both sides"
