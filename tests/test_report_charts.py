"""The report read at a glance (issue 24 item 4): charts labelled by ``name=``, round ticks, 3 significant
figures with the exact value on hover, the worse direction marked, failures first; checked in a browser."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_privleak.report.html import chart_groups, render_html, worse_direction
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.report.charts.svg import Bar, bar_chart, nice_axis, sig3
from pytest_privleak.results import LeakResult


def test_nice_axis_ends_on_a_round_number_with_round_steps():
    assert nice_axis(13.95) == (20.0, 5.0)
    assert nice_axis(1.05) == (2.0, 0.5)
    assert nice_axis(0.263) == (0.4, 0.1)
    assert nice_axis(3.488) == (4.0, 1.0)
    assert nice_axis(9.0) == (10.0, 2.5)
    assert nice_axis(0.0) == (1.0, 0.25)


def test_three_significant_figures_for_the_eye():
    assert [sig3(x) for x in (0.00010000000000000002, 29.156972750999557, 13.2877, 0.5, 1.0, 0.0)] == \
        ["1.00e-04", "29.2", "13.3", "0.500", "1.00", "0"]
    assert sig3(float("inf")) == "\u221e" and sig3(None) == "n/a"


def test_a_chart_has_round_ticks_the_worse_direction_and_exact_values_on_hover():
    svg = bar_chart("exposure.exposure_bits", [Bar("pin said 10 times", 13.287712379549449, "FAIL", None,
                                                   {"threshold": 6.0, "ceiling": 13.2877}, tooltip="t.py::test_a")],
                    worse="higher")
    ticks = re.findall(r'class="tick">([^<]*)<', svg)
    assert ticks == ["0", "5", "10", "13.3"]   # round ticks up to the ceiling, where the axis ends (issue 34)
    assert "exposure.exposure_bits (higher is worse \u2192)" in svg
    assert ">13.3</text>" in svg and "<title>13.287712379549449</title>" in svg
    assert "<title>pin said 10 times (t.py::test_a)</title>" in svg


def _report() -> dict:
    results = [("t.py::test_control_pin", LeakResult(attack="exposure", metric="exposure_bits", value=0.49,
                                                     threshold=6.0, chance=1.44, ceiling=13.29, label="never said")),
               ("t.py::test_said_pin", LeakResult(attack="exposure", metric="exposure_bits", value=13.29,
                                                  threshold=6.0, chance=1.44, ceiling=13.29, label="said 10 times")),
               ("t.py::test_cea", LeakResult(attack="cea", metric="accuracy", value=0.0, threshold=0.0,
                                             chance=1e-4, label="pin said once",
                                             extra={"hdt": 0.5, "hdt_chance": 0.9}))]
    tests = [make_test_entry(nodeid, "failed" if not r.passed else "passed", 0.1, None, "cpu", 0, [r.to_json()])
             for nodeid, r in results]
    return build_report(tests, [], seed=0, xdist=False)


def test_bars_carry_the_name_label_and_the_test_id_and_each_chart_its_worse_side():
    groups = chart_groups(_report())
    assert [(b.label, b.tooltip) for b in groups["exposure.exposure_bits"]] == [
        ("never said", "t.py::test_control_pin"), ("said 10 times", "t.py::test_said_pin")]
    assert worse_direction(_report()) == {"exposure.exposure_bits": "higher", "cea.accuracy": "higher",
                                          "cea.hdt": "lower"}
    page = render_html(_report())
    assert "cea.hdt (\u2190 lower is worse)" in page and "cea.accuracy (higher is worse \u2192)" in page


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium; .ci/run does)")
def test_in_a_browser_the_charts_show_the_name_labels_and_the_table_lists_failures_first(pytester, tmp_path):
    pytester.makepyfile(test_named='''
        from pytest_privleak.assertions import check
        from pytest_privleak.results import LeakResult

        def test_a_control_that_passes():
            check(LeakResult(attack="exposure", metric="exposure_bits", value=0.49, threshold=6.0, chance=1.44,
                             ceiling=13.29, label="pin never said"))

        def test_zz_leaky_model():
            check(LeakResult(attack="exposure", metric="exposure_bits", value=13.29, threshold=6.0, chance=1.44,
                             ceiling=13.29, label="pin said 10 times"))
    ''')
    pytester.runpytest_subprocess("--privleak-report=rep").assert_outcomes(passed=1, failed=1)
    page = pytester.path / "rep" / "index.html"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    chart = dom[dom.index("<svg"):]
    assert ">pin never said</text>" in chart and ">pin said 10 times</text>" in chart   # name= labels, not ids
    assert "test_named.py::test_zz_leaky_model" in chart                               # the test id on hover
    table = dom[dom.index('class="summary"'):dom.index("</table>", dom.index('class="summary"'))]
    table = table.replace("<wbr>", "")   # the break hints between a test id's parts
    assert table.index("test_zz_leaky_model") < table.index("test_a_control_that_passes")   # failures first
    shot = Path(os.environ.get("PRIVLEAK_REPORT_SHOT", tmp_path / "report.png"))
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                           "--window-size=1280,900", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.stat().st_size > 10_000


def test_a_passing_cea_shows_the_truths_rank_and_hdt_beside_its_accuracy():
    r = LeakResult(attack="cea", metric="accuracy", value=0.0, threshold=0.0, chance=1e-4, label="pin",
                   extra={"best_rank_of_truth": 18.0, "hdt": 0.5, "hdt_chance": 0.9})
    report = build_report([make_test_entry("t.py::t", "passed", 0.1, None, "cpu", 0, [r.to_json()])], [],
                          seed=0, xdist=False)
    assert "rank 18, HDT 0.500 (chance 0.900)" in render_html(report)


def test_the_cea_remedy_fits_the_model_family():
    from pytest_privleak.attacks.cea.assertion import REMEDY, TRANSFORMERS_REMEDY, remedy_for

    assert remedy_for("JointNLUTarget") == REMEDY and "character embeddings" in REMEDY
    assert remedy_for("TransformersClassifier") == TRANSFORMERS_REMEDY
    assert "character embeddings" not in TRANSFORMERS_REMEDY

