"""The terminal table read at a glance (issue 24 item 4): failures first, exact figures once, fits the screen;
an inconclusive result is never shown as a pass (issue 23 item 4)."""
from __future__ import annotations

from dataclasses import dataclass

from pytest_privleak.report.model import INCONCLUSIVE, build_report, shown_verdict
from pytest_privleak.report.terminal import fit_widths, summary_lines
from pytest_privleak.results import LeakResult


@dataclass
class Item:
    nodeid: str
    outcome: str
    result: LeakResult


def leak(value, label, *, interval=None, target=None):
    return LeakResult(attack="exposure", metric="exposure_bits", value=value, threshold=6.0, direction="at_most",
                      interval=interval, chance=1.44, label=label, target=target or {})


def test_failures_come_first_and_a_point_interval_prints_once():
    items = [Item("t.py::test_ok", "passed", leak(0.5, "never said", interval=(0.5, 0.5))),
             Item("t.py::test_leaks", "failed", leak(13.288, "said 100 times", interval=(13.288, 13.288))),
             Item("t.py::test_short", "passed", leak(2.0, "budget spent", interval=(1.0, 3.0),
                                                      target={"inconclusive": True}))]
    lines = summary_lines(items)
    verdicts = [line.split()[0] for line in lines[2:]]
    assert verdicts == ["FAIL", INCONCLUSIVE, "pass"]
    assert "13.288  " in lines[2] and "13.288..13.288" not in lines[2]
    assert "1.000..3.000" in lines[3]


def test_a_wide_table_gives_up_test_and_label_width_to_fit_the_terminal():
    long = "test_" + "a_very_long_descriptive_name_" * 4
    items = [Item(f"t.py::{long}", "failed", leak(9.0, "my pin code is " + "9 " * 30, interval=(8.0, 10.0)))]
    wide = summary_lines(items)
    assert max(len(line) for line in wide) > 150
    narrow = summary_lines(items, columns=130)
    assert max(len(line) for line in narrow) <= 130
    assert "exposure.exposure_bits" in narrow[2]          # the metric is never cut
    assert "\u2026" in narrow[2]                           # cut cells keep their start and end


def test_fit_widths_stops_at_the_floor_and_leaves_other_columns_alone():
    assert fit_widths([8, 100, 20, 100, 5, 10, 8, 6], 80) == [8, 24, 20, 24, 5, 10, 8, 6]
    assert fit_widths([8, 10, 20, 10, 5, 10, 8, 6], 200) == [8, 10, 20, 10, 5, 10, 8, 6]


def test_an_inconclusive_result_is_not_counted_as_passed_and_shows_as_such():
    cut = {"verdict": "pass", "target": {"inconclusive": True}}
    allowed = {"verdict": "pass", "target": {"inconclusive": True, "inconclusive_allowed": True}}
    assert shown_verdict("passed", cut) == INCONCLUSIVE
    assert shown_verdict("passed", {**cut, "expected": True}) == "expected inconclusive"
    assert shown_verdict("passed", allowed) == "pass"
    test = {"nodeid": "t.py::t", "outcome": "failed", "results": [
        {**leak(2.0, "x").__dict__, "verdict": "pass", "target": {"inconclusive": True}, "key": "k"}]}
    summary = build_report([test], [], seed=0, xdist=False)["summary"]
    assert (summary["passed"], summary["inconclusive"]) == (0, 1)
