"""Text from data made safe to print: control characters and lone surrogates shown as escapes.

A result's label, a test id or a canary's text come from the project under
test.  Written raw, a NUL or an ESC (``\\x1b[2J`` clears the screen, other
sequences recolour or rewrite earlier lines) reaches the terminal of whoever
reads the run, bidirectional overrides (U+202E) reorder what a reviewer sees,
and a lone surrogate (``name="\\ud800"``) cannot be encoded as UTF-8, so the
HTML and Markdown files were never written after ``report.json`` (a partial
report).  :func:`printable` replaces each such character with its Python
escape (``\\x1b``, ``\\ud800``, ``\\u202e``), so the text stays readable and
unambiguous; ``report.json`` keeps the original value (JSON escapes it).
"""
from __future__ import annotations

import re
from typing import Any

#: C0/C1 controls (tab and newline too: one cell, one line), lone surrogates, and bidirectional controls.
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any) -> Any:
    """``text`` with every :data:`UNPRINTABLE` character replaced by its escape; non-strings unchanged."""
    return UNPRINTABLE.sub(_escape, text) if isinstance(text, str) else text


def printable_lines(text: str) -> str:
    """Like :func:`printable`, but newlines (and tabs) of a multi-line text are kept as they are."""
    return "\n".join("\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n"))


def printable_tree(value: Any) -> Any:
    """A copy of a JSON-like ``value`` (dicts, lists, strings) with every string made :func:`printable_lines`
    (keys :func:`printable`): what the HTML and Markdown files render."""
    if isinstance(value, str):
        return printable_lines(value)
    if isinstance(value, dict):
        return {printable(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_tree(v) for v in value]
    return value
