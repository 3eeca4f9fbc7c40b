"""The plugin end to end in a subprocess: options, result merging with and without xdist, crashes,
report files against their schema, junitxml properties, and the plugin's own hooks.

The privacy suite builds ``LeakResult`` s directly and passes them through
``assertions.check``, so no model is trained.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

SUITE = '''
import pytest
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult


def test_pin_not_extracted():
    check(LeakResult(attack="cea", metric="accuracy", value=0.0, threshold=0.0, interval=(0.0, 0.26),
                     confidence=0.95, chance=1e-4, label="my pin code is 3 1 4 1",
                     extra={"hdt": 0.88, "hdt_chance": 0.9}, target={"content_hash": "c0ffee", "seed": 7}))


def test_exposure_leaks():
    check(LeakResult(attack="exposure", metric="exposure", value=12.5, threshold=4.0, chance=1.0,
                     ceiling=13.29, label="call 5 5 5 1 2 3 4", remedy="add dropout", evidence={"rank": 1}))


def test_two_results_one_test():
    check(LeakResult(attack="ldp", metric="epsilon_lcb", value=0.7, threshold=1.0, interval=(0.7, 1.3),
                     label="randomised response"))
    check(LeakResult(attack="hoho", metric="linking_auc", value=0.55, chance=0.5, label="encoder"))


@pytest.mark.privleak
def test_privacy_test_that_errors():
    raise RuntimeError("training blew up")


def test_not_a_privacy_test():
    assert 1 + 1 == 2
'''

EXPECTED = {
    "test_suite.py::test_pin_not_extracted": ("passed", ["cea.accuracy"]),
    "test_suite.py::test_exposure_leaks": ("failed", ["exposure.exposure"]),
    "test_suite.py::test_two_results_one_test": ("passed", ["ldp.epsilon_lcb", "hoho.linking_auc"]),
    "test_suite.py::test_privacy_test_that_errors": ("failed", []),
}


def _merged(report: dict) -> dict:
    """What must not depend on how the run was distributed: tests, outcomes, every result's figures."""
    keep = ("key", "value", "threshold", "interval", "chance", "ceiling", "verdict", "evidence", "extra",
            "target_hash", "seed")
    return {t["nodeid"]: (t["outcome"], [{k: r[k] for k in keep} for r in t["results"]]) for t in report["tests"]}


def _validate(report: dict) -> None:
    from pytest_privleak.report.json_writer import validate

    validate(report)


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_same_merged_results_without_xdist_with_two_workers_and_with_xdist_disabled(suite):
    suite.makeconftest('''
        def pytest_privleak_result(config, nodeid, result):
            with open(f"seen-{config.getoption('privleak_report')}.txt", "a") as fh:
                fh.write(f"{nodeid} {result.name}\\n")
    ''')
    reports = {}
    for name, extra in {"plain": [], "n2": ["-n", "2"], "no_xdist": ["-p", "no:xdist"]}.items():
        result = suite.runpytest_subprocess(f"--privleak-report=rep-{name}", *extra)
        result.assert_outcomes(passed=3, failed=2)
        result.stdout.fnmatch_lines(["*privleak results*", "FAIL*test_exposure_leaks*exposure.exposure*12.500*",
                                     f"privleak report: rep-{name}*index.html*"])
        reports[name] = json.loads((suite.path / f"rep-{name}" / "report.json").read_text())
        _validate(reports[name])
        # the result hook ran once per result, in the controller, also under xdist
        seen = sorted((suite.path / f"seen-rep-{name}.txt").read_text().splitlines())
        assert seen == sorted(f"{nodeid} {metric}" for nodeid, (_, metrics) in EXPECTED.items()
                              for metric in metrics)
    merged = _merged(reports["plain"])
    assert {k: (v[0], [r["key"].split("::")[-1].split("[")[0] for r in v[1]]) for k, v in merged.items()} == {
        k: (o, names) for k, (o, names) in EXPECTED.items()}
    assert _merged(reports["n2"]) == merged
    assert _merged(reports["no_xdist"]) == merged
    assert reports["n2"]["summary"] == reports["plain"]["summary"]
    assert reports["plain"]["summary"]["failed"] == 1 and reports["plain"]["summary"]["results"] == 4
    assert [w["status"] for w in reports["n2"]["run"]["workers"]] == ["ok", "ok"]
    assert reports["plain"]["run"]["workers"] == [] and reports["no_xdist"]["run"]["xdist"] is False


def test_report_json_carries_each_results_fields(suite):
    suite.runpytest_subprocess("--privleak-report", "--privleak-seed=3").assert_outcomes(passed=3, failed=2)
    report = json.loads((suite.path / "privleak-report" / "report.json").read_text())
    _validate(report)
    assert report["schema"] == "pytest-privleak/report" and report["version"] == 1
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert "test_suite.py::test_not_a_privacy_test" not in tests
    pin = tests["test_suite.py::test_pin_not_extracted"]
    (r,) = pin["results"]
    assert r["key"] == "test_suite.py::test_pin_not_extracted::cea.accuracy[my pin code is 3 1 4 1]"
    assert (r["value"], r["interval"], r["chance"], r["threshold"], r["verdict"]) == (0.0, [0.0, 0.26], 1e-4, 0.0,
                                                                                      "pass")
    assert (r["target_hash"], r["seed"]) == ("c0ffee", 7)  # the target's own seed wins over the run's
    assert pin["seed"] == 3 and pin["outcome"] == "passed" and pin["duration"] >= 0
    assert tests["test_suite.py::test_exposure_leaks"]["results"][0]["evidence"] == {"rank": 1}
    assert (suite.path / "privleak-report" / "index.html").is_file()
    md = (suite.path / "privleak-report" / "summary.md").read_text()
    assert "| \u274c FAIL | `test_suite.py::test_exposure_leaks` | `exposure.exposure` |" in md


