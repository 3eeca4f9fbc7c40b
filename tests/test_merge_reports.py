"""pytest --privleak-merge-reports DIR...: three shards merged give the unsharded run's report and gate verdict.

The shard runs are made once per module (subprocesses, several at a time); each test then runs
the merge command as CI would.
"""
import json
import shutil

import pytest

from helpers_shard import comparable, make_project, read_report, run_many, run_pytest
from pytest_privleak.report.merge import MergeError, load_shard, merge_reports

OK, FAILED, USAGE = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.USAGE_ERROR
BUMP = {"BUMP_gamma": "0.3"}       # moves gamma's three figures by 0.3: a regression beyond the 0.05 tolerance


def _shards(prefix: str, count: int, *extra: str, env=None) -> dict[str, tuple]:
    return {f"{prefix}{i}": ((f"--privleak-shard={i}/{count}", f"--privleak-report={prefix}{i}", *extra), env)
            for i in range(1, count + 1)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sharded")
    make_project(folder)
    base = run_pytest(folder, "--privleak-report=full", "--privleak-save-baseline=baseline.json")
    assert base.returncode == 0, base.stdout
    done = run_many(folder, {
        **_shards("s", 3), **_shards("b", 3, env=BUMP), **_shards("e", 2, "-k", "alpha"),
        "gated": (("--privleak-report=gated", "--privleak-baseline=baseline.json"), None),
        "bumped": (("--privleak-report=bumped", "--privleak-baseline=baseline.json"), BUMP),
    })
    for name, result in done.items():
        expected = FAILED if name == "bumped" else OK        # shards never gate: the merge does
        assert result.returncode == expected, (name, result.stdout, result.stderr)
    return folder, done


def merge(runs, *args):
    folder, _ = runs
    return run_pytest(folder, "--privleak-merge-reports", *args)


def report(runs, name: str) -> dict:
    return read_report(runs[0] / name)


def test_merged_shards_equal_the_unsharded_run(runs):
    result = merge(runs, "s1", "s2", "s3", "--privleak-report=merged")
    assert result.returncode == OK, result.stdout + result.stderr
    assert "privleak merged 14 test(s) from 3 report(s): s1 (4 tests, shard 1/3), s2 (5 tests, shard 2/3)" \
        in result.stdout
    assert "collected" not in result.stdout                             # nothing was collected
    merged = report(runs, "merged")
    assert comparable(merged) == comparable(report(runs, "full"))
    worker_of = {t["nodeid"]: t["worker"] for t in merged["tests"]}
    assert worker_of["test_alpha.py::test_figure[0]"] == "s1" and worker_of["test_beta.py::test_figure[0]"] == "s2"
    assert [m["shard"] for m in merged["run"]["merged_from"]] == ["1/3", "2/3", "3/3"]


def test_the_merge_passes_the_gate_as_the_unsharded_run_does(runs):
    result = merge(runs, "s1", "s2", "s3", "--privleak-report=merged-gated", "--privleak-baseline=baseline.json")
    assert result.returncode == OK == runs[1]["gated"].returncode, result.stdout + result.stderr
    assert "privleak baseline gate passed: 14 result(s) compared with baseline.json" in result.stdout
    assert comparable(report(runs, "merged-gated")) == comparable(report(runs, "gated"))


def test_a_regression_on_one_shard_fails_the_merge_as_it_fails_the_unsharded_run(runs):
    result = merge(runs, "b1", "b2", "b3", "--privleak-report=merged-bumped", "--privleak-baseline=baseline.json")
    assert result.returncode == FAILED == runs[1]["bumped"].returncode, result.stdout + result.stderr
    assert "privleak baseline gate FAILED: 3 result(s) leak more than in baseline.json" in result.stdout
    assert "REGRESSION test_gamma.py::test_figure[0] toy.accuracy [gamma-0]: before 0.000, after 0.300" \
        in result.stdout
    merged = report(runs, "merged-bumped")
    assert comparable(merged) == comparable(report(runs, "bumped"))
    assert not merged["baseline"]["passed"] and len(merged["baseline"]["regressions"]) == 3
    assert "REGRESSION" in (runs[0] / "merged-bumped" / "summary.md").read_text(encoding="utf-8")


def test_missing_baseline_entries_fail_the_merge_unless_allowed(runs):
    refused = merge(runs, "e1", "e2", "--privleak-baseline=baseline.json")        # only alpha's 4 tests ran
    assert refused.returncode == USAGE, refused.stdout
    assert "10 baseline entries of baseline.json have no result in this run" in refused.stdout
    assert "MISSING test_delta.py::test_figure[0]::toy.accuracy[delta-0]" in refused.stdout
    allowed = merge(runs, "e1", "e2", "--privleak-baseline=baseline.json", "--privleak-allow-missing")
    assert allowed.returncode == OK, allowed.stdout
    assert "privleak baseline gate passed: 4 result(s) compared" in allowed.stdout


def test_nothing_compared_fails_the_merge(runs):
    folder, _ = runs
    baseline = json.loads((folder / "baseline.json").read_text(encoding="utf-8"))
    baseline["tests"] = [t for t in baseline["tests"] if "delta" in t["nodeid"]]
    (folder / "delta-only.json").write_text(json.dumps(baseline), encoding="utf-8")
    result = merge(runs, "e1", "e2", "--privleak-baseline=delta-only.json", "--privleak-allow-missing")
    assert result.returncode == USAGE, result.stdout
    assert "privleak baseline gate FAILED: nothing was compared" in result.stdout


def test_the_merge_saves_the_baseline_the_unsharded_run_saved(runs):
    result = merge(runs, "s1", "s2", "s3", "--privleak-save-baseline=merged-baseline.json")
    assert result.returncode == OK, result.stdout + result.stderr
    assert "privleak baseline saved: merged-baseline.json" in result.stdout
    ours = json.loads((runs[0] / "merged-baseline.json").read_text(encoding="utf-8"))
    theirs = json.loads((runs[0] / "baseline.json").read_text(encoding="utf-8"))
    assert comparable(ours) == comparable(theirs)


def test_an_empty_shard_merges(runs):
    assert "privleak shard 2/2 is empty" in runs[1]["e2"].stdout
    result = merge(runs, "e1", "e2", "--privleak-report=merged-empty")
    assert result.returncode == OK, result.stdout + result.stderr
    assert "e1 (4 tests, shard 1/2), e2 (0 tests, shard 2/2)" in result.stdout


# --------------------------------------------------------------------------- refusals


def test_a_result_measured_differently_in_two_folders_is_refused(runs):
    result = merge(runs, "full", "bumped", "--privleak-report=refused")
    assert result.returncode == USAGE
    assert ("result 'test_gamma.py::test_figure[0]::toy.accuracy[gamma-0]' is in full and in bumped with different "
            "figures (value 0.0 vs 0.3") in result.stderr
    assert "each test must run on one shard only" in result.stderr
    summary = (runs[0] / "refused" / "summary.md").read_text(encoding="utf-8")   # the CI job summary says why
    assert "different figures" in summary


def _merge_in_process(runs, *folders):
    return merge_reports([(f, load_shard(runs[0] / f)) for f in folders])


def test_the_same_figures_in_two_folders_are_kept_once(runs):
    assert len(_merge_in_process(runs, "full", "full")["tests"]) == 14


def test_timings_places_and_loading_from_the_result_cache_do_not_count_as_different_figures(runs):
    other = report(runs, "full")
    for test in other["tests"]:
        for result in test["results"]:
            result["extra"]["seconds"], result["target"]["seconds"], result["device"] = 9.5, 2.0, "cuda:1"
            result["evidence"]["result cache"] = "loaded from the result cache (key ...)"  # not a figure either
    assert len(merge_reports([("full", report(runs, "full")), ("other", other)])["tests"]) == 14
    other["tests"][0]["results"][0]["extra"]["bits"] = 1.0                 # a figure: refused
    with pytest.raises(MergeError, match=r"with different figures \(extra"):
        merge_reports([("full", report(runs, "full")), ("other", other)])


def test_reports_of_different_seeds_are_refused(runs):
    other = {**report(runs, "full")}
    other["run"] = {**other["run"], "seed": 1}
    with pytest.raises(MergeError, match=r"full ran with seed 0 but seed1 with seed 1.*same --privleak-seed"):
        merge_reports([("full", report(runs, "full")), ("seed1", other)])


@pytest.mark.parametrize("folders, complaint", [
    (("s1", "s2"), r"shard\(s\) 3/3 are missing \(given: s1, s2\)"),
    (("s1", "s2", "s3", "s1"), r"s1 and s1 are both shard 1/3; pass each shard's folder once"),
    (("s1", "s2", "s3", "full"), r"s1 was split with --privleak-shard but full was not"),
    (("s1", "s2", "e1"), r"s1 is shard 1/3 but e1 is shard 1/2; every shard of one run must use the same N"),
])
def test_an_incomplete_or_mixed_split_is_refused(runs, folders, complaint):
    with pytest.raises(MergeError, match=complaint):
        _merge_in_process(runs, *folders)


def test_shards_split_by_different_durations_are_refused(runs):
    shards = [(f, report(runs, f)) for f in ("s1", "s2", "s3")]
    shards[2][1]["run"]["shard"]["durations"] = "0" * 64
    with pytest.raises(MergeError, match=r"s1 and s3 were split with different --privleak-shard-durations files"):
        merge_reports(shards)


def test_a_test_with_another_outcome_in_a_second_folder_is_refused(runs):
    other = report(runs, "full")
    other["tests"][0]["outcome"] = "failed"
    with pytest.raises(MergeError, match=r"test 'test_alpha.py::test_figure\[0\]' is in full \(passed\) and in "
                                         r"other \(failed\) with different outcomes"):
        merge_reports([("full", report(runs, "full")), ("other", other)])


# --------------------------------------------------------------------------- the sample project


@pytest.mark.slow
def test_the_sample_project_in_three_shards_merges_to_its_unsharded_report(tmp_path):
    """The sample project (a copy, with its warm target cache) run whole and as --privleak-shard=1/3..3/3."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "sample_project"
    project = tmp_path / "sample_project"
    shutil.copytree(sample, project, ignore=shutil.ignore_patterns("privleak-report*", "__pycache__", ".pytest_cache"))
    # minutes each on a loaded 2-core machine (the attacks run; the targets load from the cache)
    whole = run_pytest(project, "--privleak-report=whole", "--privleak-save-baseline=baseline.json", timeout=1800)
    assert whole.returncode == OK, whole.stdout + whole.stderr
    shards = run_many(project, _shards("s", 3), timeout=1800)
    for name, result in shards.items():
        assert result.returncode == OK, (name, result.stdout, result.stderr)
    merged = run_pytest(project, "--privleak-merge-reports", "s1", "s2", "s3", "--privleak-report=merged",
                        "--privleak-baseline=baseline.json")
    assert merged.returncode == OK, merged.stdout + merged.stderr
    ours, theirs = read_report(project / "merged"), read_report(project / "whole")
    assert len(ours["tests"]) == len(theirs["tests"]) >= 10
    assert all(len(read_report(project / f"s{i}")["tests"]) > 0 for i in (1, 2, 3))
    ours["baseline"] = None                                  # the whole run was not gated
    assert comparable(ours) == comparable(theirs)
    assert f"privleak baseline gate passed: {ours['summary']['results']} result(s) compared" in merged.stdout
