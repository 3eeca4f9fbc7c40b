"""Inline SVG bar charts for the HTML report, drawn by hand (no plotting library, no network).

One chart per figure (``cea.accuracy``, ``exposure.exposure``, ``ldp.epsilon_lcb``,
an extra such as ``cea.hdt``): a bar per result with its confidence interval as a
whisker, and reference marks: chance (dashed grey), threshold/claim (red), ceiling (black).
Every text is escaped with :func:`html.escape`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from ...results import _fmt

#: Bar colours: a leak red, a pass green, a bare measurement blue, a declared (expected) leak amber, the
#: colour of the report's "expected leak" badge, so it never reads as a real failure.
EXPECTED = "expected leak"
VERDICT_COLOURS = {"FAIL": "#cf222e", "pass": "#1a7f37", "measured": "#0969da", EXPECTED: "#bf8700"}
MARK_STYLES = {
    "chance": 'stroke="#57606a" stroke-width="2" stroke-dasharray="4 3"',
    "threshold": 'stroke="#cf222e" stroke-width="3"',
    "ceiling": 'stroke="#24292f" stroke-width="3"',
}
WIDTH, LABEL_W, RIGHT_PAD, ROW_H, TOP, BOTTOM = 900, 330, 70, 24, 28, 30
#: Characters of a bar's label that fit left of the plot (12 px text in ``LABEL_W``).
LABEL_CHARS = 48


@dataclass
class Bar:
    label: str
    value: float
    verdict: str = "measured"
    interval: tuple[float, float] | None = None
    marks: dict[str, float] = field(default_factory=dict)
    tooltip: str = ""          # shown on hover: the test id behind a ``name=`` label


def sig3(x: float | None) -> str:
    """A figure to 3 significant digits for the eye (the full value goes in a tooltip beside it)."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return "\u221e" if x > 0 else ("-\u221e" if x < 0 else "NaN")
    if x == 0:
        return "0"
    ax = abs(x)
    if ax < 1e-3 or ax >= 1e5:
        return f"{x:.2e}"
    digits = max(0, 2 - int(math.floor(math.log10(ax))))
    return f"{x:.{digits}f}"


def nice_axis(top: float, ticks: int = 4) -> tuple[float, float]:
    """``(axis end, tick step)``: the smallest step of 1, 2, 2.5 or 5 x 10^k whose ``ticks`` steps reach ``top``."""
    if not top > 0 or not math.isfinite(top):
        return 1.0, 1.0 / ticks
    magnitude = 10.0 ** math.floor(math.log10(top / ticks))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = m * magnitude
        if step * ticks >= top * (1 - 1e-12):
            return step * ticks, step
    return 10.0 * magnitude * ticks, 10.0 * magnitude


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def scale_max(bars: list[Bar]) -> float:
    """Right end of the axis: the figure's own range where it has one, else a round number.

    A figure with a ceiling (a rate's 1, an exposure's ``log2 |R|``) ends at the largest of its ceilings,
    figures and marks, exactly: a 0-1 figure ends at 1 and a 13.3-bit exposure at 13.3, not at the next
    round number (issue 34: they ran to 2 and 20). Without a ceiling the largest figure or mark, padded by
    5 %, goes up to a round number.
    """
    candidates, ceilings = [], []
    for bar in bars:
        candidates += _finite([bar.value, *(bar.interval or ()), *bar.marks.values()])
        ceilings += _finite([bar.marks.get("ceiling")])
    top = max(candidates, default=1.0)
    if ceilings and top > 0:
        return top
    return nice_axis(top * 1.05 if top > 0 else 1.0)[0]


def axis_ticks(top: float) -> list[float]:
    """Round ticks up to ``top``, and ``top`` itself when it is not one and stands clear of the last."""
    step = nice_axis(top)[1]
    ticks = [k * step for k in range(int(math.floor(top / step * (1 + 1e-9))) + 1)]
    if top - ticks[-1] > 0.3 * step:
        ticks.append(top)
    return ticks


