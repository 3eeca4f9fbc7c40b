"""The report draws the baseline's and this run's per-seed figures of every gated figure (issue 26)."""
import xml.etree.ElementTree as ET

from pytest_privleak.report.gate import compare
from pytest_privleak.report.charts.seeds import seed_charts_html, seed_rows

SVG = "{http://www.w3.org/2000/svg}"


def _report(values, label="<pin>"):
    result = {"key": f"t.py::t::planted.figure[{label}]", "attack": "planted", "metric": "figure",
              "value": sum(values) / len(values), "direction": "at_most", "label": label,
              "per_seed": list(values) if len(values) > 1 else [], "tolerance": 0.05}
    return {"tests": [{"nodeid": "t.py::t", "results": [result]}]}


def _svg(html):
    return ET.fromstring(html[html.index("<svg"):html.index("</svg>") + 6])


def test_both_sets_of_seeds_are_drawn_with_escaped_labels():
    comparison = compare(_report([4.0, 5.0, 6.0]), _report([1.0, 2.0, 3.0]), {}, "b.json")
    html = seed_charts_html({"baseline": comparison})
    svg = _svg(html)
    circles = svg.findall(f"{SVG}circle")
    assert len(circles) == 6
    hollow = [c for c in circles if c.get("fill") == "none"]
    assert len(hollow) == 3 and {c.get("fill") for c in circles} == {"none", "#cf222e"}  # the run regressed
    assert [c.find(f"{SVG}title").text for c in hollow] == ["baseline: 1.000", "baseline: 2.000", "baseline: 3.000"]
    assert "[&lt;pin&gt;]" in html and "<pin>" not in html
    assert "p 0.011" in html


def test_one_draw_regression_is_one_dot_a_side_and_nothing_without_a_baseline():
    comparison = compare(_report([0.5]), _report([0.3]), {}, "b.json")
    rows = seed_rows(comparison)
    assert [(r["before_seeds"], r["after_seeds"]) for r in rows["planted.figure"]] == [([0.3], [0.5])]
    assert len(_svg(seed_charts_html({"baseline": comparison})).findall(f"{SVG}circle")) == 2
    assert seed_charts_html({"baseline": None}) == ""
    unchanged = compare(_report([0.3]), _report([0.3]), {}, "b.json")
    assert seed_charts_html({"baseline": unchanged}) == ""
