"""Writes the report folder (report.json, index.html, summary.md), each file atomically."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from .html import render_html
from .json_writer import write_json
from .markdown import append_step_summary, render_markdown
from .printable import printable_tree

REPORT_FILES = {"json": "report.json", "html": "index.html", "markdown": "summary.md"}


def write_report(report: dict[str, Any], folder: str | Path) -> dict[str, Path]:
    """Write the three files into ``folder``; append the Markdown to ``$GITHUB_STEP_SUMMARY`` when set."""
    folder = Path(folder)
    paths = {kind: folder / name for kind, name in REPORT_FILES.items()}
    write_json(report, paths["json"])
    shown = printable_tree(report)  # labels with NUL, ESC or a lone surrogate: escaped, never a partial report
    write_text_atomic(paths["html"], render_html(shown))
    markdown = render_markdown(shown, str(paths["html"]))
    write_text_atomic(paths["markdown"], markdown)
    summary = append_step_summary(markdown)
    if summary is not None:
        paths["step_summary"] = summary
    return paths


def write_baseline(report: dict[str, Any], path: str | Path) -> Path:
    """A baseline is a report.json; the comparison part of this run is not carried over."""
    return write_json({**report, "baseline": None}, path)
