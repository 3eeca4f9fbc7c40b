"""Whatever weakens the gate comes from the trusted side only (issue 23 item 3), end to end.

The branch under review controls its tests, conftest and ini (``addopts``
included); it cannot change the baseline artifact, the workflow's command line
or ``PRIVLEAK_CACHE_HMAC_KEY``. A membership scorer's AUC rises from 0.50 to
0.87, still under its own 0.95 limit, so only the gate can catch it.
"""
from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

SUITE = '''
import os
import pytest
from pytest_privleak.results import LeakResult, PrivacyLeakError, record

AUC = float(os.environ.get("PRIVLEAK_TEST_AUC", "0.5"))


def membership(label, value):
    r = record(LeakResult("membership", "auc", value, threshold=0.95, label=label))
    if not r.passed:
        raise PrivacyLeakError(r)


def test_control():
    membership("control", 0.5)


def test_scorer():
    if os.environ.get("PRIVLEAK_TEST_SKIP"):
        pytest.skip("the branch skips its leaking test")
    membership("scorer", AUC)
'''


@pytest.fixture
def suite(pytester, monkeypatch):
    """The suite, with a baseline saved on 'main' (AUC 0.50) as base.json and a report folder main-rep/."""
    monkeypatch.delenv("PRIVLEAK_CACHE_HMAC_KEY", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.50")
    saved = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-save-baseline=base.json",
                                          "--privleak-report=main-rep")
    assert saved.ret == 0, saved.stdout.str()
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.87")   # the branch under review leaks more
    return pytester


def _gate(pytester, baseline="base.json", *extra):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--privleak-baseline={baseline}", *extra)


def test_an_ini_that_allows_missing_entries_is_ignored(suite, monkeypatch):
    # old: "missing, allowed ... (not gated)", exit 0; now the ini line is ignored, exit 4
    monkeypatch.setenv("PRIVLEAK_TEST_SKIP", "1")
    suite.makeini("[pytest]\nprivleak_allow_missing = true\n")
    run = _gate(suite)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["  MISSING test_suite.py::test_scorer::membership.auc[[]scorer[]]",
                              "privleak: ini privleak_allow_missing = true is ignored by the baseline gate (the "
                              "checkout under test must not excuse its own missing results)*"])


def test_an_ini_addopts_that_allows_missing_entries_is_ignored_but_the_command_line_is_obeyed(suite, monkeypatch):
    monkeypatch.setenv("PRIVLEAK_TEST_SKIP", "1")
    suite.makeini("[pytest]\naddopts = --privleak-allow-missing\n")
    run = _gate(suite)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["privleak: --privleak-allow-missing comes from the ini's addopts, so the baseline "
                              "gate ignores it*"])
    assert _gate(suite, "base.json", "--privleak-allow-missing").ret == pytest.ExitCode.OK
    monkeypatch.setenv("PYTEST_ADDOPTS", "--privleak-allow-missing")   # the workflow's environment
    assert _gate(suite).ret == pytest.ExitCode.OK


def test_a_report_json_baseline_carries_its_tolerances_and_the_ini_cannot_raise_them(suite):
    # old: the report's results stored no tolerance, so the branch's ini one applied: "gate passed", exit 0
    suite.makeini('[pytest]\nprivleak_tolerance = membership.auc=1e308\n')
    run = _gate(suite, "main-rep/report.json")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    run.stdout.fnmatch_lines([
        "  REGRESSION test_suite.py::test_scorer membership.auc [[]scorer[]]: before 0.500, after 0.870 (moved "
        "0.370, tolerance 0.050 (baseline)*",
        "privleak: ini privleak_tolerance membership.auc=1e+308 raises the built-in tolerance 0.05, so the baseline "
        "gate ignores it*"])
    entries = [r for t in json.loads((suite.path / "main-rep" / "report.json").read_text())["tests"]
               for r in t["results"]]
    assert {(r["tolerance"], r["tolerance_source"]) for r in entries} == {(0.05, "built-in default")}


def _old_report_without_tolerances(suite) -> None:
    """``old-report.json``: main's report as an older plugin wrote it, with no tolerance stored per result."""
    data = json.loads((suite.path / "main-rep" / "report.json").read_text())
    for test in data["tests"]:
        for r in test["results"]:
            r["tolerance"] = None
            r.pop("tolerance_source", None)
    (suite.path / "old-report.json").write_text(json.dumps(data))


