"""A leak in a test marked xfail is an *expected* leak: shown, but not counted in the LEAK banner."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pytest_privleak.plugin.collector import ResultCollector
from pytest_privleak.report.html import render_html
from pytest_privleak.report.json_writer import validate
from pytest_privleak.report.markdown import render_markdown
from pytest_privleak.report.model import EXPECTED_LEAK, build_report, decode_result, encode, make_test_entry
from pytest_privleak.report.terminal import summary_lines
from pytest_privleak.results import LeakResult
from pytest_privleak.plugin.settings import Settings


def _logreport(nodeid, result, outcome, wasxfail=None):
    report = SimpleNamespace(nodeid=nodeid, when="call", outcome=outcome, failed=outcome == "failed",
                             skipped=outcome == "skipped", duration=0.1, node=None,
                             privleak={"results": [encode(result.to_json())], "device": "cpu", "seed": 0})
    if wasxfail is not None:
        report.wasxfail = wasxfail  # how pytest marks an xfailed test: outcome "skipped" plus wasxfail
    return report


def _collector():
    hook = SimpleNamespace(pytest_privleak_result=lambda config, nodeid, result: None)
    collector = ResultCollector(SimpleNamespace(hook=hook), Settings())
    known = LeakResult(attack="cea", metric="accuracy", value=0.9, threshold=0.1, label="old pin")
    new = LeakResult(attack="exposure", metric="exposure_bits", value=12.0, threshold=4.0, label="call")
    fine = LeakResult(attack="cea", metric="accuracy", value=0.0, threshold=0.1, label="new pin")
    collector.pytest_runtest_logreport(_logreport("t.py::test_known", known, "skipped", wasxfail="fix planned"))
    collector.pytest_runtest_logreport(_logreport("t.py::test_new", new, "failed"))
    collector.pytest_runtest_logreport(_logreport("t.py::test_fine", fine, "passed"))
    return collector


def test_xfailed_leaks_are_expected_not_counted_but_shown_everywhere():
    collector = _collector()
    report = collector.build()
    validate(report)
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert tests["t.py::test_known"]["outcome"] == "xfailed"
    assert tests["t.py::test_known"]["results"][0]["verdict"] == "FAIL"  # the figure itself still fails
    s = report["summary"]
    assert (s["results"], s["failed"], s["passed"], s["leaking"]) == (3, 1, 1, ["t.py::test_new"])
    assert (s["expected_leaks"], s["expected_leaking"]) == (1, ["t.py::test_known"])

    page = render_html(report)
    assert "LEAK: 1 of 3 result(s) exceed their limit, in 1 test(s)." in page
    assert "1 expected leak(s) in 1 test(s) that declare them (xfail or expect_leak)" in page
    assert f'<span class="badge xfail">{EXPECTED_LEAK}</span></td><td>t.py::<wbr>test_<wbr>known</td>' in page
    md = render_markdown(report)
    assert md.startswith("## pytest-privleak: **1 of 3 result(s) leak beyond their limit**; "
                         "1 expected leak(s) (xfail or expect_leak)")
    assert f"| {EXPECTED_LEAK} | `t.py::test_known` | `cea.accuracy` |" in md
    lines = summary_lines(collector.collected)
    assert any(line.startswith(EXPECTED_LEAK) and "test_known" in line for line in lines)
    assert any(line.startswith("FAIL") and "test_new" in line for line in lines)


def test_only_expected_leaks_give_no_leak_banner():
    result = LeakResult(attack="cea", metric="accuracy", value=0.9, threshold=0.1, label="old pin").to_json()
    report = build_report([make_test_entry("t.py::k", "xfailed", 0.1, None, "cpu", 0, [result])], [], seed=0,
                          xdist=False)
    assert report["summary"]["failed"] == 0 and report["summary"]["leaking"] == []
    page = render_html(report)
    assert "LEAK:" not in page and "No result exceeds its limit" in page and EXPECTED_LEAK in page
    # an xpassed test (marked xfail, assertion passed) is reported as passed, nothing special
    passed = make_test_entry("t.py::p", "passed", 0.1, None, "cpu", 0, [{**result, "verdict": "pass"}])
    assert build_report([passed], [], seed=0, xdist=False)["summary"]["expected_leaks"] == 0


def test_encode_gives_builtins_and_decode_restores_figures():
    result = LeakResult(attack="exposure", metric="exposure_bits", value=np.float64(3.5),
                        interval=(np.float64(2.0), np.inf), chance=np.float64(1.44),
                        extra={"ks": np.float64(0.1), "n": np.int64(3)}, evidence={"score": np.float64(1.25)})
    data = encode(result.to_json())
    assert type(data["value"]) is float and data["interval"] == [2.0, "Infinity"]
    assert type(data["extra"]["ks"]) is float and type(data["extra"]["n"]) is int
    assert type(data["evidence"]["score"]) is float
    back = LeakResult.from_json(decode_result(data))
    assert back.value == 3.5 and back.interval == (2.0, float("inf")) and back.extra == {"ks": 0.1, "n": 3.0}
    assert back.chance == 1.44 and back.verdict == "measured"
