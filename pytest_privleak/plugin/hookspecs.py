"""The plugin's own hooks, for other plugins and a team's ``conftest.py``.

Both are called in the controlling process only (with xdist, after the
workers' results reached it), once per run or once per result.

Example: push every figure to a dashboard, and stamp the CI build on the report::

    # conftest.py
    import os

    def pytest_privleak_result(config, nodeid, result):
        my_dashboard.push(nodeid, result.name, result.value, passed=result.passed)

    def pytest_privleak_report(config, report):
        report["ci"] = {"commit": os.environ.get("GITHUB_SHA", "")}   # kept as report["hooks"]["ci"]
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
    ``pytest_privleak/report/schema.json``). A hook may add keys of its own
    (``report["ci"] = {...}``): they are kept in report.json and the baseline
    file under ``report["hooks"]``, a section of their own. It cannot change
    what the plugin wrote (the results and their figures, the run, the gate's
    verdict): those sections are restored after the hooks, and a hook that
    changed one fails the run, naming it (issue 36: a hook that rewrote a
    shard's figure made the merged gate pass). An exception raised here is
    reported and fails the run; the report is still written.
    """
