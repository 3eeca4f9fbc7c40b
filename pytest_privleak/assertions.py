"""The public ``assert_*`` helpers: run an attack, build a :class:`LeakResult`, record it, raise.

Each helper is a thin shell: the attack maths lives in ``attacks/`` and
``ldp/``; here the figure meets its threshold and becomes a message.
"""
from __future__ import annotations

from .results import LeakResult, PrivacyLeakError, record


def check(result: LeakResult) -> LeakResult:
    """Record ``result`` on the running test and raise :class:`PrivacyLeakError` if it failed."""
    __tracebackhide__ = True
    record(result)
    if not result.passed:
        raise PrivacyLeakError(result)
    return result
