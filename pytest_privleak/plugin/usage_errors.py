"""Usage errors shown at the user's line (issue 24 item 6).

A ValueError or TypeError that pytest-privleak raised on purpose (the last
frame of its traceback is a ``raise`` statement inside the package: a bad
argument, an unknown pattern or kind, a malformed file) says what was wrong
and the fix; the package's frames above it only bury that message. Before a
failure is formatted, every module of the package on its traceback gets a
module-level ``__tracebackhide__`` callable, which pytest reads from a
frame's globals and calls with the exception: it hides the package's frames
for such usage errors only. Any other error (a bug of ours, a torch error)
keeps every frame, and ``--fulltrace`` shows all frames.

No torch is imported here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def _in_package(entry) -> bool:
    try:
        return Path(str(entry.path)).resolve().is_relative_to(PACKAGE)
    except (OSError, ValueError):
        return False


def usage_error(excinfo) -> bool:
    """True for a ValueError/TypeError that the package raised on purpose (its last frame is a package ``raise``)."""
    if not isinstance(excinfo.value, (ValueError, TypeError)) or not len(excinfo.traceback):
        return False
    last = excinfo.traceback[-1]
    try:
        return _in_package(last) and str(last.statement).lstrip().startswith("raise ")
    except Exception:       # a frame whose source cannot be read: show everything
        return False


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """pytest, after each test phase and before its failure is formatted: mark the package's modules on the
    traceback so that a usage error hides their frames (a function's own ``__tracebackhide__`` still wins)."""
    if call.excinfo is not None:
        for entry in call.excinfo.traceback:
            if _in_package(entry):
                entry.frame.f_globals.setdefault("__tracebackhide__", usage_error)
    return (yield)
