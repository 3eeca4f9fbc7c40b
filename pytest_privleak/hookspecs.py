"""The plugin's own hooks, for other plugins and a team's ``conftest.py``.

Example (push every figure to a dashboard)::

    # conftest.py
    def pytest_privleak_result(config, nodeid, result):
        my_dashboard.push(nodeid, result.name, result.value)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import pytest

    from .results import LeakResult

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_privleak_result(config: "pytest.Config", nodeid: str, result: "LeakResult") -> None:
    """Called once for every recorded result, in the controlling process (also under xdist)."""
