"""index.html: one self-contained page (inline CSS and SVG, no script, no network).

A banner says whether anything leaks, a colour-coded summary table lists every
result (failures first), charts show each figure against chance, threshold and
ceiling, and a details block per result carries the evidence and the remedy.
Every string that comes from data, models or test names goes through
:func:`html.escape`; a Content-Security-Policy forbids scripts and remote
loads as a second line of defence.
"""
from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from ..results import _fmt
from .charts.dp_comparison import dp_section_html
from .model import (EXPECTED_INCONCLUSIVE, EXPECTED_LEAK, INCONCLUSIVE, failures_first, figure,
                    is_expected_leak, one_line, redaction_banner, shown_verdict, worker_name)
from .charts.roc import roc_charts_html
from .charts.seeds import seed_charts_html
from .charts.svg import LABEL_CHARS, Bar, bar_chart, short_label, sig3

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#24292f;margin:24px;max-width:1200px}
h1{font-size:22px;margin:0 0 8px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
table.summary td:nth-child(2),table.summary td:nth-child(4){overflow-wrap:break-word;max-width:24em}
table.summary td:nth-child(3){overflow-wrap:break-word}
tr.remedy td{border-top:none;font-size:13px} tr.remedy-FAIL td{background:#fff5f5;color:#82071e}
tr.remedy-xfail td{color:#4d2d00} tr.row-FAIL td,tr.row-xfail td{border-bottom:none}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}
.banner.leak{background:#ffebe9;border:1px solid #cf222e;color:#82071e}
.banner.ok{background:#dafbe1;border:1px solid #1a7f37;color:#044f1e}
.banner.warn{background:#fff8c5;border:1px solid #9a6700;color:#4d2d00}
.banner.note{background:#ddf4ff;border:1px solid #0969da;color:#0a3069;font-weight:400}
table{border-collapse:collapse;width:100%} th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;
vertical-align:top} th{background:#f6f8fa} td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;font-size:12px}
.FAIL{background:#cf222e}.pass{background:#1a7f37}.measured{background:#0969da}
.error,.crashed{background:#9a6700}.xfail{background:#bf8700}
tr.row-FAIL td{background:#fff5f5} .meta{color:#57606a} code,pre{font-family:ui-monospace,monospace;font-size:12px}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-break:break-all}
details{margin:6px 0;border:1px solid #d0d7de;border-radius:6px;padding:6px 10px}
summary{cursor:pointer} .chart{display:block;margin:8px 0} .chart text{font-size:12px;fill:#24292f}
.chart .chart-title{font-weight:600;font-size:13px} .legend{color:#57606a;font-size:12px}
"""
MARK_NAMES = {"chance": "chance", "threshold": "threshold / claim", "ceiling": "ceiling"}


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    """A figure to 3 significant digits (the details and the charts' tooltips keep the exact value)."""
    x = figure(value) if not isinstance(value, (int, float)) else float(value)
    return "" if x is None else sig3(x)


def _fact(value: Any) -> str:
    """A detail cell: numbers to 3 significant digits with the exact value on hover, the rest as JSON or text."""
    if isinstance(value, float):
        return f'<span title="{_e(repr(value))}">{_e(sig3(value))}</span>'
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, float) for v in value):
        return f'<span title="{_e(json.dumps(list(value)))}">{_e(" .. ".join(sig3(v) for v in value))}</span>'
    if isinstance(value, dict):
        shown = {k: (float(sig3(v)) if isinstance(v, float) and math.isfinite(v) else v) for k, v in value.items()}
        return f'<span title="{_e(json.dumps(value))}">{_e(json.dumps(shown))}</span>'
    return _e(json.dumps(value) if isinstance(value, list) else value)


def _beside(r: dict[str, Any]) -> str:
    """What a CEA accuracy hides (issue 24 item 4): the truth's best exact rank and the HDT, under the figure."""
    extra = r.get("extra") or {}
    shown = []
    if "best_rank_of_truth" in extra:
        shown.append(f"rank {int(figure(extra['best_rank_of_truth'])):,}")
    if "hdt" in extra and "hdt_chance" in extra:
        shown.append(f"HDT {sig3(figure(extra['hdt']))} (chance {sig3(figure(extra['hdt_chance']))})")
    return f'<br><span class="meta">{_e(", ".join(shown))}</span>' if shown else ""


def _breakable(text: Any) -> str:
    """``text`` escaped, with a break opportunity after each ``::``, ``/``, ``[`` and ``_``: a long test id
    wraps between its parts and the words of its name, never inside a word (issue 34)."""
    escaped = _e(text)
    for mark in ("::", "/", "[", "_"):
        escaped = escaped.replace(mark, mark + "<wbr>")
    return escaped


def _interval(r: dict[str, Any]) -> str:
    if not r.get("interval"):
        return ""
    lo, hi = r["interval"]
    conf = figure(r.get("confidence"))
    return (f"{conf:.0%} " if conf else "") + f"{_num(lo)} .. {_num(hi)}"


def _limit(r: dict[str, Any]) -> str:
    if r.get("threshold") is None:
        return ""
    return ("\u2264 " if r["direction"] == "at_most" else "\u2265 ") + _num(r["threshold"])


def _changes(report: dict[str, Any]) -> dict[str, tuple[str, dict]]:
    base = report.get("baseline") or {}
    found = {c["key"]: ("regression", c) for c in base.get("regressions", [])}
    found.update({c["key"]: ("improved", c) for c in base.get("improvements", [])})
    return found


def _delta(key: str, changes: dict, new: set) -> str:
    if key in new:
        return '<span class="meta">new</span>'
    if key not in changes:
        return ""
    kind, c = changes[key]
    before, after = figure(c["before"]), figure(c["after"])
    text = f"{_fmt(before)} \u2192 {_fmt(after)} (tol {_fmt(figure(c['tolerance']))})"
    badge = "FAIL" if kind == "regression" else "pass"
    return f'<span class="badge {badge}">{_e(kind)}</span> {_e(text)}'


FAIL = "FAIL"


def _rows(report: dict[str, Any]) -> list[tuple[dict, dict | None]]:
    rows = [(t, r) for t in report["tests"] for r in t["results"]]
    rows += [(t, None) for t in report["tests"] if not t["results"]]
    return sorted(rows, key=lambda tr: failures_first(shown_verdict(tr[0]["outcome"], tr[1]) if tr[1]
                                                      else tr[0]["outcome"]))


def _css(outcome: str, r: dict) -> str:
    """Badge / row class of a result: ``xfail`` for an expected leak, else its verdict."""
    if is_expected_leak(outcome, r):
        return "xfail"
    shown = shown_verdict(outcome, r)
    return "xfail" if shown == EXPECTED_INCONCLUSIVE else "FAIL" if shown == INCONCLUSIVE else _e(r["verdict"])


def _summary_table(report: dict[str, Any]) -> str:
    changes = _changes(report)
    new = set((report.get("baseline") or {}).get("new", []))
    head = ("<tr><th>verdict</th><th>test</th><th>metric</th><th>canary / target</th><th>value</th>"
            "<th>interval</th><th>limit</th><th>chance</th><th>ceiling</th><th>vs baseline</th></tr>")
    body = []
    for test, r in _rows(report):
        if r is None:
            outcome = test["outcome"]
            body.append(f'<tr class="row-{_e(outcome)}"><td><span class="badge {_e(outcome)}">{_e(outcome)}'
                        f'</span></td><td>{_breakable(test["nodeid"])}</td><td colspan="8" class="meta">no result '
                        f"recorded</td></tr>")
            continue
        verdict, css = shown_verdict(test["outcome"], r), _css(test["outcome"], r)
        body.append(
            f'<tr class="row-{css}"><td><span class="badge {css}">{_e(verdict)}</span></td>'
            f'<td>{_breakable(test["nodeid"])}</td><td>{_e(r["name"])}</td><td>{_e(r.get("label"))}</td>'
            f'<td class="num">{_e(_num(r["value"]))}{_beside(r)}</td><td class="num">{_e(_interval(r))}</td>'
            f'<td class="num">{_e(_limit(r))}</td><td class="num">{_e(_num(r.get("chance")))}</td>'
            f'<td class="num">{_e(_num(r.get("ceiling")))}</td><td>{_delta(r["key"], changes, new)}</td></tr>')
        if verdict in (FAIL, EXPECTED_LEAK) and r.get("remedy"):   # what to do, where a leak is read (issue 34)
            body.append(f'<tr class="remedy remedy-{css}"><td></td><td colspan="9" title="{_e(r["remedy"])}">'
                        f'<b>Remedy:</b> {_e(one_line(r["remedy"]))}</td></tr>')
    return f'<table class="summary">{head}{"".join(body)}</table>'


#: Extra figures for which less is worse (they shrink as the attack gets closer to the secret).
LOWER_IS_WORSE_EXTRAS = frozenset({"hdt"})


#: Extra figures that are shares (their range is 0 to 1, so their chart ends at 1).
SHARE_EXTRAS = frozenset({"hdt"})


def chart_groups(report: dict[str, Any]) -> dict[str, list[Bar]]:
    """Bars grouped by figure name; extras (e.g. ``hdt``) with ``<name>_chance`` get their own chart.

    A bar is labelled by the result's label (its ``name=``, else the canary or target), with the test
    id in its tooltip (issue 24 item 4); bars of one chart whose labels are equal are told apart by their
    test (issue 34). A declared leak (xfail, ``expect_leak``) is drawn in the amber of its badge, not in
    the red of a real failure.
    """
    groups: dict[str, list[Bar]] = {}
    for test in report["tests"]:
        for r in test["results"]:
            label = r.get("label") or test["nodeid"].split("::")[-1]
            verdict = EXPECTED_LEAK if is_expected_leak(test["outcome"], r) else r["verdict"]
            value = figure(r["value"])
            interval = tuple(figure(v) for v in r["interval"]) if r.get("interval") else None
            marks = {"chance": figure(r.get("chance")), "threshold": figure(r.get("threshold")),
                     "ceiling": figure(r.get("ceiling"))}
            groups.setdefault(r["name"], []).append(
                Bar(label, value, verdict, interval, {k: v for k, v in marks.items() if v is not None},
                    tooltip=test["nodeid"]))
            extra = r.get("extra") or {}
            for key, raw in extra.items():
                if key.endswith("_chance") or f"{key}_chance" not in extra:
                    continue  # only figures with a chance baseline earn a chart; the rest are in the details
                marks = {"chance": figure(extra.get(f"{key}_chance")),
                         "ceiling": 1.0 if key in SHARE_EXTRAS else None}
                groups.setdefault(f"{r['attack']}.{key}", []).append(
                    Bar(label, figure(raw), "measured", None, {k: v for k, v in marks.items() if v is not None},
                        tooltip=test["nodeid"]))
    for bars in groups.values():
        _tell_apart(bars)
    return groups


def _tell_apart(bars: list[Bar]) -> None:
    """Bars with the same label get their test's name in front (``test_a: pin``), or the whole test id when
    the test names are equal too (two files' tests of one name)."""
    original = [bar.label for bar in bars]
    for whole in (False, True):
        labels = [bar.label for bar in bars]
        for bar, label in zip(bars, original):
            if labels.count(bar.label) > 1 and bar.tooltip:
                test = bar.tooltip if whole else bar.tooltip.split("::")[-1]
                room = max(LABEL_CHARS - len(label) - 2, 16)   # the test's end, so the chart keeps both
                bar.label = f"{short_label(test, room)}: {label}"


def worse_direction(report: dict[str, Any]) -> dict[str, str]:
    """Chart name -> ``"higher"`` / ``"lower"``: where leakage lies (from each limit's direction)."""
    found: dict[str, str] = {}
    for test in report["tests"]:
        for r in test["results"]:
            found.setdefault(r["name"], "higher" if r["direction"] == "at_most" else "lower")
            for key in r.get("extra") or {}:
                if key in LOWER_IS_WORSE_EXTRAS:
                    found.setdefault(f"{r['attack']}.{key}", "lower")
    return found


def _charts(report: dict[str, Any]) -> str:
    parts = []
    worse = worse_direction(report)
    for name, bars in chart_groups(report).items():
        parts.append(bar_chart(name, bars, worse.get(name)))
    if not parts:
        return '<p class="meta">No results to plot.</p>'
    legend = ('<p class="legend">Bars: measured figure (red fails its limit, green passes, blue is measured '
              "only, amber is a leak its test expects: xfail or expect_leak), whiskers: confidence interval; "
              "dashed grey line: chance baseline; red line: threshold (the claimed \u03b5 for LDP audits); black "
              "line: ceiling (largest value the measurement can show), where a figure's axis ends.</p>")
    return legend + "".join(parts)


def _details(report: dict[str, Any]) -> str:
    parts = []
    for test, r in _rows(report):   # failures first, as in the summary
        if r is None:
            continue
        facts = {"value": r["value"], "interval": r.get("interval"), "confidence": r.get("confidence"),
                 "threshold": r.get("threshold"), "direction": r["direction"], "chance": r.get("chance"),
                 "ceiling": r.get("ceiling"), "extra": r.get("extra"), "tolerance": r.get("tolerance"),
                 "device": r.get("device"), "seed": r.get("seed"), "target hash": r.get("target_hash"),
                 "test outcome": test["outcome"], "duration (s)": test["duration"],
                 "worker": test.get("worker"), "host": test.get("host")}
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_fact(v)}</td></tr>"
                       for k, v in facts.items() if v not in (None, {}, ""))
        evidence = json.dumps(r.get("evidence") or {}, indent=2, ensure_ascii=False)
        remedy = f'<p><b>Remedy:</b> {_e(r["remedy"])}</p>' if r.get("remedy") else ""
        shown = _e(shown_verdict(test["outcome"], r))
        parts.append(
            f'<details{" open" if r["verdict"] == "FAIL" else ""}><summary><span class="badge '
            f'{_css(test["outcome"], r)}">{shown}</span> {_e(test["nodeid"])} \u2014 {_e(r["name"])}'
            f'{" [" + _e(r["label"]) + "]" if r.get("label") else ""}</summary>'
            f"<table>{rows}</table><p><b>Evidence</b></p><pre>{_e(evidence)}</pre>{remedy}</details>")
    return "".join(parts) or '<p class="meta">No results.</p>'


def _gate_failures(base: dict[str, Any]) -> str:
    """``2 result(s) leak more than in the baseline beyond tolerance, 1 baseline entry missing``."""
    found = []
    if base.get("regressions"):
        found.append(f'{len(base["regressions"])} result(s) leak more than in the baseline beyond tolerance')
    if base.get("invalid"):
        found.append(f'{len(base["invalid"])} result(s) cannot be compared')
    if base.get("vanished") and not base.get("allow_missing"):
        found.append(f'{len(base["vanished"])} baseline entr{"y" if len(base["vanished"]) == 1 else "ies"} '
                     "with no result in this run")
    if not base.get("compared"):
        found.append("nothing was compared")
    found += list(base.get("errors") or [])
    return "; ".join(found) or "see the terminal summary"


def _banner(report: dict[str, Any]) -> str:
    s = report["summary"]
    crashed = [w for w in report["run"]["workers"] if w["status"] == "crashed"]
    base = report.get("baseline")
    parts = []
    if s["failed"]:
        parts.append(f'<div class="banner leak">LEAK: {s["failed"]} of {s["results"]} result(s) exceed their '
                     f'limit, in {len(s["leaking"])} test(s).</div>')
    else:
        parts.append(f'<div class="banner ok">No result exceeds its limit ({s["passed"]} passed, '
                     f'{s["measured"]} measured only, {s["tests"]} test(s)).</div>')
    if s.get("expected_leaks"):
        parts.append(f'<div class="banner warn">{s["expected_leaks"]} expected leak(s) in '
                     f'{len(s.get("expected_leaking", []))} test(s) that declare them (xfail or expect_leak): shown '
                     "in the table, not counted above.</div>")
    if s.get("inconclusive"):
        parts.append(f'<div class="banner leak">{s["inconclusive"]} result(s) INCONCLUSIVE: cut short by their '
                     "budget before covering what the default covers; not a pass.</div>")
    if s.get("redacted"):
        parts.append(f'<div class="banner note">{_e(redaction_banner(s["redacted"]))}</div>')
    if base is not None:
        if base.get("passed"):
            parts.append(f'<div class="banner ok">Baseline gate passed against {_e(base["path"])} '
                         f'({_e(base.get("compared", 0))} result(s) compared).</div>')
        else:
            parts.append(f'<div class="banner leak">Baseline gate FAILED against {_e(base["path"])}: '
                         f"{_e(_gate_failures(base))}.</div>")
    for w in crashed:
        where = f' while running {_e(w["crashed_test"])}' if w.get("crashed_test") else ""
        parts.append(f'<div class="banner warn">Worker {_e(worker_name(w))} crashed{where}: {_e(w.get("error"))}. '
                     "Its remaining results are missing from this report.</div>")
    return "".join(parts)


def render_html(report: dict[str, Any]) -> str:
    """The whole page as a string."""
    run = report["run"]
    workers = ", ".join(f'{worker_name(w)} ({w.get("device") or "device not used"}, {w["status"]})'
                        for w in run["workers"]) or "none (no xdist)"
    meta = (f'plugin {_e(report["plugin_version"])} \u00b7 report v{_e(report["version"])} \u00b7 '
            f'{_e(report["created"])} \u00b7 seed {_e(run["seed"])} \u00b7 workers: {_e(workers)}')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>pytest-privleak report</title><style>{CSS}</style></head><body>"
            f'<h1>pytest-privleak report</h1><p class="meta">{meta}</p>{_banner(report)}'
            f'<h2 id="summary">Summary</h2>{_summary_table(report)}'
            f'<h2 id="charts">Figures against chance, threshold and ceiling</h2>{_charts(report)}'
            f'{seed_charts_html(report)}{roc_charts_html(report)}{dp_section_html(report)}'
            f'<h2 id="details">Details</h2>{_details(report)}</body></html>\n')
