"""The baseline gate: tolerance rules by hand, and a CI-like run that fails or passes on it."""
from __future__ import annotations

import json

import pytest

from pytest_privleak.baseline import DEFAULT_TOLERANCES, compare, gate_lines, tolerance_for


def _report(*results):
    tests = {}
    for nodeid, attack, metric, value, direction, label, tol in results:
        tests.setdefault(nodeid, []).append({
            "key": f"{nodeid}::{attack}.{metric}" + (f"[{label}]" if label else ""), "attack": attack,
            "metric": metric, "value": value, "direction": direction, "label": label, "tolerance": tol})
    return {"tests": [{"nodeid": n, "results": rs} for n, rs in tests.items()]}


def test_tolerance_order_assertion_then_ini_then_builtin_then_default():
    r = {"attack": "cea", "metric": "accuracy", "tolerance": None}
    assert tolerance_for(r, {}) == DEFAULT_TOLERANCES["accuracy"] == 0.05
    assert tolerance_for(r, {"accuracy": 0.2}) == 0.2
    assert tolerance_for(r, {"accuracy": 0.2, "cea.accuracy": 0.3}) == 0.3
    assert tolerance_for({**r, "tolerance": 0.01}, {"cea.accuracy": 0.3}) == 0.01
    assert tolerance_for({"attack": "x", "metric": "odd", "tolerance": None}, {}) == 0.05
    assert tolerance_for({"attack": "x", "metric": "odd", "tolerance": None}, {"default": 0.5}) == 0.5
    # the metric names the exposure assertions record get one bit
    assert tolerance_for({"attack": "exposure", "metric": "exposure_bits", "tolerance": None}, {}) == 1.0
    assert tolerance_for({"attack": "d-exposure", "metric": "d_exposure_bits", "tolerance": None}, {}) == 1.0


def test_worse_depends_on_direction_and_tolerance():
    before = _report(("t::a", "cea", "accuracy", 0.10, "at_most", "pin", None),
                     ("t::b", "exposure", "exposure_bits", 5.0, "at_most", "", None),
                     ("t::c", "x", "hdt", 0.90, "at_least", "", 0.01),
                     ("t::gone", "cea", "accuracy", 0.0, "at_most", "", None))
    after = _report(("t::a", "cea", "accuracy", 0.16, "at_most", "pin", None),   # +0.06 > 0.05
                    ("t::b", "exposure", "exposure_bits", 5.9, "at_most", "", None),  # +0.9 <= 1.0 bit
                    ("t::c", "x", "hdt", 0.85, "at_least", "", 0.01),            # shrank by 0.05 > 0.01
                    ("t::new", "cea", "accuracy", 1.0, "at_most", "", None))
    gate = compare(after, before, {}, "base.json")
    assert [c["key"] for c in gate["regressions"]] == ["t::a::cea.accuracy[pin]", "t::c::x.hdt"]
    assert gate["new"] == ["t::new::cea.accuracy"] and gate["vanished"] == ["t::gone::cea.accuracy"]
    assert not gate["passed"] and gate["compared"] == 3
    text = "\n".join(gate_lines(gate))
    assert ("REGRESSION t::a cea.accuracy [pin]: before 0.100, after 0.160 (moved 0.060, tolerance 0.050; "
            "must not grow)") in text
    assert "must not shrink" in text and "new (not in baseline, not gated): t::new::cea.accuracy" in text
    improved = compare(before, after, {}, "base.json")  # the other way round: a and c improved
    assert improved["passed"] and [c["key"] for c in improved["improvements"]] == [
        "t::a::cea.accuracy[pin]", "t::c::x.hdt"]


def test_infinite_exposure_is_a_regression_from_a_finite_one():
    before = _report(("t::b", "exposure", "exposure_bits", 5.0, "at_most", "", None))
    after = _report(("t::b", "exposure", "exposure_bits", "Infinity", "at_most", "", None))
    assert len(compare(after, before, {}, "b")["regressions"]) == 1
    assert compare(after, after, {}, "b")["passed"]


SUITE = '''
import json, pathlib
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult

V = json.loads(pathlib.Path(__file__).with_name("values.json").read_text())


def test_cea():
    check(LeakResult(attack="cea", metric="accuracy", value=V["acc"], threshold=0.5, label="pin 1 2 3 4"))


def test_exposure():
    check(LeakResult(attack="exposure", metric="exposure_bits", value=V["exp"], threshold=20.0, ceiling=20.0,
                     label="call"))
'''


@pytest.fixture
def project(pytester: pytest.Pytester):
    pytester.makepyfile(test_priv=SUITE)
    pytester.path.joinpath("values.json").write_text(json.dumps({"acc": 0.10, "exp": 3.0}))
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base/baseline.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["privleak baseline saved: base/baseline.json"])
    return pytester


def test_gate_fails_the_run_when_accuracy_or_exposure_grew_beyond_tolerance(project):
    project.path.joinpath("values.json").write_text(json.dumps({"acc": 0.30, "exp": 6.5}))
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json", "--privleak-report=rep")
    result.assert_outcomes(passed=2)  # every assertion still passes its own threshold...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ...but leakage grew against the baseline
    result.stdout.fnmatch_lines([
        "privleak baseline gate FAILED: 2 result(s) leak more than in base/baseline.json beyond tolerance",
        "*REGRESSION test_priv.py::test_cea cea.accuracy [[]pin 1 2 3 4[]]: before 0.100, after 0.300 "
        "(moved 0.200, tolerance 0.050; must not grow)",
        "*REGRESSION test_priv.py::test_exposure exposure.exposure_bits [[]call[]]: before 3.000, after 6.500 "
        "(moved 3.500, tolerance 1.000; must not grow)",
    ])
    report = json.loads(project.path.joinpath("rep", "report.json").read_text())
    assert [c["metric"] for c in report["baseline"]["regressions"]] == ["cea.accuracy", "exposure.exposure_bits"]
    assert "Baseline gate FAILED" in project.path.joinpath("rep", "index.html").read_text()


def test_gate_passes_within_tolerance_and_says_so(project):
    project.path.joinpath("values.json").write_text(json.dumps({"acc": 0.14, "exp": 3.9}))
    # no ini: the built-in tolerances (0.05 for accuracy, 1 bit for exposure_bits) apply
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["privleak baseline gate passed: 2 result(s) compared with base/baseline.json, "
                                 "none worse than its tolerance"])
    # the same drift fails once the team tightens the ini tolerance
    project.makeini("[pytest]\nprivleak_tolerance =\n    exposure_bits=0.5\n")
    result = project.runpytest_subprocess("--privleak-baseline=base/baseline.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*REGRESSION test_priv.py::test_exposure exposure.exposure_bits*tolerance 0.500*"])


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "*privleak baseline bad.json is not JSON (line 1*regenerate it on the main branch with "
                  "`pytest --privleak-save-baseline bad.json`*"),
    ('{"schema": "something-else"}', "*bad.json is not a pytest-privleak report*"),
    ('{"schema": "pytest-privleak/report", "version": 99}', "*bad.json has report version 99, this plugin "
                                                           "reads version 1*"),
    ('{"schema": "pytest-privleak/report", "version": 1, "tests": 3}', "*bad.json does not match the report "
                                                                      "schema*"),
])
def test_bad_or_mismatched_baseline_is_a_usage_error(pytester: pytest.Pytester, content, message):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.path.joinpath("bad.json").write_text(content)
    result = pytester.runpytest_subprocess("--privleak-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
