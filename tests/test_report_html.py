"""index.html: escaping, charts, and a real headless browser (Debian's chromium) that renders it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_privleak.report.html import chart_groups, render_html
from pytest_privleak.report.markdown import render_markdown
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.results import LeakResult

SCRIPT_CANARY = "pin <script>document.title='PWNED';document.body.setAttribute('data-pwned','1')</script>"
IMG_CANARY = "call <img src=x onerror=\"document.title='PWNED-IMG'\"> | 5 5 5"


def _report() -> dict:
    results = [
        LeakResult(attack="cea", metric="accuracy", value=0.4, threshold=0.0, interval=(0.12, 0.74),
                   confidence=0.95, chance=1e-4, label=SCRIPT_CANARY, extra={"hdt": 0.3, "hdt_chance": 0.9},
                   evidence={"reconstructed": "<script>alert(1)</script>"}, remedy="<b>use dropout</b>"),
        LeakResult(attack="exposure", metric="exposure", value=float("inf"), threshold=4.0, ceiling=13.29,
                   chance=1.0, label=IMG_CANARY),
        LeakResult(attack="ldp", metric="epsilon_lcb", value=0.8, threshold=1.0, label="rr"),
    ]
    tests = [make_test_entry(f"t.py::test_{i}", "failed" if not r.passed else "passed", 0.1, None, "cpu", 0,
                             [r.to_json()]) for i, r in enumerate(results)]
    return build_report(tests, [], seed=0, xdist=False)


def test_every_string_from_data_is_escaped():
    page = render_html(_report())
    assert "<script" not in page and "<img" not in page and "<b>use dropout" not in page
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;" in page
    assert "Content-Security-Policy" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    md = render_markdown(_report())  # inert in code spans (tests/test_report_markdown.py checks how)
    assert f"`{SCRIPT_CANARY}`" in md and "`" + IMG_CANARY.replace("|", "\\|") + "`" in md


def test_charts_plot_each_figure_against_its_references():
    groups = chart_groups(_report())
    assert sorted(groups) == ["cea.accuracy", "cea.hdt", "exposure.exposure", "ldp.epsilon_lcb"]
    (acc,) = groups["cea.accuracy"]
    assert acc.marks == {"chance": 1e-4, "threshold": 0.0} and acc.interval == (0.12, 0.74)
    assert groups["cea.hdt"][0].marks == {"chance": 0.9, "ceiling": 1.0}   # a share: its axis ends at 1
    assert groups["exposure.exposure"][0].marks["ceiling"] == 13.29
    assert groups["ldp.epsilon_lcb"][0].marks["threshold"] == 1.0  # the claimed epsilon
    page = render_html(_report())
    assert page.count("<svg") == 4 and "\u221e" in page  # infinite exposure shown, bar clamped


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium; .ci/run does)")
def test_report_renders_in_a_headless_browser_and_no_canary_script_runs(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_leaky=f'''
        from pytest_privleak.assertions import check
        from pytest_privleak.results import LeakResult

        def test_script_canary():
            check(LeakResult(attack="cea", metric="accuracy", value=0.6, threshold=0.0, chance=1e-4,
                             label={SCRIPT_CANARY!r}))

        def test_img_canary():
            check(LeakResult(attack="exposure", metric="exposure", value=2.0, threshold=4.0, ceiling=13.3,
                             label={IMG_CANARY!r}))
    ''')
    pytester.runpytest_subprocess("--privleak-report=rep").assert_outcomes(passed=1, failed=1)
    page = pytester.path / "rep" / "index.html"
    done = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "<title>pytest-privleak report</title>" in dom  # no script rewrote the title
    assert "PWNED" in dom and "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    # the canaries are text, not elements: no <script> or <img> element exists in the rendered DOM
    assert not re.search(r"<script\b", dom) and not re.search(r"<img\b", dom)
    assert "&lt;script&gt;document.title=" in dom and "&lt;img src=x onerror=" in dom
    # the summary rendered: a table row per result with colour badges, and the charts
    assert dom.count('<span class="badge FAIL">FAIL</span>') >= 1 and 'class="summary"' in dom
    assert "LEAK: 1 of 2 result(s) exceed their limit" in dom and dom.count("<svg") == 2
    shot = tmp_path / "report.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,900", page.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 10_000  # a real, non-blank picture


def test_report_json_round_trips_non_finite_figures(tmp_path):
    from pytest_privleak.report.json_writer import validate, write_json
    from pytest_privleak.report.model import figure

    path = write_json(_report(), tmp_path / "r.json")
    data = json.loads(path.read_text())  # strict JSON: no bare Infinity token
    validate(data)
    assert data["tests"][1]["results"][0]["value"] == "Infinity" and figure("Infinity") == float("inf")
    assert "Infinity" not in path.read_text().replace('"Infinity"', "")