#: Where a long label may break: after a test path's ``::``, a ``/``, a space, ``_`` or ``-`` (never inside a word).
_BREAKS = ("::", "/", " ", "_", "-")


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` in ``limit`` characters, shortened after a ``::``, ``/``, space, ``_`` or ``-``, never inside a word.

    The end is kept (test names and labels differ at their ends): ``…test_pin_said_once``. Only a single
    word longer than ``limit`` is cut, keeping its end.
    """
    if len(text) <= limit:
        return text
    cut = None
    for i in range(len(text) - limit + 1, len(text)):
        if any(text.startswith(mark, i - len(mark)) for mark in _BREAKS):
            cut = i
            break
    if cut is None:
        return "\u2026" + text[-(limit - 1):]
    return "\u2026" + text[cut:].lstrip()


#: What the title says of each direction: the side of the axis where leakage lies.
WORSE = {"higher": " (higher is worse \u2192)", "lower": " (\u2190 lower is worse)"}


def bar_chart(title: str, bars: list[Bar], worse: str | None = None) -> str:
    """An ``<svg>`` element (string) plotting ``bars`` on one linear axis starting at 0.

    ``worse`` (``"higher"`` or ``"lower"``): the direction of more leakage, said in the title.
    """
    top_value = scale_max(bars)
    title = title + WORSE.get(worse or "", "")
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    height = TOP + ROW_H * len(bars) + BOTTOM

    def x(v: float) -> float:
        v = 0.0 if v is None or math.isnan(v) else min(max(v, 0.0), top_value)
        return LABEL_W + plot_w * v / top_value

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" role="img" class="chart">',
             f"<title>{escape(title)}</title>",
             f'<text x="4" y="16" class="chart-title">{escape(title)}</text>']
    for i, bar in enumerate(bars):
        y = TOP + i * ROW_H
        colour = VERDICT_COLOURS.get(bar.verdict, "#6e7781")
        label = short_label(bar.label)
        hover = f"{bar.label} ({bar.tooltip})" if bar.tooltip else bar.label
        parts.append(f'<text x="{LABEL_W - 6}" y="{y + 16}" text-anchor="end"><title>{escape(hover)}</title>'
                     f'{escape(label)}</text>')
        parts.append(f'<rect x="{LABEL_W}" y="{y + 4}" width="{x(bar.value) - LABEL_W:.1f}" height="{ROW_H - 8}" '
                     f'fill="{colour}" fill-opacity="0.75"><title>{escape(hover)}: '
                     f'{escape(repr(bar.value))}</title></rect>')
        if bar.interval:
            lo, hi = x(bar.interval[0]), x(bar.interval[1])
            mid = y + ROW_H / 2
            parts.append(f'<path d="M{lo:.1f} {mid} H{hi:.1f} M{lo:.1f} {mid - 5} V{mid + 5} M{hi:.1f} {mid - 5} '
                         f'V{mid + 5}" stroke="#24292f" stroke-width="1.5" fill="none"/>')
        for kind, value in bar.marks.items():
            if value is None or not math.isfinite(value):
                continue
            style = MARK_STYLES.get(kind, MARK_STYLES["threshold"])
            parts.append(f'<line x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{y + 1}" y2="{y + ROW_H - 1}" '
                         f'{style}><title>{escape(kind)}: {escape(_fmt(value))}</title></line>')
        parts.append(f'<text x="{WIDTH - RIGHT_PAD + 6}" y="{y + 16}"><title>{escape(repr(bar.value))}</title>'
                     f'{escape(sig3(bar.value))}</text>')
    axis_y = TOP + ROW_H * len(bars) + 4
    parts.append(f'<line x1="{LABEL_W}" x2="{LABEL_W + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#8c959f"/>')
    step = nice_axis(top_value)[1]
    for tick in axis_ticks(top_value):   # round ticks 0, step, 2 step, ..., and the axis end (a ceiling)
        tx = LABEL_W + plot_w * tick / top_value
        text = f"{tick:g}" if abs(tick / step - round(tick / step)) < 1e-9 else sig3(tick)
        parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="#8c959f"/>')
        parts.append(f'<text x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle" class="tick">'
                     f"{escape(text)}</text>")
    parts.append("</svg>")
    return "".join(parts)
