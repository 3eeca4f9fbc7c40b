"""The baseline gate: tolerance rules by hand, the ways it must not pass silently, and CI-like runs."""
from __future__ import annotations

import json
import math

import pytest

from pytest_privleak.report.gate import (DEFAULT_TOLERANCES, compare, gate_exit, gate_lines, gate_tolerance,
                                      saved_tolerance, tolerance_for)


def _report(*results):
    tests = {}
    for nodeid, attack, metric, value, direction, label, tol in results:
        tests.setdefault(nodeid, []).append({
            "key": f"{nodeid}::{attack}.{metric}" + (f"[{label}]" if label else ""), "attack": attack,
            "metric": metric, "value": value, "direction": direction, "label": label, "tolerance": tol})
    return {"tests": [{"nodeid": n, "results": rs} for n, rs in tests.items()]}


def test_saved_tolerance_order_assertion_then_ini_then_builtin_then_default():
    r = {"attack": "cea", "metric": "accuracy", "tolerance": None}
    assert saved_tolerance(r, {}) == (DEFAULT_TOLERANCES["accuracy"], "built-in default") == (0.05, "built-in default")
    assert saved_tolerance(r, {"accuracy": 0.2}) == (0.2, "ini")
    assert saved_tolerance(r, {"accuracy": 0.2, "cea.accuracy": 0.3}) == (0.3, "ini")
    assert saved_tolerance({**r, "tolerance": 0.01}, {"cea.accuracy": 0.3}) == (0.01, "assertion")
    assert tolerance_for({"attack": "x", "metric": "odd", "tolerance": None}, {}) == 0.05
    assert tolerance_for({"attack": "x", "metric": "odd", "tolerance": None}, {"default": 0.5}) == 0.5
    # the metric names the exposure assertions record get one bit
    assert tolerance_for({"attack": "exposure", "metric": "exposure_bits", "tolerance": None}, {}) == 1.0
    assert tolerance_for({"attack": "d-exposure", "metric": "d_exposure_bits", "tolerance": None}, {}) == 1.0


def test_gate_tolerance_is_the_baselines_stored_one_else_ini_else_builtin():
    entry = {"key": "k", "attack": "cea", "metric": "accuracy", "tolerance": 0.2}
    assert gate_tolerance(entry, {"cea.accuracy": 0.01}) == (0.2, "baseline")
    assert gate_tolerance({**entry, "tolerance": None}, {"cea.accuracy": 0.01}) == (0.01, "ini")
    assert gate_tolerance({**entry, "tolerance": None}, {}) == (0.05, "built-in default")
    with pytest.raises(ValueError, match="'k': tolerance nan"):
        gate_tolerance({**entry, "tolerance": math.nan}, {})


def test_worse_depends_on_direction_and_the_baselines_tolerance():
    before = _report(("t::a", "cea", "accuracy", 0.10, "at_most", "pin", None),
                     ("t::b", "exposure", "exposure_bits", 5.0, "at_most", "", None),
                     ("t::c", "x", "hdt", 0.90, "at_least", "", 0.01),
                     ("t::gone", "cea", "accuracy", 0.0, "at_most", "", None))
    after = _report(("t::a", "cea", "accuracy", 0.16, "at_most", "pin", None),   # +0.06 > 0.05
                    ("t::b", "exposure", "exposure_bits", 5.9, "at_most", "", None),  # +0.9 <= 1.0 bit
                    ("t::c", "x", "hdt", 0.85, "at_least", "", None),            # shrank by 0.05 > 0.01
                    ("t::new", "cea", "accuracy", 1.0, "at_most", "", None))
    gate = compare(after, before, {}, "base.json", allow_missing=True)
    assert [c["key"] for c in gate["regressions"]] == ["t::a::cea.accuracy[pin]", "t::c::x.hdt"]
    assert gate["new"] == ["t::new::cea.accuracy"] and gate["vanished"] == ["t::gone::cea.accuracy"]
    assert not gate["passed"] and gate["compared"] == 3 and gate_exit(gate) == pytest.ExitCode.TESTS_FAILED
    text = "\n".join(gate_lines(gate))
    assert ("REGRESSION t::a cea.accuracy [pin]: before 0.100, after 0.160 (moved 0.060, tolerance 0.050 "
            "(built-in default); must not grow)") in text
    assert "tolerance 0.010 (baseline); must not shrink" in text
    assert "new (not in baseline, not gated): t::new::cea.accuracy" in text
    assert "missing, allowed by --privleak-allow-missing (not gated): t::gone::cea.accuracy" in text
    # the other way round: a improved by 0.06; c by 0.05, which is within the 0.05 the baseline now gives it
    improved = compare(before, after, {}, "base.json", allow_missing=True)
    assert improved["passed"] and [c["key"] for c in improved["improvements"]] == ["t::a::cea.accuracy[pin]"]


