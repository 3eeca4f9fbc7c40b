"""summary.md: the summary table in GitHub-flavoured Markdown (also for ``$GITHUB_STEP_SUMMARY``).

Every text that comes from data (test ids, canary text and labels, metric
names, worker errors, paths) is shown inside a code span, so nothing in it is
Markdown: links and images stay text, HTML tags stay text, ``*``/``_`` make no
emphasis, and GitHub's bare-URL and e-mail autolinks do not apply. A code span
is fenced with one more backtick than the longest run of backticks in the
text; inside the table, pipes are written ``\\|`` (GFM unescapes them within
code spans of a table cell). Backslash-escaping alone is not enough: GitHub
still autolinks ``a\\@b\\.com``. The gate lines go in a fenced block whose
fence is longer than any backtick run in them, so no text can close it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .charts.dp_comparison import dp_rows
from .gate import gate_lines
from .html import _interval, _limit, _num
from .model import EXPECTED_INCONCLUSIVE, EXPECTED_LEAK, failures_first, one_line, redaction_banner, shown_verdict

ICONS = {"FAIL": "\u274c FAIL", "pass": "\u2705 pass", "measured": "\u2139\ufe0f measured"}
_BACKTICKS = re.compile(r"`+")


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code(text: Any, *, in_table: bool = False) -> str:
    """``text`` as an inert inline code span (empty text gives an empty string)."""
    text = "" if text is None else " ".join(str(text).split("\n")).replace("\r", " ")
    if not text:
        return ""
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (_longest_backtick_run(text) + 1)
    # CommonMark strips one space from each end when both are there; pad so the text survives intact.
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: Any) -> str:
    return code(text, in_table=True)


def fenced(lines: list[str]) -> list[str]:
    """A fenced code block holding ``lines`` verbatim; its fence is longer than any backtick run in them."""
    fence = "`" * max(3, max((_longest_backtick_run(line) for line in lines), default=0) + 1)
    return [fence, *lines, fence]


def render_markdown(report: dict[str, Any], report_path: str | None = None) -> str:
    s = report["summary"]
    verdict = (f"**{s['failed']} of {s['results']} result(s) leak beyond their limit**" if s["failed"]
               else f"no result exceeds its limit ({s['results']} result(s))")
    if s.get("expected_leaks"):
        verdict += f"; {s['expected_leaks']} expected leak(s) (xfail or expect_leak)"
    if s.get("inconclusive"):
        verdict += f"; **{s['inconclusive']} inconclusive** (cut short by their budget: not a pass)"
    lines = [f"## pytest-privleak: {verdict}", ""]
    if s.get("redacted"):
        lines += [code(redaction_banner(s["redacted"])), ""]
    lines += ["| verdict | test | metric | canary / target | value | interval | limit | chance |",
              "|---|---|---|---|---:|---:|---:|---:|"]
    rows = []
    for test in report["tests"]:
        for r in test["results"]:
            shown = shown_verdict(test["outcome"], r)
            icon = ICONS.get(shown) or (shown if shown in (EXPECTED_LEAK, EXPECTED_INCONCLUSIVE) else _cell(shown))
            rows.append((failures_first(shown), "| " + " | ".join((
                icon, _cell(test["nodeid"]), _cell(r["name"]), _cell(r.get("label")),
                _num(r["value"]), _interval(r), _limit(r), _num(r.get("chance")))) + " |"))
        if not test["results"]:
            rows.append((failures_first(test["outcome"]),
                         f"| {_cell(test['outcome'])} | {_cell(test['nodeid'])} | | no result recorded | | | | |"))
    lines += [row for _, row in sorted(rows, key=lambda row: row[0])]   # failures first (stable within a rank)
    remedies = [(test, r) for test in report["tests"] for r in test["results"]
                if shown_verdict(test["outcome"], r) in ("FAIL", EXPECTED_LEAK) and r.get("remedy")]
    if remedies:   # what to do about each leak, right under the table (issue 34 item 3)
        lines += ["", "**What to do:**", ""]
        lines += [f"- {code(test['nodeid'])} {code(r.get('label') or r['name'])}: {code(one_line(r['remedy']))}"
                  for test, r in remedies]
    lines += _dp_lines(report)
    for w in report["run"]["workers"]:
        if w["status"] == "crashed":
            lines += ["", f"> **worker {code(w['id'])}{_on_host(w)} crashed**"
                      + (f" while running {code(w['crashed_test'])}" if w.get("crashed_test") else "")
                      + f": {code(w.get('error'))}"]
    if report.get("baseline") is not None:
        lines += ["", *fenced(gate_lines(report["baseline"]))]
    if report_path:
        lines += ["", f"Full report: {code(report_path)}"]
    return "\n".join(lines) + "\n"


def _dp_lines(report: dict[str, Any]) -> list[str]:
    """Figures measured with and without DP-SGD side by side (:mod:`.dp_comparison`); none without a pair."""
    rows = dp_rows(report)
    if not rows:
        return []
    lines = ["", "### With and without DP-SGD", "",
             "| metric | canary / target | without DP | with DP | ratio | ε | spent ε |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| " + " | ".join((_cell(r["name"]), _cell(r["label"]), _num(r["without"]), _num(r["with_dp"]),
                                         _num(r["ratio"]), _num(r["epsilon"]), _num(r["epsilon_spent"]))) + " |")
    return lines


def append_step_summary(markdown: str, environ=None) -> Path | None:
    """Append to the file named by ``$GITHUB_STEP_SUMMARY`` (GitHub Actions), if set."""
    target = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown)
    return Path(target)


def _on_host(worker: dict[str, Any]) -> str:
    """`` on host `h2` `` for a worker on another host (as its ``--tx`` spec names it), else nothing."""
    from ..distribute.placement import LOCAL

    host = worker.get("host")
    return f" on host {code(host)}" if host and host != LOCAL else ""
