"""Every result counts (issue 23 items 1-2): fixtures, threads, outside any test, swallowed leaks, expect_leak.

Each route below is end to end (pytester subprocess runs, as CI runs pytest):
a membership scorer whose AUC rises from 0.50 to 0.87 stays under its own 0.95
limit, so only the baseline gate can catch it, and only if the result reaches it.
"""
from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

SCORER = '''
import os
import pytest
from concurrent.futures import ThreadPoolExecutor
from pytest_privleak.results import LeakResult, PrivacyLeakError, record

AUC = float(os.environ.get("PRIVLEAK_TEST_AUC", "0.5"))


def membership(label, value=AUC, limit=0.95):
    """A stand-in membership assertion: records the AUC, raises when over the limit."""
    r = record(LeakResult("membership", "auc", value, threshold=limit, direction="at_most", label=label))
    if not r.passed:
        raise PrivacyLeakError(r)
    return r


def test_control():
    membership("control", value=0.5)   # constant: the gate always has something to compare
'''

#: route -> (test code appended to SCORER, the result key the regression must name)
ROUTES = {
    # old: the sink existed only during pytest_runtest_call, so the fixture's result never reached the baseline
    "module fixture setup": ('''
@pytest.fixture(scope="module")
def trained():
    membership("fixture-setup")
    yield


def test_uses(trained):
    pass
''', "test_route.py::trained::membership.auc[fixture-setup]"),
    # old: same, in the teardown
    "module fixture teardown": ('''
@pytest.fixture(scope="module")
def audited():
    yield
    membership("fixture-teardown")


def test_uses(audited):
    pass
''', "test_route.py::audited::membership.auc[fixture-teardown]"),
    # old: a function-scoped fixture's setup ran outside the call, so its result was dropped too
    "function fixture setup": ('''
@pytest.fixture
def measured():
    membership("function-fixture")


def test_uses(measured):
    pass
''', "test_route.py::test_uses::membership.auc[function-fixture]"),
    # old: the sink was thread-local, so a result recorded in a worker thread was dropped
    "worker thread": ('''
def test_in_a_thread():
    with ThreadPoolExecutor(2) as pool:
        pool.submit(membership, "thread").result()
''', "test_route.py::test_in_a_thread::membership.auc[thread]"),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_regression_recorded_outside_the_test_body_fails_the_gate(pytester, monkeypatch, route):
    code, key = ROUTES[route]
    pytester.makepyfile(test_route=SCORER + code)
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.50")
    saved = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-save-baseline=base.json")
    assert saved.ret == 0, saved.stdout.str()
    monkeypatch.setenv("PRIVLEAK_TEST_AUC", "0.87")
    gated = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-baseline=base.json")
    assert gated.ret == 1, gated.stdout.str()   # old code: "gate passed: 1 result(s) compared", exit 0
    keys = [r["key"] for t in json.loads((pytester.path / "base.json").read_text())["tests"] for r in t["results"]]
    assert key in keys, keys
    gated.stdout.fnmatch_lines([f"*REGRESSION {key.rsplit('::membership', 1)[0]} membership.auc*before 0.500, "
                                "after 0.870*"])


def test_a_fixture_result_keeps_its_key_whichever_test_triggers_it(pytester):
    """The module fixture's key is the module's, not the first test's: -k selecting another test keeps it."""
    pytester.makepyfile(test_route=SCORER + ROUTES["module fixture setup"][0] + '''

def test_also_uses(trained):
    pass
''')
    keys = []
    for selection in ("test_uses", "test_also_uses"):
        run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", selection, "--privleak-report=rep")
        assert run.ret == 0, run.stdout.str()
        report = json.loads((pytester.path / "rep" / "report.json").read_text())
        keys.append(sorted(r["key"] for t in report["tests"] for r in t["results"]))
    assert keys[0] == keys[1] == ["test_route.py::trained::membership.auc[fixture-setup]"]


def test_fixture_and_thread_results_are_the_same_under_xdist(pytester):
    pytester.makepyfile(test_route=SCORER + ROUTES["module fixture teardown"][0] + ROUTES["worker thread"][0])
    found = []
    for extra in ((), ("-n", "2")):
        run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-report=rep", *extra)
        assert run.ret == 0, run.stdout.str()
        report = json.loads((pytester.path / "rep" / "report.json").read_text())
        found.append(sorted((r["key"], r["value"]) for t in report["tests"] for r in t["results"]))
    assert found[0] == found[1] and len(found[0]) == 3, found


def test_a_result_recorded_outside_any_test_fails_the_run_naming_it(pytester):
    # old: recorded at conftest import, no sink: silently dropped, exit 0
    pytester.makeconftest('''
from pytest_privleak.results import LeakResult, record
record(LeakResult("membership", "auc", 0.87, threshold=0.95, label="at-import"))
''')
    pytester.makepyfile(test_plain="def test_nothing():\n    pass\n")
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == 1, run.stdout.str()
    run.stdout.fnmatch_lines(["*privleak: result recorded outside any test or fixture (before any test ran: at "
                              "import or collection): membership.auc [[]at-import] = 0.870*"])


SWALLOW = SCORER + '''

def test_catches_its_own_leak():
    try:
        membership("caught", value=0.874, limit=0.55)
    except PrivacyLeakError:
        pass
'''


def test_a_swallowed_leak_fails_the_run_naming_the_test_and_the_result(pytester):
    # old: the table said FAIL, the summary "1 of 2 result(s) leak", yet exit 0 (only the gate set the status)
    pytester.makepyfile(test_swallow=SWALLOW)
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == 1, run.stdout.str()
    run.stdout.fnmatch_lines(["*privleak: swallowed leak: test_swallow.py::test_catches_its_own_leak "
                              "membership.auc [[]caught] = 0.874 violates its limit (0.550), yet the test passed*"])


def test_a_leak_swallowed_then_skipped_also_fails(pytester):
    pytester.makepyfile(test_swallow=SCORER + '''

def test_skips_after_its_leak():
    try:
        membership("caught", value=0.874, limit=0.55)
    except PrivacyLeakError:
        pytest.skip("not today")
''')
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == 1, run.stdout.str()
    run.stdout.fnmatch_lines(["*swallowed leak: test_swallow.py::test_skips_after_its_leak*yet the test skipped*"])


DECLARED = SCORER + '''
from pytest_privleak import expect_leak


def test_declares_its_leak():
    with expect_leak(match=r"membership.auc \\[declared\\]: 0.874 violates") as leak:
        membership("declared", value=0.874, limit=0.55)
    assert leak.value.result.label == "declared" and leak.result is leak.value.result
    assert leak.type.__name__ == "PrivacyLeakError" and leak.match("violates the limit")


def test_declares_a_leak_raised_in_a_thread():
    with expect_leak():
        with ThreadPoolExecutor(1) as pool:
            pool.submit(membership, "in-thread", 0.9, 0.55).result()


@pytest.mark.xfail(reason="known leak", strict=True)
def test_known_leak():
    membership("xfail", value=0.9, limit=0.55)
'''


@pytest.mark.parametrize("extra", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_declared_leak_passes_and_is_shown_as_expected(pytester, extra):
    pytester.makepyfile(test_declared=DECLARED)
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-report=rep", *extra)
    assert run.ret == 0, run.stdout.str()
    assert "swallowed" not in run.stdout.str() and "\nFAIL " not in run.stdout.str()
    run.stdout.fnmatch_lines(["expected leak*test_declares_its_leak*membership.auc*declared*"])
    summary = json.loads((pytester.path / "rep" / "report.json").read_text())["summary"]
    assert summary["failed"] == 0 and summary["expected_leaks"] == 3, summary


def test_expect_leak_fails_when_nothing_leaks_or_the_message_does_not_match(pytester):
    pytester.makepyfile(test_declared=SCORER + '''
from pytest_privleak import expect_leak


def test_no_leak():
    with expect_leak():
        membership("fine", value=0.5)


def test_wrong_message():
    with expect_leak(match="exposure"):
        membership("other", value=0.9, limit=0.55)


def test_other_errors_pass_through():
    with expect_leak():
        raise KeyError("not a leak")
''')
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == 1
    run.assert_outcomes(passed=1, failed=3)
    run.stdout.fnmatch_lines(["*expect_leak: DID NOT RAISE PrivacyLeakError*",
                              "*expect_leak: the regex 'exposure' does not match*", "*KeyError*not a leak*"])


def test_a_session_fixture_set_up_on_every_xdist_worker_counts_once(pytester):
    pytester.makeconftest(SCORER.replace("def test_control", "def _unused") + '''

@pytest.fixture(scope="session")
def audited_once():
    membership("session-audit")
''')
    for name in ("a", "b", "c", "d"):
        pytester.makepyfile(**{f"test_{name}": "import time\n\ndef test_it(audited_once):\n    time.sleep(0.3)\n"})
    found = []
    for extra in ((), ("-n", "2", "--dist", "load")):
        run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-report=rep", *extra)
        assert run.ret == 0, run.stdout.str()
        report = json.loads((pytester.path / "rep" / "report.json").read_text())
        found.append(sorted(r["key"] for t in report["tests"] for r in t["results"]))
    assert found[0] == found[1] == ["[session]::audited_once::membership.auc[session-audit]"], found


def test_a_caught_inconclusive_audit_also_fails_unless_declared(pytester):
    """Inconclusive is not a pass (issue 23 item 4): catching it is swallowing it; expect_leak declares it."""
    pytester.makepyfile(test_inconclusive=SCORER + '''
from pytest_privleak import expect_leak
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError, check_covered


def audit():
    check_covered(LeakResult("ldp", "epsilon_lcb", 0.1, threshold=1.0, label="short"), complete=False,
                  covered="1 of 10 pairs", rest="time_budget=1")


def test_catches_it():
    try:
        audit()
    except InconclusiveAuditError:
        pass


def test_declares_it():
    with expect_leak(match="INCONCLUSIVE"):
        audit()
''')
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == 1, run.stdout.str()
    run.stdout.fnmatch_lines(["*privleak: swallowed inconclusive: test_inconclusive.py::test_catches_it "
                              "ldp.epsilon_lcb [[]short[]] = 0.100 is inconclusive*"])
    assert "test_declares_it" not in "".join(l for l in run.outlines if "swallowed" in l)