def test_github_step_summary_gets_the_markdown_and_junitxml_gets_the_headline_figures(suite, monkeypatch):
    step = suite.path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    suite.runpytest_subprocess("--privleak-report=out", "--junitxml=junit.xml").assert_outcomes(passed=3, failed=2)
    text = step.read_text()
    assert text.startswith("earlier step\n") and "## pytest-privleak: **1 of 4 result(s) leak" in text
    props = {p.get("name"): p.get("value") for p in ET.parse(suite.path / "junit.xml").iter("property")}
    assert props["privleak:exposure.exposure[call 5 5 5 1 2 3 4]"] == "12.5"
    assert props["privleak:exposure.exposure[call 5 5 5 1 2 3 4]:verdict"] == "FAIL"
    assert props["privleak:cea.accuracy[my pin code is 3 1 4 1]:interval"] == "0..0.26"


def test_a_worker_killed_mid_run_is_named_in_the_report(pytester: pytest.Pytester):
    pytester.makepyfile(test_crash='''
        import os
        from pytest_privleak.assertions import check
        from pytest_privleak.results import LeakResult

        def test_before():
            check(LeakResult(attack="cea", metric="accuracy", value=0.1, threshold=0.5, label="before"))

        def test_killed():
            check(LeakResult(attack="cea", metric="accuracy", value=0.2, threshold=0.5, label="lost"))
            os._exit(3)
    ''')
    result = pytester.runpytest_subprocess("-n", "2", "--privleak-report=rep")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*privleak results*",
                                 "worker gw* crashed while running test_crash.py::test_killed *"])
    report = json.loads((pytester.path / "rep" / "report.json").read_text())
    _validate(report)
    crashed = [w for w in report["run"]["workers"] if w["status"] == "crashed"]
    assert len(crashed) == 1 and crashed[0]["crashed_test"] == "test_crash.py::test_killed"
    assert crashed[0]["error"]
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert tests["test_crash.py::test_killed"]["outcome"] == "crashed"
    assert [r["label"] for r in tests["test_crash.py::test_before"]["results"]] == ["before"]
    assert "crashed while running" in (pytester.path / "rep" / "index.html").read_text()


def test_result_hook_sees_every_result_and_report_hook_additions_are_kept_apart_but_no_figure_changes(suite):
    suite.makeconftest('''
        import json, pathlib

        def pytest_privleak_result(config, nodeid, result):
            with open("seen.txt", "a") as fh:
                fh.write(f"{nodeid} {result.name} {result.value}\\n")

        def pytest_privleak_report(config, report):
            report["ci"] = {"build": 42}
            for test in report["tests"]:
                for r in test["results"]:
                    r["label"] = r["label"].upper()
    ''')
    run = suite.runpytest_subprocess("--privleak-report=rep", "--privleak-save-baseline=base.json")
    # issue 36 item 3: a hook adds a section of its own; a change to the results is undone and fails the run
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    run.stdout.fnmatch_lines(["privleak: a pytest_privleak_report hook changed the report's 'tests'; the plugin's "
                              "figures, run and verdict are restored*"])
    seen = sorted((suite.path / "seen.txt").read_text().splitlines())
    assert seen == sorted(["test_suite.py::test_pin_not_extracted cea.accuracy 0.0",
                           "test_suite.py::test_exposure_leaks exposure.exposure 12.5",
                           "test_suite.py::test_two_results_one_test ldp.epsilon_lcb 0.7",
                           "test_suite.py::test_two_results_one_test hoho.linking_auc 0.55"])
    for path in ("rep/report.json", "base.json"):
        report = json.loads((suite.path / path).read_text())
        assert report["hooks"] == {"ci": {"build": 42}} and "ci" not in report
        _validate(report)
    assert "MY PIN CODE IS 3 1 4 1" not in (suite.path / "rep" / "index.html").read_text()
    assert "my pin code is 3 1 4 1" in (suite.path / "rep" / "index.html").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--privleak-report="], "*--privleak-report is empty; give a folder path*"),
    (["--privleak-report", "test_suite.py"], "*--privleak-report='test_suite.py' looks like a test path*"
                                             "--privleak-report=DIR*"),
    (["--privleak-baseline=missing.json"], "*privleak baseline missing.json does not exist; regenerate it*"
                                           "--privleak-save-baseline missing.json*"),
    (["--privleak-save-baseline=."], "*--privleak-save-baseline='.' is a folder*"),
    (["-o", "privleak_tolerance=cea.accuracy=lots"], "*privleak_tolerance, line 1 ('cea.accuracy=lots')*"),
])
def test_bad_option_values_are_usage_errors_naming_the_option(suite, args, message):
    result = suite.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_disabling_the_plugin_leaves_a_plain_run(suite):
    result = suite.runpytest_subprocess("-p", "no:privleak", "-k", "not_a_privacy_test")
    result.assert_outcomes(passed=1, deselected=4)
    assert "privleak results" not in result.stdout.str()
    assert not (suite.path / "privleak-report").exists()
    result = suite.runpytest_subprocess("-p", "no:privleak", "--privleak-report")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --privleak-report*"])
