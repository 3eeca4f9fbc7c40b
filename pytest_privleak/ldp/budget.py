"""Time budget and progress line of an LDP audit.

An audit of a large or slow mechanism can run for many minutes; it must not
do so silently, and a user may cap it.  :class:`AuditClock` counts the
samples drawn against the total planned, reports progress (samples done /
total, elapsed, ETA) every ``progress`` seconds once the run is long, as a
line on stderr outside pytest and live under it (:mod:`pytest_privleak.progress.events`),
and tells the search and the final estimate when the ``time_budget`` is
spent.  A budget never turns into a silent pass: the auditor reports the
samples it reached and warns (see ``auditor.audit``).
"""
from __future__ import annotations

import math
import time
from typing import TextIO

from ..progress import events as _progress

#: Share of the time budget the pair search may use; the rest is kept for the final estimate.
SEARCH_SHARE = 0.5


def check_time_budget(time_budget) -> float | None:
    """``None`` (no budget) or a positive finite number of seconds; anything else is refused with the fix."""
    if time_budget is None:
        return None
    if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)) or not (
            math.isfinite(time_budget) and time_budget > 0):
        raise ValueError(f"time_budget must be a positive number of seconds or None (no limit), got "
                         f"{time_budget!r}; fix: e.g. time_budget=60, or time_budget=None to run to the end")
    return float(time_budget)


def check_progress(progress) -> float | None:
    """``None`` (silent) or the seconds between progress lines (>= 0)."""
    if progress is None:
        return None
    if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not (
            math.isfinite(progress) and progress >= 0):
        raise ValueError(f"progress must be the seconds between progress lines (a number >= 0) or None (no "
                         f"progress line), got {progress!r}; fix: e.g. progress=5")
    return float(progress)


class AuditClock:
    """Counts samples against the plan, prints progress, and knows when the budget is spent."""

    def __init__(self, label: str, *, time_budget: float | None = None, progress: float | None = 5.0,
                 stream: TextIO | None = None) -> None:
        self.label = label
        self.budget = time_budget
        self.every = progress
        self.stream = stream
        self.started = time.perf_counter()
        self.last_line = self.started
        self.done = 0
        self.total = 1
        self.phase = "search"
        self.lines = 0

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def plan(self, total: int) -> None:
        """Set the number of samples the whole audit will draw (updated as the plan becomes known)."""
        self.total = max(int(total), self.done, 1)

    def advance(self, samples: int, phase: str | None = None) -> None:
        """Count ``samples`` drawn; print a progress line when one is due."""
        self.done += int(samples)
        self.total = max(self.total, self.done)
        if phase:
            self.phase = phase
        now = time.perf_counter()
        if self.every is not None and now - self.last_line >= self.every and now - self.started >= self.every:
            self.last_line = now
            self._print(now)

    def _print(self, now: float) -> None:
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        budget = "" if self.budget is None else (
            f", time budget {self.budget:g} s ({max(0.0, self.budget - elapsed):.0f} s left)")
        line = (f"privleak ldp [{self.label}]: {self.phase}: {self.done:,}/{self.total:,} samples "
                f"({100.0 * self.done / self.total:.0f}%), {elapsed:.0f} s elapsed, ETA {eta:.0f} s{budget}")
        if self.stream is not None:  # an explicit stream gets the plain line whoever shows progress
            print(line, file=self.stream, flush=True)
        _progress.emit(_progress.AUDIT, self.target, done=self.done, total=self.total, unit="sample",
                       eta=eta if math.isfinite(eta) else None, seconds=elapsed, phase=self.phase,
                       line=None if self.stream is not None else line)
        self.lines += 1

    @property
    def target(self) -> str:
        return f"ldp audit {self.label}"

    def finish(self) -> None:
        """Close the audit's progress: a final event for a run long enough to have reported progress."""
        if self.lines:
            _progress.emit(_progress.AUDIT_DONE, self.target, done=self.done, total=self.total, unit="sample",
                           seconds=self.elapsed)

    def search_spent(self) -> bool:
        """True when the search has used its share of the budget (the final estimate keeps the rest)."""
        return self.budget is not None and self.elapsed >= SEARCH_SHARE * self.budget

    def spent(self) -> bool:
        """True when the whole budget is used."""
        return self.budget is not None and self.elapsed >= self.budget