def test_the_run_under_test_cannot_raise_its_own_tolerance():
    before = _report(("t::a", "cea", "accuracy", 0.0, "at_most", "pin", None))
    after = _report(("t::a", "cea", "accuracy", 1.0, "at_most", "pin", 1e308))  # the change asks for 1e308
    gate = compare(after, before, {}, "b")
    assert not gate["passed"] and [c["tolerance"] for c in gate["regressions"]] == [0.05]
    assert any("this run asks tolerance 1.00e+308, the gate uses 0.050 (built-in default)" in n
               for n in gate["notes"])
    # a tolerance stored in the baseline (saved on main) does apply, and beats the ini
    stored = _report(("t::a", "cea", "accuracy", 0.0, "at_most", "pin", 1.0))
    gate = compare(after, stored, {"accuracy": 0.01}, "b")
    assert gate["passed"] and any("the ini privleak_tolerance gives 0.010, the baseline stores 1.000" in n
                                  for n in gate["notes"])


def test_a_baseline_entry_with_no_counterpart_fails_unless_allowed():
    before = _report(("t::a", "cea", "accuracy", 0.1, "at_most", "pin", None),
                     ("t::skipped", "cea", "accuracy", 0.1, "at_most", "pin", None))
    after = _report(("t::a", "cea", "accuracy", 0.1, "at_most", "pin", None))
    gate = compare(after, before, {}, "b.json")
    assert not gate["passed"] and gate_exit(gate) == pytest.ExitCode.USAGE_ERROR
    text = "\n".join(gate_lines(gate))
    assert "privleak baseline gate FAILED: 1 baseline entry of b.json has no result in this run" in text
    assert "MISSING t::skipped::cea.accuracy[pin]" in text
    assert "skipped, deselected with -k/-m" in text and "--privleak-allow-missing" in text and "name=" in text
    allowed = compare(after, before, {}, "b.json", allow_missing=True)
    assert allowed["passed"] and gate_exit(allowed) is None


def test_nothing_compared_fails_even_when_missing_entries_are_allowed():
    other_suite = _report(("other::x", "cea", "accuracy", 0.1, "at_most", "", None))
    run = _report(("t::a", "cea", "accuracy", 0.1, "at_most", "", None))
    gate = compare(run, other_suite, {}, "b.json", allow_missing=True)
    assert not gate["passed"] and gate_exit(gate) == pytest.ExitCode.USAGE_ERROR
    assert any("nothing was compared" in line and "the baseline of this test suite" in line
               for line in gate_lines(gate))


@pytest.mark.parametrize(("before", "after", "reason"), [
    ((0.9, "at_least"), (0.9, "at_most"), "the limit's direction changed from at_least (baseline) to at_most"),
    (("NaN", "at_most"), (0.2, "at_most"), "the baseline's value is NaN"),
    ((0.2, "at_most"), ("NaN", "at_most"), "this run's value is NaN"),
])
def test_results_that_cannot_be_compared_fail_the_gate(before, after, reason):
    gate = compare(_report(("t::a", "x", "auc", after[0], after[1], "", None)),
                   _report(("t::a", "x", "auc", before[0], before[1], "", None)), {}, "b")
    assert not gate["passed"] and not gate["regressions"] and gate_exit(gate) == pytest.ExitCode.USAGE_ERROR
    assert [c["reason"][:len(reason)] for c in gate["invalid"]] == [reason]
    assert any(line.startswith("  INVALID t::a x.auc: " + reason) for line in gate_lines(gate))


def test_infinite_exposure_is_a_regression_from_a_finite_one():
    before = _report(("t::b", "exposure", "exposure_bits", 5.0, "at_most", "", None))
    after = _report(("t::b", "exposure", "exposure_bits", "Infinity", "at_most", "", None))
    assert len(compare(after, before, {}, "b")["regressions"]) == 1
    assert compare(after, after, {}, "b")["passed"]


def test_errors_found_before_comparing_fail_the_gate():
    run = _report(("t::a", "cea", "accuracy", 0.1, "at_most", "", None))
    gate = compare(run, run, {}, "b", errors=["test t::a recorded 2 results with the same key"])
    assert not gate["passed"] and gate_exit(gate) == pytest.ExitCode.USAGE_ERROR
    assert "privleak baseline gate FAILED: test t::a recorded 2 results with the same key" in gate_lines(gate)


