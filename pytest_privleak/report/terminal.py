"""The terminal summary: the results table, crashed workers, the baseline gate, where the report went."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..results import _fmt
from .model import failures_first, redaction_banner, shown_verdict, worker_name
from .printable import printable, printable_lines


def _interval_text(r) -> str:
    """``lo..hi``, or one figure when the interval is a point (an exact rank: ``13.288``, not ``13.288..13.288``)."""
    if not r.interval:
        return ""
    low, high = (_fmt(x) for x in r.interval)
    return low if low == high else f"{low}..{high}"


def result_rows(collected: Iterable) -> list[list[str]]:
    """One row per result, failures first (then inconclusive, expected leaks, measurements, passes)."""
    from ..results import is_expected

    rows = []
    for item in collected:
        r = item.result
        limit = "" if r.threshold is None else ("<= " if r.direction == "at_most" else ">= ") + _fmt(r.threshold)
        verdict = shown_verdict(item.outcome, {"verdict": r.verdict, "target": r.target,
                                               "expected": is_expected(r)})
        rows.append([verdict, printable(item.nodeid.split("::")[-1]), printable(r.name), printable(r.label),
                     _fmt(r.value), _interval_text(r), limit, _fmt(r.chance)])
    return sorted(rows, key=lambda row: failures_first(row[0]))


#: Columns that give up width when the table is wider than the terminal: the test, then the label.
SHRINKABLE = (1, 3)
MIN_WIDTH = 24


def fit_widths(widths: list[int], columns: int) -> list[int]:
    """Narrow the test and label columns (in that order, to ``MIN_WIDTH``) until a row fits ``columns``."""
    widths = list(widths)
    excess = sum(widths) + 2 * (len(widths) - 1) - columns
    for i in SHRINKABLE:
        if excess <= 0:
            break
        give = min(excess, max(0, widths[i] - MIN_WIDTH))
        widths[i] -= give
        excess -= give
    return widths


def _cut(cell: str, width: int) -> str:
    """``cell`` in ``width`` characters: a longer one keeps its start and end around an ellipsis."""
    if len(cell) <= width:
        return cell
    head = (width - 1) // 2
    return cell[:head] + "\u2026" + cell[len(cell) - (width - 1 - head):]


def summary_lines(collected: Iterable, columns: int | None = None) -> list[str]:
    """The results table, as wide as its cells or, given ``columns`` (the terminal's), no wider where it can."""
    header = ["verdict", "test", "metric", "canary/target", "value", "CI", "limit", "chance"]
    rows = [header] + result_rows(collected)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    if columns:
        widths = fit_widths(widths, columns)
    lines = ["  ".join(_cut(cell, w).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def report_lines(report: dict[str, Any], collected: list, written: dict[str, Path],
                 errors: list[str], columns: int | None = None) -> list[str]:
    """Everything the ``privleak results`` section prints, in order; the table fits ``columns`` where it can."""
    from .gate import gate_lines

    lines = summary_lines(collected, columns) if collected else ["no privacy results recorded"]
    if report["summary"].get("redacted"):
        lines.append(redaction_banner(report["summary"]["redacted"]))
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
