"""Inline SVG ROC curves on log-log axes for membership results (issue 18 item 4).

Carlini et al. 2022 ("Membership inference attacks from first principles",
§IV) argue that a membership attack is judged at low false-positive rates,
which a linear ROC hides; so the curves are drawn with both axes in log10,
from FPR 1e-4 (or the run's resolution ``1 / n0`` where that is coarser) to
1, with chance (TPR = FPR) as the dashed diagonal. Each result that carries
a ``curve`` (``{"fpr": [...], "tpr": [...]}``) is one line, coloured and
named in the legend; a zero rate is drawn at the axis floor. Drawn by hand
like :mod:`.svg`; every text is escaped.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from ..model import is_expected_leak
from .svg import short_label

SIZE, LEFT, TOP, BOTTOM, LEGEND_W = 360, 56, 30, 44, 330
FLOOR = 1e-4
#: The highest the axes' lower end goes: one decade at least.
MAX_FLOOR = 0.1
PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989", "#57606a")
PER_CHART = len(PALETTE)


def curves(report: dict[str, Any]) -> list[dict[str, Any]]:
    """``{label, nodeid, fpr, tpr, failed}`` of every result with a ROC curve, failures first."""
    found = []
    for test in report.get("tests", []):
        for r in test.get("results", []):
            curve = r.get("curve") or {}
            fpr, tpr = curve.get("fpr") or [], curve.get("tpr") or []
            if len(fpr) < 2 or len(fpr) != len(tpr):
                continue
            failed = r.get("verdict") == "FAIL" and not is_expected_leak(test.get("outcome", ""), r)
            found.append({"label": r.get("label") or test["nodeid"].rsplit("::", 1)[-1], "nodeid": test["nodeid"],
                          "fpr": [float(v) for v in fpr], "tpr": [float(v) for v in tpr], "failed": failed})
    return sorted(found, key=lambda c: not c["failed"])


def _floor(rows: list[dict[str, Any]]) -> float:
    """The axes' lower end: 1e-4, or the coarsest first non-zero FPR when the runs cannot resolve 1e-4, at most
    0.1 so that the axes span a decade (a perfect attack's only non-zero FPR is 1: a zero span crashed the
    report, held-out probe, session 7)."""
    smallest = [min((v for v in c["fpr"] if v > 0), default=1.0) for c in rows]
    return min(MAX_FLOOR, max(FLOOR, min(smallest))) if smallest else FLOOR


def roc_chart(rows: list[dict[str, Any]], title: str = "Membership ROC (log-log)") -> str:
    """One ``<svg>`` with a log-log ROC line per row and the chance diagonal."""
    floor = _floor(rows)
    decades = -math.log10(floor)
    plot = SIZE - LEFT - 16
    height = TOP + plot + BOTTOM
    width = SIZE + LEGEND_W

    def pos(v: float) -> float:
        return (math.log10(max(v, floor)) + decades) / decades * plot

    def xy(f: float, t: float) -> str:
        return f"{LEFT + pos(f):.1f},{TOP + plot - pos(t):.1f}"

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" class="chart">',
             f"<title>{escape(title)}: TPR against FPR, both on log axes; dashed: chance</title>",
             f'<text x="4" y="16" class="chart-title">{escape(title)} (up and to the left leaks more)</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot}" height="{plot}" fill="none" stroke="#8c959f"/>',
             f'<polyline points="{xy(floor, floor)} {xy(1, 1)}" fill="none" stroke="#57606a" stroke-width="1.5" '
             'stroke-dasharray="4 3"><title>chance: TPR = FPR</title></polyline>']
    for d in range(int(math.ceil(decades)) + 1):
        v = 10.0 ** -d
        if v < floor * (1 - 1e-9):
            continue
        p = pos(v)
        text = f"{v:g}"
        parts.append(f'<text x="{LEFT + p:.1f}" y="{TOP + plot + 16}" text-anchor="middle" class="tick">{text}</text>'
                     f'<text x="{LEFT - 6}" y="{TOP + plot - p + 4:.1f}" text-anchor="end" class="tick">{text}</text>')
    parts.append(f'<text x="{LEFT + plot / 2:.1f}" y="{height - 8}" text-anchor="middle">false-positive rate</text>'
                 f'<text x="12" y="{TOP + plot / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {TOP + plot / 2:.1f})">true-positive rate</text>')
    for i, c in enumerate(rows):
        colour = PALETTE[i % len(PALETTE)]
        points = " ".join(xy(f, t) for f, t in zip(c["fpr"], c["tpr"]))
        name = short_label(c["label"])
        verdict = " (FAIL)" if c["failed"] else ""
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2">'
                     f"<title>{escape(c['nodeid'])}{verdict}</title></polyline>")
        y = TOP + 14 + 18 * i
        parts.append(f'<line x1="{SIZE + 4}" x2="{SIZE + 24}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" '
                     f'stroke-width="3"/><text x="{SIZE + 30}" y="{y}"><title>{escape(c["nodeid"])}</title>'
                     f"{escape(name + verdict)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def roc_charts_html(report: dict[str, Any]) -> str:
    """The report section with every membership ROC curve ('' when no result carries one)."""
    rows = curves(report)
    if not rows:
        return ""
    charts = "".join(roc_chart(rows[i:i + PER_CHART]) for i in range(0, len(rows), PER_CHART))
    return ('<h2 id="roc">Membership inference: ROC curves</h2><p class="legend">Both axes are logarithmic, so the '
            "low false-positive rates where membership attacks matter are visible (Carlini et al. 2022); the dashed "
            "diagonal is chance. A rate of 0 is drawn at the axis floor.</p>" + charts)
