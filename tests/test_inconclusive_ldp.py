"""Inconclusive is not a pass: an LDP audit cut short by its time budget fails unless accepted (issue 23 item 4).

Before, ``assert_ldp_holds(k-RR leaking at 1 input of 100, epsilon=1, time_budget=0.05)`` passed (ε_lcb 0.151)
with only an ``LDPAuditWarning`` that 1 of 10 candidate pairs was tried; the full audit finds ε_lcb 3.89.
"""
import textwrap
import warnings

import pytest
from helpers_ldp import RareLeak

from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.ldp import KRR, LDPAuditWarning, assert_ldp_holds
from pytest_privleak.results import PrivacyLeakError, set_sink
from pytest_privleak import expect_leak

SMALL = dict(samples=20_000, train_samples=2_000, val_samples=5_000, progress=None)


def test_the_table_route_fails_as_inconclusive_and_says_what_covers_the_rest():
    with pytest.warns(LDPAuditWarning, match="candidate pairs"):
        with expect_leak() as info:
            assert_ldp_holds(RareLeak(100, leak=37), 1.0, time_budget=0.05, progress=None)
    assert info.type is InconclusiveAuditError
    err = info.value
    assert isinstance(err, PrivacyLeakError)  # fails the test as a leak does, with its own message
    head = str(err).splitlines()[0]
    assert "INCONCLUSIVE, not a pass" in head and "time budget of 0.05 s spent" in head
    assert "the search tried 1 of" in head or "samples per input" in head  # what was covered
    assert "time_budget=" in head and "or more (the whole audit would take about" in head  # the budget for the rest
    assert "time_budget=None" in head and "allow_inconclusive=True" in head
    res = err.result
    assert res.passed and res.value < 1.0  # within the limit: only the coverage fails it
    assert res.target["inconclusive"] is True and res.target["inconclusive_allowed"] is False
    assert "fails the test" in res.evidence["inconclusive"]


def test_allow_inconclusive_accepts_the_partial_audit_and_says_so():
    with pytest.warns(LDPAuditWarning, match="time budget"):
        res = assert_ldp_holds(RareLeak(100, leak=37), 1.0, time_budget=0.05, progress=None,
                               allow_inconclusive=True)
    assert res.passed and res.target["inconclusive_allowed"] is True
    assert "accepted (allow_inconclusive=True)" in res.evidence["inconclusive"]
    assert "inconclusive" in res.explain()


def test_one_second_passes_a_correct_mechanism_only_when_the_audit_covers():
    set_sink([])   # either outcome is this test's evidence: diverted, so an inconclusive one is not swallowed
    try:
        res = assert_ldp_holds(KRR(3, 1.0), 1.0, time_budget=1.0, **SMALL)
    except InconclusiveAuditError as err:  # a loaded machine: not covered in 1 s, so no pass either
        assert err.result.target["complete"] is False and "allow_inconclusive=True" in str(err)
    else:
        assert res.target["complete"] is True and "inconclusive" not in res.target
    finally:
        set_sink(None)


def test_one_second_never_passes_the_rare_leak():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LDPAuditWarning)
        with expect_leak() as info:  # the leak (ε_lcb > 1) or, if not covered, inconclusive
            assert_ldp_holds(RareLeak(100, leak=37), 1.0, time_budget=1.0, progress=None)
    assert (not info.value.result.passed) or isinstance(info.value, InconclusiveAuditError)


def test_a_leak_seen_within_the_budget_fails_as_a_leak_not_as_inconclusive():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LDPAuditWarning)
        with expect_leak() as info:
            assert_ldp_holds(KRR(3, 4.0), 1.0, time_budget=0.05, **SMALL)
    assert not isinstance(info.value, InconclusiveAuditError) and info.value.result.value > 1.0


def test_no_budget_is_never_inconclusive():
    res = assert_ldp_holds(KRR(3, 1.0), 1.0, **SMALL)
    assert res.target["complete"] is True and "inconclusive" not in res.evidence


def test_the_route_exits_non_zero_under_pytest(pytester):
    pytester.makepyfile(test_route=textwrap.dedent("""
        from pytest_privleak.ldp import KRR, assert_ldp_holds

        def test_audit():
            assert_ldp_holds(KRR(100, 1.0), 1.0, time_budget=0.05, progress=None)
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::UserWarning")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*InconclusiveAuditError*INCONCLUSIVE, not a pass*time budget of 0.05 s spent*"])
