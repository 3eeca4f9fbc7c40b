"""The terminal summary table of all privacy results."""
from __future__ import annotations

from typing import Iterable

from ..results import _fmt


def result_rows(collected: Iterable) -> list[list[str]]:
    rows = []
    for item in collected:
        r = item.result
        interval = f"{_fmt(r.interval[0])}..{_fmt(r.interval[1])}" if r.interval else ""
        limit = "" if r.threshold is None else ("<= " if r.direction == "at_most" else ">= ") + _fmt(r.threshold)
        rows.append([r.verdict, item.nodeid.split("::")[-1], r.name, r.label[:40], _fmt(r.value), interval,
                     limit, _fmt(r.chance)])
    return rows


def summary_lines(collected: Iterable) -> list[str]:
    header = ["verdict", "test", "metric", "canary/target", "value", "CI", "limit", "chance"]
    rows = [header] + result_rows(collected)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
