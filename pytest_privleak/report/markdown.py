"""summary.md: the summary table in GitHub-flavoured Markdown (also for ``$GITHUB_STEP_SUMMARY``).

Cells are HTML-escaped and pipes are backslash-escaped, because GitHub renders
HTML inside Markdown and a canary text must not break the table or the page.
"""
from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from ..baseline import gate_lines
from .html import _interval, _limit, _num
from .model import shown_verdict

ICONS = {"FAIL": "\u274c FAIL", "pass": "\u2705 pass", "measured": "\u2139\ufe0f measured"}


def _cell(text: Any) -> str:
    return escape("" if text is None else str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any], report_path: str | None = None) -> str:
    s = report["summary"]
    verdict = (f"**{s['failed']} of {s['results']} result(s) leak beyond their limit**" if s["failed"]
               else f"no result exceeds its limit ({s['results']} result(s))")
    if s.get("expected_leaks"):
        verdict += f"; {s['expected_leaks']} expected leak(s) (xfail)"
    lines = [f"## pytest-privleak: {verdict}", ""]
    lines += ["| verdict | test | metric | canary / target | value | interval | limit | chance |",
              "|---|---|---|---|---:|---:|---:|---:|"]
    for test in report["tests"]:
        for r in test["results"]:
            shown = shown_verdict(test["outcome"], r)
            lines.append("| " + " | ".join(_cell(c) for c in (
                ICONS.get(shown, shown), test["nodeid"], r["name"], r.get("label"),
                _num(r["value"]), _interval(r), _limit(r), _num(r.get("chance")))) + " |")
        if not test["results"]:
            lines.append(f"| {_cell(test['outcome'])} | {_cell(test['nodeid'])} | | no result recorded | | | | |")
    for w in report["run"]["workers"]:
        if w["status"] == "crashed":
            lines += ["", f"> **worker {_cell(w['id'])} crashed**"
                      + (f" while running `{_cell(w['crashed_test'])}`" if w.get("crashed_test") else "")
                      + f": {_cell(w.get('error'))}"]
    if report.get("baseline") is not None:
        # Backticks from labels would close the fence early.
        lines += ["", "```", *(line.replace("`", "'") for line in gate_lines(report["baseline"])), "```"]
    if report_path:
        lines += ["", f"Full report: `{_cell(report_path)}`"]
    return "\n".join(lines) + "\n"


def append_step_summary(markdown: str, environ=None) -> Path | None:
    """Append to the file named by ``$GITHUB_STEP_SUMMARY`` (GitHub Actions), if set."""
    target = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown)
    return Path(target)