SUITE = '''
import json, pathlib
import pytest
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult

V = json.loads(pathlib.Path(__file__).with_name("values.json").read_text())


@pytest.mark.skipif(V.get("skip_cea", False), reason="the regressed test is skipped")
def test_cea():
    check(LeakResult(attack="cea", metric="accuracy", value=V["acc"], threshold=0.5, label="pin 1 2 3 4",
                     tolerance=V.get("own_tolerance")))


def test_exposure():
    check(LeakResult(attack="exposure", metric="exposure_bits", value=V["exp"], threshold=20.0, ceiling=20.0,
                     label="call"))
'''


def _values(pytester, **values):
    pytester.path.joinpath("values.json").write_text(json.dumps(values))


@pytest.fixture
def project(pytester: pytest.Pytester):
    pytester.makepyfile(test_priv=SUITE)
    _values(pytester, acc=0.10, exp=3.0)
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base/baseline.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["privleak baseline saved: base/baseline.json"])
    return pytester


def test_saved_baseline_stores_each_entrys_resolved_tolerance(project):
    saved = json.loads(project.path.joinpath("base", "baseline.json").read_text())
    stored = {r["name"]: (r["tolerance"], r["tolerance_source"]) for t in saved["tests"] for r in t["results"]}
    assert stored == {"cea.accuracy": (0.05, "built-in default"), "exposure.exposure_bits": (1.0, "built-in default")}


def test_gate_fails_the_run_when_accuracy_or_exposure_grew_beyond_tolerance(project):
    _values(project, acc=0.30, exp=6.5)
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json", "--privleak-report=rep")
    result.assert_outcomes(passed=2)  # every assertion still passes its own threshold...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ...but leakage grew against the baseline
    result.stdout.fnmatch_lines([
        "privleak baseline gate FAILED: 2 result(s) leak more than in base/baseline.json beyond tolerance",
        "*REGRESSION test_priv.py::test_cea cea.accuracy [[]pin 1 2 3 4[]]: before 0.100, after 0.300 "
        "(moved 0.200, tolerance 0.050 (baseline); must not grow)",
        "*REGRESSION test_priv.py::test_exposure exposure.exposure_bits [[]call[]]: before 3.000, after 6.500 "
        "(moved 3.500, tolerance 1.000 (baseline); must not grow)",
    ])
    report = json.loads(project.path.joinpath("rep", "report.json").read_text())
    assert [c["metric"] for c in report["baseline"]["regressions"]] == ["cea.accuracy", "exposure.exposure_bits"]
    assert "Baseline gate FAILED" in project.path.joinpath("rep", "index.html").read_text()


def test_gate_passes_within_tolerance_and_ini_tolerances_apply_from_the_next_saved_baseline(project):
    _values(project, acc=0.14, exp=3.9)
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["privleak baseline gate passed: 2 result(s) compared with base/baseline.json, "
                                 "none worse than its tolerance"])
    # the team tightens the ini: the stored baseline's 1 bit still applies, and a note says so...
    project.makeini("[pytest]\nprivleak_tolerance =\n    exposure_bits=0.5\n")
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*note: test_priv.py::test_exposure::exposure.exposure_bits[[]call[]]: the ini "
                                 "privleak_tolerance gives 0.500, the baseline stores 1.000, which applies*"])
    # ...until the baseline is saved again on main with the ini in place
    _values(project, acc=0.10, exp=3.0)
    project.runpytest_subprocess("--privleak-save-baseline=base/baseline.json").assert_outcomes(passed=2)
    _values(project, acc=0.14, exp=3.9)
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*REGRESSION test_priv.py::test_exposure exposure.exposure_bits*tolerance 0.500 "
                                 "(baseline)*"])


def test_a_change_that_raises_its_own_tolerance_still_fails(project):
    _values(project, acc=0.45, exp=3.0, own_tolerance=1e308)
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*REGRESSION test_priv.py::test_cea cea.accuracy*tolerance 0.050 (baseline)*",
                                 "*this run asks tolerance 1.00e+308, the gate uses 0.050 (baseline)*"])


@pytest.mark.parametrize("how", ["skipped", "deselected"])
def test_a_regressed_test_that_is_skipped_or_deselected_fails_the_gate(project, how):
    _values(project, acc=0.45, exp=3.0, skip_cea=how == "skipped")
    args = ["--privleak-baseline=base/baseline.json", "--privleak-report=rep"]
    if how == "deselected":
        args += ["-k", "not test_cea"]
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "privleak baseline gate FAILED: 1 baseline entry of base/baseline.json has no result in this run*",
        "  MISSING test_priv.py::test_cea::cea.accuracy[[]pin 1 2 3 4[]]",
        "  fix: run the tests that record these results*--privleak-allow-missing*"])
    report = json.loads(project.path.joinpath("rep", "report.json").read_text())  # still written
    assert report["baseline"]["passed"] is False and report["baseline"]["vanished"] == [
        "test_priv.py::test_cea::cea.accuracy[pin 1 2 3 4]"]
    # accepted on purpose by the workflow's command line; never by the checkout's own ini (issue 23 item 3)
    result = project.runpytest_subprocess(*args, "--privleak-allow-missing")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["privleak baseline gate passed: 1 result(s) compared*",
                                 "  missing, allowed by --privleak-allow-missing (not gated): test_priv.py::test_cea*"])
    project.makeini("[pytest]\nprivleak_allow_missing = true\n")
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["privleak: ini privleak_allow_missing = true is ignored by the baseline gate*"])


