"""Gathers every test's results in the controlling process (with or without xdist).

Each test report carries its results as JSON (``report.privleak_results``),
which xdist ships from workers unchanged; this collector rebuilds them, calls
the ``pytest_privleak_result`` hook and prints the terminal summary.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from .results import LeakResult


@dataclass
class CollectedResult:
    nodeid: str
    outcome: str
    result: LeakResult
    duration: float = 0.0


class ResultCollector:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.collected: list[CollectedResult] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "privleak_results", None)
        if report.when != "call" or not payload:
            return
        for data in payload:
            item = CollectedResult(report.nodeid, report.outcome, LeakResult.from_json(data),
                                   float(getattr(report, "duration", 0.0)))
            self.collected.append(item)
            self.config.hook.pytest_privleak_result(config=self.config, nodeid=item.nodeid,
                                                    result=item.result)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.collected:
            return
        from .report.terminal import summary_lines

        terminalreporter.section("privleak results")
        for line in summary_lines(self.collected):
            terminalreporter.write_line(line)
