"""Progress of a long attack phase counted in units (secrets scored of a space, candidates, samples).

An attack that loops over batches calls :meth:`Work.advance` after each; the
first :data:`SHOW_AFTER` seconds stay silent (a phase that ends sooner says
nothing, so a fast attack prints no line), then every batch emits an
``AUDIT`` event (``phase: 40,960/1,000,000 secrets (4%), ETA 3 min 10 s``),
rate-limited by the sink, and :meth:`Work.close` ends the task with an
``AUDIT_DONE`` line when any progress was shown::

    with Work("exposure of my pin code is 1 2 3 4", total=10_000, unit="secret", phase="scored") as work:
        for start in range(0, total, batch):
            ...
            work.advance(len(chunk))
"""
from __future__ import annotations

import time
from collections.abc import Callable

from . import events as progress

__all__ = ["Work", "SHOW_AFTER"]

#: Seconds a phase runs before it shows progress ("longer than a few seconds").
SHOW_AFTER = 3.0


class Work:
    """Counts ``total`` units of one phase of ``target`` and reports them once the phase runs long."""

    def __init__(self, target: str, total: int, *, unit: str, phase: str, show_after: float | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.target, self.total, self.unit, self.phase = target, int(total), unit, phase
        self.show_after, self.clock = SHOW_AFTER if show_after is None else show_after, clock
        self.start = clock()
        self.done = 0
        self.shown = False

    def advance(self, count: int) -> None:
        """``count`` more units done; an ``AUDIT`` event when the phase has run longer than ``show_after``."""
        self.done += int(count)
        elapsed = self.clock() - self.start
        if elapsed < self.show_after or self.done <= 0:
            return
        self.shown = True
        eta = elapsed / self.done * max(self.total - self.done, 0)
        progress.emit(progress.AUDIT, self.target, done=self.done, total=self.total, eta=eta, seconds=elapsed,
                      unit=self.unit, phase=self.phase)

    def close(self) -> None:
        """End the task: an ``AUDIT_DONE`` line when progress was shown (a short phase stays silent)."""
        if self.shown:
            progress.emit(progress.AUDIT_DONE, self.target, done=self.done, seconds=self.clock() - self.start,
                          unit=self.unit, phase=self.phase)
            self.shown = False

    def __enter__(self) -> "Work":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
