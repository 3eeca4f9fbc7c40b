"""Inconclusive is not a pass: an audit cut short by its budget fails unless the user accepts it by name.

An attack or audit that stops before covering what its default covers (the
LDP audit's pairs and samples, an exhaustive rank replaced by a sampled one,
a gradient search cut by its step or time budget) has shown only that the
part it covered does not leak.  Reporting that as a pass lets a budget hide a
leak: a k-RR mechanism leaking at one input of a hundred passes an LDP audit
that tried one of ten candidate pairs.  :func:`check_covered` records the
result with an ``inconclusive`` evidence line and raises
:class:`InconclusiveAuditError` (a :class:`~pytest_privleak.results.PrivacyLeakError`,
so the test fails as for a leak) unless the caller passed
``allow_inconclusive=True``.  A result over its limit is a leak whatever the
coverage (the partial evidence already proves it) and fails as a leak.
"""
from __future__ import annotations

import dataclasses

from ..results import LeakResult, PrivacyLeakError, record

__all__ = ["InconclusiveAuditError", "check_covered", "check_allow_inconclusive", "mark_inconclusive"]

#: Key of the result's ``evidence`` line and ``target`` flag that say the measurement is inconclusive.
INCONCLUSIVE = "inconclusive"


class InconclusiveAuditError(PrivacyLeakError):
    """The measurement stayed within its limit but did not cover what its default covers.

    ``covered`` says what was covered, ``rest`` the budget (or argument) that
    covers the rest; ``result`` is the recorded, partial :class:`LeakResult`.
    """

    def __init__(self, result: LeakResult, *, covered: str, rest: str) -> None:
        self.covered = covered
        self.rest = rest
        self.result = result
        AssertionError.__init__(self, inconclusive_message(result, covered=covered, rest=rest))


def inconclusive_message(result: LeakResult, *, covered: str, rest: str) -> str:
    """Head line (what ran, what it covered, what covers the rest) above the result's own explanation."""
    label = f" [{result.label}]" if result.label else ""
    return (f"privleak {result.name}{label}: INCONCLUSIVE, not a pass: the figure stays within the limit but the "
            f"measurement did not cover what its default covers ({covered}); fix: {rest}, or pass "
            f"allow_inconclusive=True to accept a partial measurement as a pass\n{result.explain()}")


def check_allow_inconclusive(allow_inconclusive) -> bool:
    """``allow_inconclusive`` must be a plain bool: an opt-in that weakens the verdict is never implied."""
    if not isinstance(allow_inconclusive, bool):
        raise ValueError(f"allow_inconclusive must be True or False, got {allow_inconclusive!r}; fix: leave it "
                         "out (a measurement cut short by its budget fails as inconclusive), or pass "
                         "allow_inconclusive=True to accept it as a pass")
    return allow_inconclusive


def mark_inconclusive(result: LeakResult, *, covered: str, rest: str, allowed: bool) -> LeakResult:
    """A copy of ``result`` whose evidence and target say it is inconclusive (and whether that was allowed)."""
    how = "accepted (allow_inconclusive=True)" if allowed else "fails the test"
    evidence = {**result.evidence, INCONCLUSIVE: f"{covered}; {how}; to cover the rest: {rest}"}
    target = {**result.target, INCONCLUSIVE: True, "inconclusive_allowed": allowed}
    return dataclasses.replace(result, evidence=evidence, target=target)


def check_covered(result: LeakResult, *, complete: bool, covered: str, rest: str,
                  allow_inconclusive: bool = False) -> LeakResult:
    """Record ``result`` and raise: a leak over the limit, or an incomplete measurement within it.

    ``complete``: the measurement covered what its default covers; otherwise
    ``covered`` says what it did cover and ``rest`` the budget that covers the
    rest.  The assertion helpers call this in place of ``assertions.check``.
    """
    __tracebackhide__ = True
    allow = check_allow_inconclusive(allow_inconclusive)
    if not complete:
        result = mark_inconclusive(result, covered=covered, rest=rest, allowed=allow)
    record(result)
    if not result.passed:
        raise PrivacyLeakError(result)
    if not complete and not allow:
        raise InconclusiveAuditError(result, covered=covered, rest=rest)
    return result
