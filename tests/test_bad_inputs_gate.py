"""Bad inputs of the baseline gate: each is an error of a known type whose message names the file, entry
or option and the fix, raised when the baseline is read (start-up), never a crash at session end.

Each case failed on the code before this change: it was accepted (and compared, or silently matched
nothing), or crashed with a raw exception, or crashed at session end without writing the report.
"""
from __future__ import annotations

import copy
import json
import sys

import pytest

from pytest_privleak.report.baseline_file import load_baseline
from pytest_privleak.report.model import ReportFileError

FIX = r"regenerate it on the main branch with `pytest --privleak-save-baseline"
KEY = "t.py::test_pin::cea.accuracy[pin]"


def _baseline() -> dict:
    result = {"key": KEY, "name": "cea.accuracy", "attack": "cea", "metric": "accuracy", "value": 0.1,
              "threshold": 0.5, "direction": "at_most", "interval": None, "confidence": None, "chance": None,
              "ceiling": None, "label": "pin", "evidence": {}, "extra": {}, "remedy": "", "tolerance": 0.05,
              "target": {}, "passed": True, "verdict": "pass", "device": None, "seed": 0, "target_hash": None}
    return {"schema": "pytest-privleak/report", "version": 1, "plugin_version": "0.1.0", "created": "",
            "run": {"seed": 0, "xdist": False, "workers": []},
            "summary": {"tests": 1, "results": 1, "passed": 1, "failed": 0, "measured": 0, "leaking": []},
            "tests": [{"nodeid": "t.py::test_pin", "outcome": "passed", "duration": 0.0, "worker": None,
                       "device": None, "seed": 0, "results": [result]}],
            "baseline": None}


def _edit(**fields):
    def apply(doc):
        doc["tests"][0]["results"][0].update(fields)
    return apply


def _second_copy(doc):
    doc["tests"].append(copy.deepcopy(doc["tests"][0]))


def _no_results(doc):
    doc["tests"][0]["results"] = []


def _no_tests(doc):
    doc["tests"] = []


ENTRY = r"tests\[0\]\.results\[0\] \(key 't\.py::test_pin::cea\.accuracy\[pin\]'\)"

# (edit of a valid baseline, what the message must say), checked with and without jsonschema
BAD_DOCUMENTS = {
    "no tests": (_no_tests, r"bad\.json holds no results \(0 test\(s\)\), so the gate would compare nothing"),
    "tests without results": (_no_results, r"bad\.json holds no results \(1 test\(s\)\)"),
    "value NaN": (_edit(value="NaN"), ENTRY + r": 'value' must be a number .*got 'NaN'"),
    "value a word": (_edit(value="high"), ENTRY + r": 'value' must be a number"),
    "value a boolean": (_edit(value=True), ENTRY + r": 'value' must be a number"),
    "negative tolerance": (_edit(tolerance=-1), ENTRY + r": 'tolerance' must be a finite number >= 0 or null"),
    "infinite tolerance": (_edit(tolerance="Infinity"), ENTRY + r": 'tolerance' must be a finite number >= 0"),
    "tolerance a word": (_edit(tolerance="loose"), ENTRY + r": 'tolerance' must be a finite number >= 0"),
    "direction unknown": (_edit(direction="sideways"), ENTRY + r": 'direction' must be 'at_most' or 'at_least'"),
    "empty key": (_edit(key=""), r"tests\[0\]\.results\[0\]: 'key' must be a non-empty string"),
    "key a number": (_edit(key=7), r"tests\[0\]\.results\[0\]: 'key' must be a non-empty string, got 7"),
    "empty attack name": (_edit(attack=""), ENTRY + r": 'attack' must be a non-empty string"),
    "label a list": (_edit(label=["pin"]), ENTRY + r": 'label' must be a string"),
    "duplicate key": (_second_copy, r"bad\.json: entry 't\.py::test_pin::cea\.accuracy\[pin\]' appears twice"),
    "memory address in key": (_edit(key="t.py::t::ldp.epsilon_lcb[<M object at 0x7f3a2c1b4d90>]"),
                              r"bad\.json: entry .*holds a memory address .*stable name="),
    "pytest temp folder in key": (_edit(key="t.py::t::cea.accuracy[/tmp/pytest-of-ci/pytest-12/data]"),
                                  r"holds a pytest temporary folder"),
}