def test_a_report_without_stored_tolerances_still_ignores_the_branchs_loosening_ini(suite):
    _old_report_without_tolerances(suite)
    suite.makeini('[pytest]\nprivleak_tolerance = default=1e308\n    membership.auc=0.5\n')
    run = _gate(suite, "old-report.json")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    run.stdout.fnmatch_lines(["*REGRESSION test_suite.py::test_scorer membership.auc*tolerance 0.050 (built-in "
                              "default)*"])
    # the workflow's command line may raise it
    run = _gate(suite, "old-report.json", "--privleak-tolerance", "membership.auc=0.5")
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()
    # an ini that tightens still applies
    suite.makeini('[pytest]\nprivleak_tolerance = membership.auc=0.001\n')
    (suite.path / "test_suite.py").write_text(SUITE.replace('membership("control", 0.5)',
                                                            'membership("control", 0.502)'))
    run = _gate(suite, "old-report.json", "-k", "test_control")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()


def test_a_tolerance_option_from_the_ini_addopts_is_ignored(suite):
    suite.makeini("[pytest]\naddopts = --privleak-tolerance membership.auc=0.5\n")
    run = _gate(suite)
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    run.stdout.fnmatch_lines(["privleak: --privleak-tolerance membership.auc=0.5 comes from the ini's addopts*"])


def test_a_signed_baseline_refuses_an_edited_value(pytester, monkeypatch):
    # old: the baseline's 0.50 rewritten to 1.0 made the 0.87 an "improvement", exit 0
    monkeypatch.setenv("PRIVLEAK_CACHE_HMAC_KEY", "k" * 32)
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.50")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-save-baseline=base.json",
                                         "--privleak-report=rep").ret == 0
    data = json.loads((pytester.path / "base.json").read_text())
    for test in data["tests"]:
        for r in test["results"]:
            if r["label"] == "scorer":
                r["value"] = 1.0
    (pytester.path / "edited.json").write_text(json.dumps(data))
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.87")
    run = _gate(pytester, "edited.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stderr.fnmatch_lines(["*privleak baseline edited.json: its signature does not match its entries under the "
                              "key in PRIVLEAK_CACHE_HMAC_KEY*"])
    assert len(data["signature"]["hmac"]) == 64
    assert "hmac" in json.loads((pytester.path / "rep" / "report.json").read_text())["signature"]
    assert _gate(pytester).ret == pytest.ExitCode.TESTS_FAILED          # signed and intact: a regression
    assert _gate(pytester, "rep/report.json").ret == pytest.ExitCode.TESTS_FAILED
    data.pop("signature")
    (pytester.path / "edited.json").write_text(json.dumps(data))
    run = _gate(pytester, "edited.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stderr.fnmatch_lines(["*privleak baseline edited.json is not signed although PRIVLEAK_CACHE_HMAC_KEY is set*"])


COINCIDING = '''
import pytest
from pytest_privleak.results import LeakResult, record


@pytest.mark.parametrize("label", [pytest.param("2]::membership.auc[3", id="1"),
                                   pytest.param("3", id="1]::membership.auc[2")])
def test_p(label):
    record(LeakResult("membership", "auc", 0.5, threshold=0.95, label=label))
'''


def test_two_parametrized_tests_whose_keys_coincide_are_refused_when_the_baseline_is_saved(pytester):
    # old: saved with exit 0, refused only by the next run that read it
    pytester.makepyfile(test_p=COINCIDING)
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-save-baseline=base.json")
    assert run.ret != 0, run.stdout.str()
    run.stdout.fnmatch_lines(["privleak baseline NOT saved to base.json: tests test_p.py::test_p[[]1[]], "
                              "test_p.py::test_p[[]1[]]::membership.auc[[]2[]] each recorded a result with the key*"])
    assert not (pytester.path / "base.json").exists()


def test_an_override_ini_is_trusted_from_the_command_line_only(suite, monkeypatch):
    _old_report_without_tolerances(suite)
    run = _gate(suite, "old-report.json", "-o", "privleak_tolerance=membership.auc=0.5")
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()
    suite.makeini("[pytest]\naddopts = -o privleak_tolerance=membership.auc=0.5\n")
    run = _gate(suite, "old-report.json")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    monkeypatch.setenv("PRIVLEAK_TEST_SKIP", "1")
    suite.makeini("[pytest]\n")
    assert _gate(suite, "base.json", "-o", "privleak_allow_missing=true").ret == pytest.ExitCode.OK
