"""Inline SVG dot plots of gated figures: the baseline's per-seed figures beside this run's (issue 26).

One chart per figure name; a row per gated result, the baseline's seeds as
hollow grey dots above, this run's as filled dots below (red: a regression,
green: an improvement, blue: no change the gate can see), each side's mean as
a tick. A one-draw figure (k = 1) that moved beyond its tolerance is drawn
as one dot a side. Drawn by hand like :mod:`.svg`; every text is escaped.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from ...results import _fmt
from ..model import figure
from .svg import LABEL_W, RIGHT_PAD, WIDTH, short_label

ROW_H, TOP, BOTTOM = 34, 28, 30
OUTCOME_COLOURS = {"regression": "#cf222e", "improvement": "#1a7f37", "same": "#0969da"}


def seed_rows(comparison: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Rows by figure name: every figure over seeds, and each one-draw figure that moved beyond its tolerance."""
    rows: dict[str, list[dict[str, Any]]] = {}
    if not comparison:
        return rows
    for change in comparison.get("seeds", []):
        rows.setdefault(change["metric"], []).append(change)
    for outcome, changes in (("regression", comparison.get("regressions", [])),
                             ("improvement", comparison.get("improvements", []))):
        for change in changes:
            if change.get("before_seeds") is None:
                rows.setdefault(change["metric"], []).append(
                    {**change, "outcome": outcome, "before_seeds": [change["before"]],
                     "after_seeds": [change["after"]]})
    return rows


def _axis(rows: list[dict[str, Any]]) -> tuple[float, float]:
    values = [v for r in rows for v in (*map(figure, r["before_seeds"]), *map(figure, r["after_seeds"]))
              if v is not None and math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or max(abs(hi) * 0.05, 0.5)
    return lo - pad, hi + pad


def seed_chart(title: str, rows: list[dict[str, Any]]) -> str:
    """An ``<svg>`` dot plot of each row's baseline and run per-seed figures on one axis."""
    lo, hi = _axis(rows)
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    height = TOP + ROW_H * len(rows) + BOTTOM

    def x(v: float) -> float:
        v = min(max(v, lo), hi) if math.isfinite(v) else (hi if v > 0 else lo)
        return LABEL_W + plot_w * (v - lo) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" role="img" class="chart">',
             f"<title>{escape(title)}: baseline seeds (hollow) and this run's (filled)</title>",
             f'<text x="4" y="16" class="chart-title">{escape(title)}: baseline seeds (hollow, above) and this '
             "run's (filled, below)</text>"]
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H
        label = f"{row['nodeid'].rsplit('::', 1)[-1]}" + (f" [{row['label']}]" if row.get("label") else "")
        colour = OUTCOME_COLOURS.get(row.get("outcome", "same"), "#6e7781")
        tip = f"{row['key']}: {row.get('rule', 'tolerance')}" + (
            f", p = {row['p_value']:.3g}" if row.get("p_value") is not None else "")
        parts.append(f'<text x="{LABEL_W - 6}" y="{y + 21}" text-anchor="end"><title>{escape(tip)}</title>'
                     f"{escape(short_label(label))}</text>")
        for side, values, dy, fill in (("baseline", row["before_seeds"], 10, "none"),
                                       ("this run", row["after_seeds"], 24, colour)):
            figures = [figure(v) for v in values]
            stroke = "#57606a" if side == "baseline" else colour
            for v in figures:
                parts.append(f'<circle cx="{x(v):.1f}" cy="{y + dy}" r="4" fill="{fill}" stroke="{stroke}" '
                             f'stroke-width="1.5"><title>{escape(side)}: {escape(_fmt(v))}</title></circle>')
            finite = [v for v in figures if math.isfinite(v)]
            if finite:
                mean = math.fsum(finite) / len(finite)
                parts.append(f'<line x1="{x(mean):.1f}" x2="{x(mean):.1f}" y1="{y + dy - 7}" y2="{y + dy + 7}" '
                             f'stroke="{stroke}" stroke-width="2"><title>{escape(side)} mean: '
                             f"{escape(_fmt(mean))}</title></line>")
        shown = "p " + (f"{row['p_value']:.2g}" if row.get("p_value") is not None else "n/a")
        parts.append(f'<text x="{WIDTH - RIGHT_PAD + 6}" y="{y + 21}">{escape(shown)}</text>')
    axis_y = TOP + ROW_H * len(rows) + 4
    parts.append(f'<line x1="{LABEL_W}" x2="{LABEL_W + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#8c959f"/>')
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        tx = LABEL_W + plot_w * frac
        parts.append(f'<text x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle" class="tick">'
                     f"{escape(_fmt(lo + (hi - lo) * frac))}</text>")
    parts.append("</svg>")
    return "".join(parts)


def seed_charts_html(report: dict[str, Any]) -> str:
    """The report section drawing both sets of seeds for every gated figure ('' without a baseline or rows)."""
    rows = seed_rows(report.get("baseline"))
    if not rows:
        return ""
    charts = "".join(seed_chart(name, group) for name, group in rows.items())
    return ('<h2 id="seeds">Gated figures: baseline seeds against this run\'s</h2>'
            '<p class="legend">Each dot is one trained model\'s figure; ticks are means. Figures over k &gt;= 2 '
            "seeds are gated by a one-sided Welch t test (p at the right), one-draw figures by their tolerance.</p>"
            + charts)
