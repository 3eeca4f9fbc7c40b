"""Labels that broke the report or the terminal (issue 23 item 5).

Before: a lone surrogate in a ``name=`` label left a partial report (report.json only: writing index.html
raised UnicodeEncodeError), and NUL or ESC in a label reached the terminal raw (``\\x1b[2J`` clears it).
"""
import json

from pytest_privleak.report.printable import printable, printable_lines, printable_tree

EVIL = "pin\\x1b[2J\\x00\\ud800\\u202e end"   # as source text inside the generated test file

TEST = f'''
from pytest_privleak.results import LeakResult, record

def test_label():
    record(LeakResult(attack="exposure", metric="exposure_bits", value=1.0, threshold=2.0, label="{EVIL}"))
'''


def test_a_label_with_controls_and_a_lone_surrogate_gives_a_whole_report_and_a_clean_terminal(pytester):
    pytester.makepyfile(test_evil=TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-report=out")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    out = pytester.path / "out"
    assert {p.name for p in out.iterdir()} >= {"report.json", "index.html", "summary.md"}
    raw = result.stdout.str()
    assert "\x1b[2J" not in raw and "\x00" not in raw and "\u202e" not in raw
    assert "pin\\x1b[2J\\x00\\ud800\\u202e end" in raw  # shown as escapes in the table
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "\\ud800" in html and "\x1b" not in html and "\x00" not in html
    assert "\\x1b[2J" in (out / "summary.md").read_text(encoding="utf-8")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))  # the key keeps the exact label
    labels = [r["label"] for t in report["tests"] for r in t["results"]]
    assert labels == ["pin\x1b[2J\x00\ud800\u202e end"]


def test_printable_escapes_only_what_cannot_be_shown():
    assert printable("my pin code is 1 2 3 4 — naïve ✓") == "my pin code is 1 2 3 4 — naïve ✓"
    assert printable("a\x1bb\x00c\ud800d\u202ee\x9bf") == "a\\x1bb\\x00c\\ud800d\\u202ee\\x9bf"
    assert printable("two\nlines") == "two\\x0alines"  # one table cell, one line: no forged row
    assert printable_lines("two\nlines\x1b") == "two\nlines\\x1b"
    assert printable_tree({"k\x00": ["v\ud800", 3, None]}) == {"k\\x00": ["v\\ud800", 3, None]}
