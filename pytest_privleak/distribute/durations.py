"""Test durations of the last run, kept in pytest's cache, so ``-n N`` starts the longest groups first.

Each run records every test's setup + call + teardown seconds and stores
them under :data:`CACHE_KEY` in ``.pytest_cache`` (merged with what the last
runs recorded for tests that did not run this time). The next ``-n N`` run
without ``--privleak-shard-durations`` orders its xdist groups by them
(:class:`~pytest_privleak.distribute.scheduling.GroupScheduling`). They decide only the
order in which tests start, never a figure or a verdict, so a damaged entry
is dropped with a warning rather than failing the run.
"""
from __future__ import annotations

import math
from typing import Any

CACHE_KEY = "privleak/durations"


class DurationsCacheWarning(UserWarning):
    """The durations pytest-privleak kept in ``.pytest_cache`` could not be used (they are rewritten)."""


def valid(data: Any) -> dict[str, float] | None:
    """``{nodeid: seconds}`` when ``data`` is one (finite seconds >= 0), else None."""
    if not isinstance(data, dict):
        return None
    out = {}
    for nodeid, seconds in data.items():
        if not isinstance(nodeid, str) or isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not math.isfinite(seconds) or seconds < 0:
            return None
        out[nodeid] = float(seconds)
    return out


def read(config) -> dict[str, float] | None:
    """The last runs' durations from pytest's cache (None: none yet, or a damaged entry, with a warning)."""
    data = config.cache.get(CACHE_KEY, None)
    if data is None:
        return None
    durations = valid(data)
    if durations is None:
        config.issue_config_time_warning(DurationsCacheWarning(
            f"the test durations pytest-privleak keeps in .pytest_cache ({CACHE_KEY}) are not "
            "{nodeid: seconds}; xdist groups are ordered by their number of tests this time and the entry is "
            "rewritten at the end of the run (fix, if it persists: pytest --cache-clear)"), stacklevel=2)
    return durations or None


class DurationsRecorder:
    """Plugin object: sums each test's phase durations and stores them in pytest's cache at the end."""

    def __init__(self, config) -> None:
        self.config = config
        self.phases: dict[str, dict[str, float]] = {}

    def pytest_runtest_logreport(self, report) -> None:
        if report.when in ("setup", "call", "teardown"):
            self.phases.setdefault(report.nodeid, {})[report.when] = float(getattr(report, "duration", 0.0) or 0.0)

    def pytest_sessionfinish(self) -> None:
        if not self.phases:
            return
        merged = valid(self.config.cache.get(CACHE_KEY, None)) or {}
        merged.update({nodeid: sum(phases.values()) for nodeid, phases in self.phases.items()})
        self.config.cache.set(CACHE_KEY, merged)
