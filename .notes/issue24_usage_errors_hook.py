"""Issue 24 item 6, proposed for pytest_privleak/plugin/__init__.py (the plugin wing's owner applies it).

A usage error (a ValueError/TypeError the package raised on purpose: the last frame is a ``raise`` statement
inside pytest_privleak) is shown at the user's line: before a failure is formatted, every module of the
package on its traceback gets a module-level ``__tracebackhide__`` callable (pytest reads it from the frame's
globals and calls it with the ExceptionInfo), which hides the package's frames for usage errors only. Any
other error (a bug, a torch error) keeps every frame; ``--fulltrace`` shows all. Tried as a conftest.py with
issue24_usage_errors_hook_demo_test.py: the unknown canary pattern, unknown target kind and bad target config
show only the user's line (0 'pytest_privleak/' lines; 21 with --fulltrace); the team's own ValueError is
unchanged. In the plugin, ``PACKAGE`` is ``Path(__file__).resolve().parents[1]``.
"""
from pathlib import Path

import pytest
import pytest_privleak

PACKAGE = Path(pytest_privleak.__file__).resolve().parent


def _in_package(entry) -> bool:
    try:
        return Path(str(entry.path)).resolve().is_relative_to(PACKAGE)
    except (OSError, ValueError):
        return False


def usage_error(excinfo) -> bool:
    """True for a ValueError/TypeError that pytest-privleak raised on purpose (its last frame is a ``raise``
    statement of the package): the call was wrong, not the package, so the package's frames are hidden."""
    if not isinstance(excinfo.value, (ValueError, TypeError)) or not len(excinfo.traceback):
        return False
    last = excinfo.traceback[-1]
    try:
        return _in_package(last) and str(last.statement).lstrip().startswith("raise ")
    except Exception:
        return False


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Before a failure is formatted: each module of the package on its traceback hides its frames when the
    error is a usage error (pytest reads a module-level ``__tracebackhide__`` callable; --fulltrace shows all)."""
    if call.excinfo is not None:
        for entry in call.excinfo.traceback:
            if _in_package(entry):
                entry.frame.f_globals.setdefault("__tracebackhide__", usage_error)
    return (yield)
