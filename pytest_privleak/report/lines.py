"""Summary lines that carry their own colour, chosen where they are built from what they report.

A :class:`Line` is a ``str`` (so it joins, compares and is written to
summary.md like any text) with an ``alarm`` flag set by the code that decided
the verdict it reports: the terminal prints an alarm in bold red, anything else
plainly, without reading the text.
"""
from __future__ import annotations


class Line(str):
    """A summary line; ``alarm`` when it reports a failure (a leak, a refused or failed gate, a crash)."""

    alarm: bool

    def __new__(cls, text: str, *, alarm: bool = False) -> "Line":
        line = super().__new__(cls, text)
        line.alarm = alarm
        return line


def alarm(text: str) -> Line:
    """A line reporting a failure: printed in bold red."""
    return Line(text, alarm=True)


def plain(text: str) -> Line:
    """A line reporting no failure (a pass, a note, where a file went): printed plainly."""
    return Line(text, alarm=False)
