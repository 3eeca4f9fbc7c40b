"""The plugin's own hooks, for other plugins and a team's ``conftest.py``.

Both are called in the controlling process only (with xdist, after the
workers' results reached it), once per run or once per result.

Example: push every figure to a dashboard, and stamp the CI build on the report::

    # conftest.py
    import os

    def pytest_privleak_result(config, nodeid, result):
        my_dashboard.push(nodeid, result.name, result.value, passed=result.passed)

    def pytest_privleak_report(config, report):
        report["ci"] = {"commit": os.environ.get("GITHUB_SHA", "")}
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import pytest

    from ..results import LeakResult

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_privleak_result(config: "pytest.Config", nodeid: str, result: "LeakResult") -> None:
    """Called once for every recorded result, in the controlling process (also under xdist).

    ``nodeid`` is the test that recorded it; ``result`` is a fresh
    :class:`~pytest_privleak.results.LeakResult` (changing it changes nothing else).
    """


@hookspec
def pytest_privleak_report(config: "pytest.Config", report: dict[str, Any]) -> None:
    """Called once at the end of the run with the report document, before anything is written.

    ``report`` is the dict that becomes ``report.json`` (see
    ``pytest_privleak/report/schema.json``); mutate it in place to change or
    extend the report: added keys are kept in report.json and the baseline
    file, and changed results show in index.html and summary.md. The baseline
    gate has already been decided (``report["baseline"]``) when this is called,
    and that part is restored after the hook: a hook cannot change the verdict.
    An exception raised here is reported and fails the run; the report is
    still written.
    """