def test_a_baseline_of_another_suite_fails_the_gate(project):
    project.makepyfile(test_priv="def test_unrelated():\n    pass\n")
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*nothing was compared: no result of this run has a counterpart in "
                                 "base/baseline.json; is it the baseline of this test suite?"])


MECHANISM_SUITE = '''
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult


class MyMechanism:  # no __repr__: repr() holds a memory address
    pass


def test_ldp():
    check(LeakResult(attack="ldp", metric="epsilon_lcb", value=0.5, threshold=1.0, label=repr(MyMechanism())))
'''


def test_a_label_holding_a_memory_address_is_refused_naming_the_result_and_name(pytester):
    pytester.makepyfile(test_mech=MECHANISM_SUITE)
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not pytester.path.joinpath("base.json").exists()
    result.stdout.fnmatch_lines(["privleak baseline NOT saved to base.json: result "
                                 "'test_mech.py::test_ldp::ldp.epsilon_lcb[[]<test_mech.MyMechanism object at 0x*"
                                 "a memory address ('at 0x*which changes every run*stable name=*"])
    # and when comparing: a baseline made before (with a stable label) is not silently "vanished"
    pytester.path.joinpath("base.json").write_text(json.dumps({
        "schema": "pytest-privleak/report", "version": 1, "plugin_version": "0", "created": "", "run": {
            "seed": 0, "xdist": False, "workers": []}, "summary": {"tests": 1, "results": 1, "passed": 1, "failed": 0,
                                                                   "measured": 0, "leaking": []},
        "tests": [{"nodeid": "test_mech.py::test_ldp", "outcome": "passed", "duration": 0.0, "worker": None,
                   "device": None, "seed": 0, "results": [{
                       "key": "test_mech.py::test_ldp::ldp.epsilon_lcb[my-mechanism]", "name": "ldp.epsilon_lcb",
                       "attack": "ldp", "metric": "epsilon_lcb", "value": 0.5, "threshold": 1.0,
                       "direction": "at_most", "interval": None, "confidence": None, "chance": None,
                       "ceiling": None, "label": "my-mechanism", "evidence": {}, "extra": {}, "remedy": "",
                       "tolerance": 0.1, "target": {}, "passed": True, "verdict": "pass", "device": None,
                       "seed": 0, "target_hash": None}]}], "baseline": None}))
    result = pytester.runpytest_subprocess("--privleak-baseline=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["privleak baseline gate FAILED: result*object at 0x*has a key holding a memory "
                                 "address*stable name=*",
                                 "*MISSING test_mech.py::test_ldp::ldp.epsilon_lcb[[]my-mechanism[]]"])


def test_two_results_with_one_key_in_a_gated_run_are_an_error_naming_the_test(pytester):
    pytester.makepyfile(test_dup='''
        from pytest_privleak.assertions import check
        from pytest_privleak.results import LeakResult

        def test_two_models():
            for value in (0.1, 0.2):
                check(LeakResult(attack="cea", metric="accuracy", value=value, threshold=0.5, label="pin"))
    ''')
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not pytester.path.joinpath("base.json").exists()
    result.stdout.fnmatch_lines(["privleak baseline NOT saved to base.json: test test_dup.py::test_two_models "
                                 "recorded 2 results with the same key 'test_dup.py::test_two_models::"
                                 "cea.accuracy[[]pin[]]'*give each assertion its own name=*"])
    # a plain report run is not gated, so it still passes and keeps both results
    assert pytester.runpytest_subprocess("--privleak-report=rep").ret == pytest.ExitCode.OK


def test_report_hooks_cannot_change_the_gates_verdict_and_a_failing_hook_still_gets_the_report_written(project):
    project.makeconftest('''
        def pytest_privleak_report(config, report):
            report["baseline"]["regressions"] = []
            report["baseline"]["passed"] = True
            raise RuntimeError("dashboard is down")
    ''')
    _values(project, acc=0.45, exp=3.0)
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json", "--privleak-report=rep")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["privleak baseline gate FAILED: 1 result(s) leak more*",
                                 "privleak: a pytest_privleak_report hook raised RuntimeError: dashboard is down*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    report = json.loads(project.path.joinpath("rep", "report.json").read_text())
    assert report["baseline"]["passed"] is False and len(report["baseline"]["regressions"]) == 1
