"""The report at a glance (issue 34 item 3): the remedy in the summary table, axes to each figure's range,
expected leaks in their own colour, names broken between their parts, equal labels told apart."""
from __future__ import annotations

import re

from torch import nn

from pytest_privleak.attacks import remedies
from pytest_privleak.report.charts.svg import VERDICT_COLOURS, Bar, axis_ticks, bar_chart, scale_max, short_label
from pytest_privleak.report.html import chart_groups, render_html
from pytest_privleak.report.markdown import render_markdown
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.results import LeakResult

REMEDY = "the model has memorised this secret: keep such secrets out of the training data"


def _report() -> dict:
    leak = LeakResult(attack="exposure", metric="exposure_bits", value=13.29, threshold=6.0, chance=1.44,
                      ceiling=13.29, label="pin", remedy=REMEDY)
    known = LeakResult(attack="exposure", metric="exposure_bits", value=12.0, threshold=6.0, chance=1.44,
                       ceiling=13.29, label="pin", remedy=REMEDY)
    fine = LeakResult(attack="cea", metric="accuracy", value=0.0, threshold=0.0, interval=(0.0, 0.3), chance=1e-4,
                      ceiling=1.0, label="pin said once", remedy="dropout", extra={"hdt": 0.6, "hdt_chance": 0.9})
    tests = [make_test_entry("tests/test_privacy.py::TestPins::test_pin_said_a_hundred_times_is_caught", "failed",
                             1.0, None, "cpu", 0, [leak.to_json()]),
             make_test_entry("tests/test_privacy.py::test_pin_known_to_leak", "xfailed", 1.0, None, "cpu", 0,
                             [known.to_json()]),
             make_test_entry("tests/test_privacy.py::test_cea", "passed", 1.0, None, "cpu", 0, [fine.to_json()])]
    return build_report(tests, [], seed=0, xdist=False)


def test_each_failing_row_of_the_summary_carries_its_remedy_and_a_passing_one_does_not():
    page = render_html(_report())
    summary = page.split('<table class="summary">')[1].split("</table>")[0]
    assert summary.count('<tr class="remedy ') == 2                 # the leak and the expected leak
    row = re.search(r'<tr class="row-FAIL">.*?</tr><tr class="remedy remedy-FAIL">(.*?)</tr>', summary).group(1)
    assert f"<b>Remedy:</b> {REMEDY}" in row and "dropout" not in summary     # the passing CEA row has none
    assert re.search(r'<tr class="row-xfail">.*?</tr><tr class="remedy remedy-xfail">', summary)
    md = render_markdown(_report())
    assert "**What to do:**" in md and md.count(f"`{REMEDY}`") == 2 and md.count("`dropout`") == 0


def test_a_test_id_breaks_after_its_parts_never_inside_a_word():
    page = render_html(_report())
    assert ("tests/<wbr>test_<wbr>privacy.py::<wbr>TestPins::<wbr>test_<wbr>pin_<wbr>said_<wbr>a_<wbr>hundred_<wbr>times_<wbr>is_<wbr>"
            "caught") in page
    assert "overflow-wrap:anywhere" not in page


def test_axes_end_at_the_figures_range_a_share_at_1_and_an_exposure_at_its_ceiling():
    groups = chart_groups(_report())
    assert scale_max(groups["cea.accuracy"]) == 1.0 and axis_ticks(1.0) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert scale_max(groups["cea.hdt"]) == 1.0                 # a share without a ceiling of its own
    assert scale_max(groups["exposure.exposure_bits"]) == 13.29
    assert axis_ticks(13.29) == [0.0, 5.0, 10.0, 13.29]
    ticks = re.findall(r'class="tick">([^<]*)<', bar_chart("x", groups["exposure.exposure_bits"]))
    assert ticks == ["0", "5", "10", "13.3"]
    # a figure without a ceiling (an epsilon) still ends on a round number past its largest mark
    assert scale_max([Bar("eps", 1.3, "pass", None, {"threshold": 1.0})]) == 2.0


def test_an_expected_leak_is_drawn_in_its_own_colour_not_the_red_of_a_failure():
    bars = {b.tooltip.split("::")[-1]: b for b in chart_groups(_report())["exposure.exposure_bits"]}
    assert bars["test_pin_known_to_leak"].verdict == "expected leak"
    assert bars["test_pin_said_a_hundred_times_is_caught"].verdict == "FAIL"
    svg = bar_chart("x", [bars["test_pin_known_to_leak"]])
    assert VERDICT_COLOURS["expected leak"] in svg and VERDICT_COLOURS["FAIL"] not in svg.split("<line")[0]


def test_equal_labels_in_one_chart_are_told_apart_by_their_test():
    labels = [b.label for b in chart_groups(_report())["exposure.exposure_bits"]]
    assert labels == ["test_pin_said_a_hundred_times_is_caught: pin", "test_pin_known_to_leak: pin"]
    long = "my pin code is 9 4 5 8"
    twins = [Bar(long, 1.0, tooltip="t.py::test_pin_cannot_be_extracted_from_undefended_model"),
             Bar(long, 1.0, tooltip="t.py::test_our_own_model_through_the_protocol")]
    from pytest_privleak.report.charts.svg import LABEL_CHARS
    from pytest_privleak.report.html import _tell_apart

    _tell_apart(twins)                                       # shortened, they still differ and keep the label
    assert [short_label(b.label) for b in twins] == [b.label for b in twins]
    assert all(b.label.endswith(": " + long) and len(b.label) <= LABEL_CHARS for b in twins)
    assert twins[0].label != twins[1].label
    same = [Bar("pin", 1.0, tooltip="a/test_x.py::test_p"), Bar("pin", 2.0, tooltip="b/test_x.py::test_p")]
    _tell_apart(same)
    assert [b.label for b in same] == ["a/test_x.py::test_p: pin", "b/test_x.py::test_p: pin"]


def test_a_long_label_is_shortened_between_words_keeping_its_end():
    assert short_label("tests/test_privacy.py::test_pin_is_not_extractable_after_training", 30) == \
        "\u2026extractable_after_training"
    assert short_label("my account number is <account 3fa2c1d0 len=12>", 30) == "\u2026is <account 3fa2c1d0 len=12>"
    assert short_label("short") == "short"
    assert len(short_label("x" * 40, 30)) == 30               # one word longer than the room: its end


def test_an_own_recurrent_model_is_not_told_about_the_built_in_targets_options():
    class OwnGru(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(4, 4)

    own = remedies.remedy_for("exposure", OwnGru())
    assert "dropout (e.g. 0.2)" in own and "dropout=" not in own and "built-in" not in own
    built_in = remedies.remedy("exposure", "recurrent")       # a built-in target keeps its options
    assert "the built-in targets' dropout= and early_stopping=" in built_in
    assert "built-in" not in remedies.remedy("membership", "transformer", built_in=False)
