"""summary.md: every text from data is inert (no live link, image, HTML, emphasis or autolink), the table
keeps its shape, and no text can close the gate's code block.

"Inert" is checked the way CommonMark reads code spans: a run of N backticks opens a span that the next
run of exactly N backticks closes; outside the spans no Markdown syntax from the data may remain.
"""
from __future__ import annotations

import re

from pytest_privleak.report.gate import compare
from pytest_privleak.report.markdown import code, fenced, render_markdown
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.results import LeakResult

CANARY = "[click](http://x) ![i](http://y) <b>| *em* _u_ ``tick`` a@b.com www.x.com"
_RUN = re.compile(r"`+")


def split_code_spans(line: str) -> tuple[str, list[str]]:
    """(the text outside code spans, the contents of the spans) of one Markdown line."""
    outside, spans, pos = [], [], 0
    while True:
        opening = _RUN.search(line, pos)
        if opening is None:
            outside.append(line[pos:])
            return "".join(outside), spans
        closing = next((m for m in _RUN.finditer(line, opening.end()) if len(m.group()) == len(opening.group())),
                       None)
        if closing is None:  # an unmatched run is literal text
            outside.append(line[pos:opening.end()])
            pos = opening.end()
            continue
        outside.append(line[pos:opening.start()])
        content = line[opening.end():closing.start()]
        if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
            content = content[1:-1]
        spans.append(content)
        pos = closing.end()


def _report(label: str, nodeid: str = "t.py::test_[x](http://n)") -> dict:
    result = LeakResult(attack="cea", metric="accuracy", value=0.4, threshold=0.0, chance=1e-4, label=label)
    return build_report([make_test_entry(nodeid, "failed", 0.1, None, "cpu", 0, [result.to_json()])],
                        [{"id": "gw0", "device": "cpu", "gpu": None, "status": "crashed",
                          "error": "killed by ![x](http://evil) <i>oom</i>", "crashed_test": "t.py::[a](http://b)"}],
                        seed=0, xdist=True)


def test_a_markdown_canary_stays_text_in_the_table():
    md = render_markdown(_report(CANARY), report_path="out/[r](http://z).html")
    (row,) = [line for line in md.splitlines() if line.startswith("| ") and "cea.accuracy" in line]
    outside, spans = split_code_spans(row)
    # the table keeps its 8 cells: every pipe of the data is escaped
    assert len(re.split(r"(?<!\\)\|", outside.strip().strip("|"))) == 8
    assert CANARY in [span.replace("\\|", "|") for span in spans]
    assert "t.py::test_[x](http://n)" in spans
    for line in md.splitlines():
        outside, _ = split_code_spans(line)
        for syntax in ("[", "](", "<", "http", "www.", "@", "_u_", "*em*"):
            assert syntax not in outside, (syntax, line)


def test_code_spans_are_fenced_longer_than_any_backtick_run_and_keep_the_text_exact():
    for text in ["plain", "a ` b", "``x``", "`lead", "trail`", " spaced ", "a|b"]:
        outside, spans = split_code_spans(code(text))
        assert (outside, spans) == ("", [text]), text
    assert code("a|b", in_table=True) == "`a\\|b`" and code(None) == "" and code("line\nbreak") == "`line break`"


def test_the_gate_block_cannot_be_closed_by_a_label():
    label = "pin\n```\n[click](http://x)"
    before = _report("x")
    now = _report(label)
    md = render_markdown({**now, "baseline": compare(now, before, {}, "b.json")})
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line) == {"`"} and len(line) >= 3)
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == lines[start])
    block = lines[start + 1:end]
    assert any("new (not in baseline, not gated)" in line for line in block)
    # the label stays on one line, its newlines escaped (issue 36: no label forges a line), inside the block
    assert any("pin\\x0a```\\x0a[click](http://x)]" in line for line in block)
    assert all(not (set(line) == {"`"} and len(line) >= len(lines[start])) for line in block)
    assert fenced(["a ````` b"])[0] == "``````"


def test_a_crashed_worker_on_another_host_is_named_with_its_host_as_inert_text():
    result = LeakResult(attack="cea", metric="accuracy", value=0.4, threshold=0.0, chance=1e-4, label="pin")
    report = build_report([make_test_entry("t.py::a", "failed", 0.1, None, "cpu", 0, [result.to_json()])],
                          [{"id": "gw1", "host": "h2 [x](http://h)", "device": "cpu", "gpu": None,
                            "status": "crashed", "error": "node down", "crashed_test": "t.py::a"},
                           {"id": "gw0", "host": "localhost", "device": "cpu", "gpu": None,
                            "status": "crashed", "error": "node down", "crashed_test": "t.py::b"}],
                          seed=0, xdist=True)
    lines = [line for line in render_markdown(report).splitlines() if "crashed" in line]
    assert split_code_spans(lines[0])[1][:2] == ["gw1", "h2 [x](http://h)"]
    assert " on host " in split_code_spans(lines[0])[0] and "http" not in split_code_spans(lines[0])[0]
    assert " on host " not in lines[1]  # this machine's worker needs no host
