"""The membership ROC chart: log-log positions by hand, failures first, escaping, and a result's curve end to end."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from pytest_privleak.attacks.membership.figures import roc_curve
from pytest_privleak.report.charts.roc import LEFT, SIZE, TOP, curves, roc_chart, roc_charts_html

SVG = "{http://www.w3.org/2000/svg}"


def report_with(*results, outcome="passed"):
    return {"tests": [{"nodeid": f"t.py::test_{i}", "outcome": outcome, "results": [r]}
                      for i, r in enumerate(results)]}


def test_roc_curve_by_hand():
    # members 3, 2, 1; non-members 2.5, 1.5, 0.5, 0: thresholds at each non-member from the top
    assert roc_curve(np.array([3.0, 2.0, 1.0]), np.array([2.5, 1.5, 0.5, 0.0])) == {
        "fpr": [0.0, 0.25, 0.5, 0.75, 1.0], "tpr": [1 / 3, 2 / 3, 1.0, 1.0, 1.0]}
    # tied non-members give one point per distinct FPR
    assert roc_curve(np.array([3.0, 2.0, 1.0]), np.array([2.0, 2.0, 0.5, 0.0]))["fpr"] == [0.0, 0.5, 0.75, 1.0]


def test_roc_curve_keeps_few_points_spaced_in_log_fpr():
    rng = np.random.default_rng(0)
    curve = roc_curve(rng.normal(1, 1, 2000), rng.normal(0, 1, 10000), max_points=40)
    assert len(curve["fpr"]) <= 40 and curve["fpr"][0] == 0.0 and curve["fpr"][-1] == 1.0
    assert curve["fpr"][1] == 1e-4                    # the first non-zero FPR is 1 / n0
    assert all(a < b for a, b in zip(curve["fpr"], curve["fpr"][1:]))
    assert all(a <= b for a, b in zip(curve["tpr"], curve["tpr"][1:]))


def test_points_sit_on_log_axes():
    svg = roc_chart([{"label": "a", "nodeid": "t::a", "fpr": [1e-4, 1e-2, 1.0], "tpr": [1e-4, 1e-1, 1.0],
                      "failed": False}])
    root = ET.fromstring(svg)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2                            # chance diagonal and the curve
    plot = SIZE - LEFT - 16
    pts = [tuple(map(float, p.split(","))) for p in lines[1].get("points").split()]
    # FPR 1e-2 on a 1e-4..1 axis is half way; TPR 1e-1 is three quarters of the way up
    assert math.isclose(pts[1][0], LEFT + plot / 2, abs_tol=0.06)
    assert math.isclose(pts[1][1], TOP + plot - 0.75 * plot, abs_tol=0.06)


def test_failures_come_first_and_text_is_escaped():
    ok = {"label": "<ok>", "verdict": "pass", "curve": {"fpr": [0.0, 1.0], "tpr": [0.0, 1.0]}}
    bad = {"label": "leaky", "verdict": "FAIL", "curve": {"fpr": [0.0, 0.5, 1.0], "tpr": [0.5, 1.0, 1.0]}}
    report = report_with(ok, bad)
    assert [c["label"] for c in curves(report)] == ["leaky", "<ok>"]
    html = roc_charts_html(report)
    assert "&lt;ok&gt;" in html and "<ok>" not in html and "leaky (FAIL)" in html
    assert roc_charts_html(report_with({"label": "x", "verdict": "pass"})) == ""


def test_the_html_report_draws_the_roc_of_a_recorded_membership_result(pytester):
    pytester.makepyfile(test_m="""
        import numpy as np
        from pytest_privleak import measure_membership
        from pytest_privleak.data.types import Utterance

        class Table:
            def score(self, utterances):
                return np.array([float(u.tokens[0]) for u in utterances])

        def test_m():
            members = [Utterance((f"{0.001 * i:.3f}",), ("O",), "x") for i in range(200)]
            non_members = [Utterance((f"{1 + 0.001 * i:.3f}",), ("O",), "x") for i in range(1000)]
            result = measure_membership(Table(), members, non_members, name="separable")
            assert result.curve["fpr"][0] == 0.0 and result.curve["tpr"][0] == 1.0
    """)
    result = pytester.runpytest_subprocess("--privleak-report=out", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    page = (pytester.path / "out" / "index.html").read_text(encoding="utf-8")
    assert 'id="roc"' in page and "separable" in page and "<polyline" in page


def test_a_perfect_attack_is_drawn_not_a_crash():
    # held-out probe (session 7): a calibrated attack at AUC 1.000 (non-members all at one statistic) has FPR 0
    # then 1 only; the axes' lower end became 1 (zero decades) and the report writer died on a division by zero,
    # leaving index.html unwritten
    curve = roc_curve(np.array([3.0, 2.0, 1.0]), np.array([0.0, 0.0]))
    assert curve["fpr"] == [0.0, 1.0]
    svg = roc_chart([{"label": "perfect", "nodeid": "t::p", **curve, "failed": True}])
    ET.fromstring(svg)
    assert "perfect" in svg