# documents the plain JSON Schema check (jsonschema installed) also refuses, but which passed the
# start-up check and crashed the gate at session end when jsonschema was missing
STRUCTURE_WITHOUT_JSONSCHEMA = {
    "tests not a list": (lambda d: d.update(tests={"a": 1}), r"tests: expected a list of tests, got dict"),
    "test not an object": (lambda d: d.update(tests=["t.py::t"]), r"tests\[0\]: expected an object"),
    "no nodeid": (lambda d: d["tests"][0].pop("nodeid"), r"tests\[0\]: 'nodeid' must be a non-empty string"),
    "results not a list": (lambda d: d["tests"][0].update(results=None),
                           r"tests\[0\] \(nodeid 't\.py::test_pin'\): 'results' must be a list"),
    "no direction": (lambda d: d["tests"][0]["results"][0].pop("direction"), ENTRY + r": 'direction' must be"),
    "no value": (lambda d: d["tests"][0]["results"][0].pop("value"), ENTRY + r": 'value' must be a number"),
}


def _write(tmp_path, doc) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture(params=["with jsonschema", "without jsonschema"])
def jsonschema_mode(request, monkeypatch):
    if request.param == "without jsonschema":
        monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` raises ImportError
    return request.param


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_bad_baseline_documents_name_the_file_the_entry_and_the_fix(tmp_path, jsonschema_mode, case):
    edit, message = BAD_DOCUMENTS[case]
    doc = _baseline()
    edit(doc)
    with pytest.raises(ReportFileError, match=message) as caught:
        load_baseline(_write(tmp_path, doc))
    assert "bad.json" in str(caught.value) and ("regenerate it on the main branch" in str(caught.value))


@pytest.mark.parametrize("case", sorted(STRUCTURE_WITHOUT_JSONSCHEMA))
def test_malformed_structure_is_refused_without_jsonschema(tmp_path, monkeypatch, case):
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    edit, message = STRUCTURE_WITHOUT_JSONSCHEMA[case]
    doc = _baseline()
    edit(doc)
    with pytest.raises(ReportFileError, match=r"privleak baseline .*bad\.json does not match the report schema "
                                              r"\(at " + message) as caught:
        load_baseline(_write(tmp_path, doc))
    assert FIX in str(caught.value)


def test_a_baseline_that_is_not_utf8_names_the_byte_and_the_fix(tmp_path):
    path = tmp_path / "bad.json"
    content = b'{"schema": "pytest-privleak/report", "label": "caf\xe9"}'
    path.write_bytes(content)
    byte = content.index(b"\xe9")
    with pytest.raises(ReportFileError, match=rf"bad\.json is not UTF-8 text \(byte {byte}: invalid continuation "
                                              r"byte\); " + FIX):
        load_baseline(path)


def test_a_baseline_nested_too_deeply_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ReportFileError, match=r"bad\.json is nested too deeply to be a report; " + FIX):
        load_baseline(path)


def test_a_valid_baseline_loads_with_and_without_jsonschema(tmp_path, jsonschema_mode):
    assert load_baseline(_write(tmp_path, _baseline()))["tests"][0]["results"][0]["key"] == KEY


# --- the same, end to end: a usage error at start-up, never a crash at session end ------------------

SUITE = '''
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult


def test_pin():
    check(LeakResult(attack="cea", metric="accuracy", value=0.1, threshold=0.5, label="pin"))
'''


@pytest.mark.parametrize(("content", "message"), [
    (b'{"schema": "pytest-privleak/report", "version": 1, "tests": "\xff"}',
     "*privleak baseline bad.json is not UTF-8 text (byte 61: invalid start byte); regenerate it*"),
    (json.dumps({**_baseline(), "tests": [{"nodeid": "test_x.py::test_pin", "results": [{"key": "k"}]}]}).encode(),
     "*bad.json does not match the report schema (at tests[[]0[]].results[[]0[]] (key 'k'): 'attack' must be*"),
    (json.dumps({**_baseline(), "tests": []}).encode(), "*bad.json holds no results (0 test(s))*"),
])
def test_start_up_usage_error_without_jsonschema_and_no_crash_at_session_end(pytester, content, message):
    pytester.makeconftest("import sys\nsys.modules['jsonschema'] = None  # as without the test extra\n")
    pytester.makepyfile(test_x=SUITE)
    pytester.path.joinpath("bad.json").write_bytes(content)
    result = pytester.runpytest_subprocess("--privleak-baseline=bad.json", "--privleak-report=rep")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message + "(also written to rep/summary.md)"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    # the report folder CI uploads says why no test ran
    report = json.loads(pytester.path.joinpath("rep", "report.json").read_text())
    assert report["tests"] == [] and report["baseline"]["passed"] is False
    assert report["baseline"]["errors"][0].startswith("privleak baseline bad.json ")
    summary = pytester.path.joinpath("rep", "summary.md").read_text()
    assert "privleak baseline gate FAILED: privleak baseline bad.json " in summary
    assert "regenerate it on the main branch" in summary


def test_a_refused_baseline_without_a_report_folder_writes_nothing(pytester):
    pytester.makepyfile(test_x=SUITE)
    pytester.path.joinpath("bad.json").write_text("{not json")
    result = pytester.runpytest_subprocess("--privleak-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "also written" not in result.stderr.str()
    assert not pytester.path.joinpath("privleak-report").exists()


def test_bad_allow_missing_ini_names_the_option_and_the_fix(pytester):
    pytester.makepyfile(test_x=SUITE)
    pytester.makeini("[pytest]\nprivleak_allow_missing = maybe\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option privleak_allow_missing is not a boolean*write "
                                 "privleak_allow_missing = true (or false)*"])


def test_an_infinite_tolerance_is_not_saved_into_a_baseline(pytester):
    pytester.makepyfile(test_x='''
        from pytest_privleak.assertions import check
        from pytest_privleak.results import LeakResult

        def test_pin():
            check(LeakResult(attack="cea", metric="accuracy", value=0.1, threshold=0.5, label="pin",
                             tolerance=float("inf")))
    ''')
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not pytester.path.joinpath("base.json").exists()
    result.stdout.fnmatch_lines(["privleak baseline NOT saved to base.json: result "
                                 "'test_x.py::test_pin::cea.accuracy[[]pin[]]' of test test_x.py::test_pin asks "
                                 "tolerance inf; give tolerance= a finite number >= 0*"])


def test_saving_a_baseline_with_no_result_is_refused(pytester):
    pytester.makepyfile(test_x=SUITE)
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json", "-k", "nothing_matches")
    assert result.ret != pytest.ExitCode.OK and not pytester.path.joinpath("base.json").exists()
    result.stdout.fnmatch_lines(["privleak baseline NOT saved to base.json: no privacy result was recorded*"
                                 "run the privacy tests*"])


def test_a_report_hook_cannot_put_nan_into_a_saved_baseline(pytester):
    # a report hook put NaN in a result (issue 36 item 3: no hook can change a figure): the figure is restored
    # before the baseline is saved, and the run fails naming the hook's change
    pytester.makepyfile(test_x=SUITE)
    pytester.makeconftest('''
        def pytest_privleak_report(config, report):
            report["tests"][0]["results"][0]["value"] = "NaN"
    ''')
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["privleak: a pytest_privleak_report hook changed the report's 'tests'*"])
    saved = json.loads(pytester.path.joinpath("base.json").read_text())
    assert saved["tests"][0]["results"][0]["value"] != "NaN"
