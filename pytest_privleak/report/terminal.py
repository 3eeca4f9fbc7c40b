"""The terminal summary: the results table, crashed workers, the baseline gate, where the report went."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..results import _fmt
from .model import shown_verdict, worker_name
from .printable import printable, printable_lines


def result_rows(collected: Iterable) -> list[list[str]]:
    rows = []
    for item in collected:
        r = item.result
        interval = f"{_fmt(r.interval[0])}..{_fmt(r.interval[1])}" if r.interval else ""
        limit = "" if r.threshold is None else ("<= " if r.direction == "at_most" else ">= ") + _fmt(r.threshold)
        verdict = shown_verdict(item.outcome, {"verdict": r.verdict})
        rows.append([verdict, printable(item.nodeid.split("::")[-1]), printable(r.name), printable(r.label)[:40],
                     _fmt(r.value), interval, limit, _fmt(r.chance)])
    return rows


def summary_lines(collected: Iterable) -> list[str]:
    header = ["verdict", "test", "metric", "canary/target", "value", "CI", "limit", "chance"]
    rows = [header] + result_rows(collected)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def report_lines(report: dict[str, Any], collected: list, written: dict[str, Path],
                 errors: list[str]) -> list[str]:
    """Everything the ``privleak results`` section prints, in order."""
    from .gate import gate_lines

    lines = summary_lines(collected) if collected else ["no privacy results recorded"]
    for w in report["run"]["workers"]:
        if w["status"] == "crashed":
            where = f" while running {w['crashed_test']}" if w.get("crashed_test") else ""
            lines.append(f"worker {worker_name(w)} crashed{where} ({w.get('error')}); its later results are missing")
    if report.get("baseline") is not None:
        lines += gate_lines(report["baseline"])
    if "html" in written:
        lines.append(f"privleak report: {written['html']} (also {written['json'].name}, {written['markdown'].name})")
    if "baseline" in written:
        lines.append(f"privleak baseline saved: {written['baseline']}")
    return [printable_lines(line) for line in lines + errors]  # gate lines quote labels and test ids too
