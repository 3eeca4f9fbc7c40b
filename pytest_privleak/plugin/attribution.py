"""Whose result is this: every recorded result is attributed to a stable key, or refused at the end.

:func:`pytest_privleak.results.record` hands each result, from any thread, to
the one :class:`Attribution` of the process. It belongs to

* the test being run (its setup, call or teardown, and the function-scoped
  fixtures that run then): key = the test's node id;
* a fixture of a wider scope (module, class, package, session) while it sets
  up or tears down: key = ``<scope node id>::<fixture name>`` (``[i]`` for its
  i-th parameter), the same whichever test happens to trigger it, so ``-k`` or
  xdist do not move it;
* nobody, outside the run of any test (collection, a conftest at import time,
  a thread still running after its test): kept as *unattributed*, and the run
  fails naming each one (they cannot be gated against a baseline).

A thread started by a test records into whatever test or fixture runs when the
result arrives; a thread that outlives its test may so land on the next test.
The results of each phase travel with that phase's test report.
"""
from __future__ import annotations

import threading
from typing import Any

from ..results import LeakResult

SESSION_SCOPE_PREFIX = "[session]"


def fixture_key(fixturedef: Any, request: Any) -> str | None:
    """The stable key of a wider-scoped fixture's results; ``None`` for a function-scoped one (its test's)."""
    if fixturedef.scope == "function":
        return None
    node = getattr(request, "node", None)
    where = getattr(node, "nodeid", "") or fixturedef.baseid or SESSION_SCOPE_PREFIX
    if fixturedef.scope == "session":
        where = fixturedef.baseid or SESSION_SCOPE_PREFIX
    key = f"{where}::{fixturedef.argname}"
    if getattr(fixturedef, "params", None) is not None and hasattr(request, "param_index"):
        key += f"[{request.param_index}]"
    return key


class Attribution:
    """The process's recorder: results by owner key, drained by each test report; the unattributed kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.item_nodeid: str | None = None
        self.phase: str | None = None
        self.fixtures: list[str] = []       # wider-scoped fixtures setting up / tearing down, innermost last
        self.pending: dict[str, list[LeakResult]] = {}
        self.unattributed: list[tuple[LeakResult, str]] = []   # (result, where it was recorded)

    def __call__(self, result: LeakResult) -> None:
        with self._lock:
            owner = self.fixtures[-1] if self.fixtures else self.item_nodeid
            if owner is None:
                where = f"after {self.phase}" if self.phase else "before any test ran: at import or collection"
                self.unattributed.append((result, where))
            else:
                self.pending.setdefault(owner, []).append(result)

    def start_item(self, nodeid: str) -> None:
        with self._lock:
            self.item_nodeid, self.phase = nodeid, "setup"

    def start_phase(self, phase: str) -> None:
        with self._lock:
            self.phase = phase

    def end_item(self) -> None:
        with self._lock:
            if self.item_nodeid is not None:
                self.phase = f"the end of test {self.item_nodeid}"
            self.item_nodeid = None
            self.fixtures.clear()

    def enter_fixture(self, key: str) -> None:
        with self._lock:
            self.fixtures.append(key)

    def leave_fixture(self, key: str) -> None:
        with self._lock:
            if key in self.fixtures:
                del self.fixtures[len(self.fixtures) - 1 - self.fixtures[::-1].index(key)]

    def drain(self) -> dict[str, list[LeakResult]]:
        """The results recorded since the last drain, by owner key (the current test report carries them)."""
        with self._lock:
            taken, self.pending = self.pending, {}
        return taken

    def take_unattributed(self) -> list[tuple[LeakResult, str]]:
        with self._lock:
            taken = self.unattributed + [(r, "after the last test")
                                         for results in self.pending.values() for r in results]
            self.unattributed, self.pending = [], {}
        return taken
