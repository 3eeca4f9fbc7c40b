"""The report puts each figure measured with and without DP-SGD side by side (issue 25 item 4)."""
from __future__ import annotations

import pytest

from pytest_privleak.report.charts.dp_comparison import dp_rows, dp_section_html
from pytest_privleak.report.html import render_html
from pytest_privleak.report.markdown import render_markdown
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.results import LeakResult

CONFIG = {"epochs": 4, "embedding_dim": 32, "hidden_dim": 32}
DP = {"epsilon": 1.0, "delta": 1e-5, "max_grad_norm": 1.0, "accountant": "prv"}


def _target(digest: str, dp: dict | None = None, seed: int = 0, **config) -> dict:
    target = {"class": "JointNLUTarget", "kind": "joint-bilstm-crf", "content_hash": digest, "seed": seed,
              "config": {**CONFIG, **config, **({"dp": dp} if dp else {})}}
    if dp:
        target["dp"] = {**dp, "epsilon_spent": 0.99, "noise_multiplier": 2.1}
    return target


def _exposure(value: float, target: dict, label: str = "my pin code is 4 6 0 4") -> dict:
    return LeakResult(attack="exposure", metric="exposure_bits", value=value, label=label, target=target).to_json()


def _cea(value: float, digest: str) -> dict:   # the CEA records only the hash, device and type of its target
    return LeakResult(attack="cea", metric="accuracy", value=value, label="my pin code is 4 6 0 4",
                      target={"content_hash": digest, "device": "cpu", "type": "JointNLUTarget"}).to_json()


def _report(*tests: tuple[str, list[dict]]) -> dict:
    return build_report([make_test_entry(nodeid, "passed", 0.1, None, "cpu", 0, results) for nodeid, results in tests],
                        [], seed=0, xdist=False)


def test_a_figure_with_and_without_dp_is_one_row_with_the_ratio_and_spent_epsilon():
    report = _report(("t.py::test_plain", [_exposure(11.7, _target("a" * 64)), _cea(1.0, "a" * 64)]),
                     ("t.py::test_dp", [_exposure(2.9, _target("b" * 64, DP)), _cea(0.0, "b" * 64)]))
    rows = dp_rows(report)
    assert [(r["name"], r["without"], r["with_dp"]) for r in rows] == [
        ("exposure.exposure_bits", 11.7, 2.9), ("cea.accuracy", 1.0, 0.0)]   # the CEA borrows facts by hash
    assert rows[0]["ratio"] == pytest.approx(2.9 / 11.7)
    assert rows[0]["epsilon"] == 1.0 and rows[0]["epsilon_spent"] == 0.99
    assert rows[0]["test_without"] == "t.py::test_plain" and rows[0]["test"] == "t.py::test_dp"
    html = render_html(report)
    assert 'id="dp"' in html and "With and without DP-SGD" in html and "0.248" in html and "0.99" in html
    markdown = render_markdown(report)
    assert "### With and without DP-SGD" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| `exposure.exposure_bits`")
               and "0.248" in line)
    assert "11.7" in row and "2.90" in row and "0.990" in row


def test_results_that_differ_in_more_than_dp_are_not_paired():
    report = _report(("t.py::a", [_exposure(11.7, _target("a" * 64))]),
                     ("t.py::b", [_exposure(2.9, _target("b" * 64, DP, epochs=8))]),          # another config
                     ("t.py::c", [_exposure(2.9, _target("c" * 64, DP, seed=1))]),            # another seed
                     ("t.py::d", [_exposure(2.9, _target("d" * 64, DP), label="another canary")]))
    assert dp_rows(report) == []
    assert dp_section_html(report) == "" and 'id="dp"' not in render_html(report)
    assert "With and without DP-SGD" not in render_markdown(report)


def test_a_zero_figure_without_dp_has_no_ratio_and_text_is_escaped():
    label = "<b>pin</b> | `x`"
    report = _report(("t.py::a", [_exposure(0.0, _target("a" * 64), label)]),
                     ("t.py::b", [_exposure(0.5, _target("b" * 64, DP), label)]))
    (row,) = dp_rows(report)
    assert row["ratio"] is None
    html = dp_section_html(report)
    assert "<b>pin</b>" not in html and "&lt;b&gt;pin&lt;/b&gt;" in html
    line = next(line for line in render_markdown(report).splitlines() if "0.500" in line and "exposure" in line)
    assert "\\|" in line     # the pipe of the label cannot break the table
