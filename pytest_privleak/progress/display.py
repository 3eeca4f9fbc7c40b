"""Turn progress events into what a person reads: one line per target, live or rate-limited.

:class:`Display` keeps one *task* per (worker, target): a training, a cache
wait, an LDP audit. What it writes depends on two settings:

* ``live`` (a terminal): one status line rewritten in place with every open
  task (``epoch 12/30, ETA 8 s``); when a task ends its final line
  (``trained in 12.3 s``, ``loaded from cache``) replaces the status line and stays.
* not live (a CI log, a file): no per-epoch lines; a progress line for a
  task only when at least ``every`` seconds *and* ``step`` of its work have
  passed since its last line (so a target trained in under ``every`` seconds
  gets only its final line, and a long one at most ``1 / step`` lines), then
  the final line.

A target gets one final line per run: loading it again from the cache (the
next test, another worker) shows nothing more.

``verbosity`` follows pytest's: 0 or more shows all of the above; -1 (``-q``)
only the final lines; the plugin builds no display below that (``-qq``).

The writer ``out`` needs ``line(text)`` (a line that stays) and, for live
mode, ``status(text)`` (the line rewritten in place; ``""`` erases it); it
is the terminal writer in the plugin and a list in tests.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from . import events as progress
from .events import Event

__all__ = ["Display", "Out", "describe_seconds"]

#: Not live: seconds and share of a task's work between two of its progress lines.
EVERY, STEP = 5.0, 0.1
#: Not live: seconds between two lines of the suite's ETA.
SUITE_EVERY = 30.0
PREFIX = "[privleak] "


class Out(Protocol):
    def line(self, text: str) -> None: ...

    def status(self, text: str) -> None: ...


def describe_seconds(seconds: float) -> str:
    """``8 s``, ``12.3 s``, ``2 min 05 s``: short enough for a status line."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


@dataclass
class _Task:
    name: str
    started: float
    done: float | None = None
    total: float | None = None
    unit: str = "epoch"
    eta: float | None = None
    eta_at_most: bool = False
    phase: str | None = None
    waiting: str | None = None
    last_line: float = 0.0
    last_share: float = 0.0

    @property
    def share(self) -> float:
        return (self.done or 0) / self.total if self.total else 0.0

    def progress_text(self) -> str:
        if self.waiting:
            return self.waiting
        if self.done is None or not self.total:
            return "training"
        bound = "at most " if self.eta_at_most else ""
        eta = f", ETA {bound}{describe_seconds(self.eta)}" if self.eta is not None else ""
        if self.unit == "epoch":
            return f"epoch {self.done:.0f}/{self.total:.0f}{eta}"
        phase = f"{self.phase}: " if self.phase else ""
        return f"{phase}{self.done:,.0f}/{self.total:,.0f} {self.unit}s ({100 * self.share:.0f}%){eta}"


class Display:
    """Shows progress events on ``out``; thread-safe (the xdist controller feeds it from a thread)."""

    def __init__(self, out: Out, *, live: bool, verbosity: int = 0, every: float = EVERY, step: float = STEP,
                 clock: Callable[[], float] = time.monotonic, host: str | None = None) -> None:
        self.out, self.live, self.verbosity = out, live and verbosity >= 0, verbosity
        self.every, self.step, self.clock = every, step, clock
        self.host = host if host is not None else progress.this_host()
        self.tasks: dict[tuple[str | None, str], _Task] = {}
        self.finished: set[str] = set()  # targets with a final line: a later load from the cache is not news
        self.suite_text: str | None = None
        self._suite_line = self.clock()
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ naming

    def _name(self, event: Event) -> str:
        where = [event.worker] if event.worker else []
        if event.host and event.host != self.host:
            where.append(f"on {event.host}")
        target = (event.target or "target") + (f" ({event.part})" if event.part else "")
        return target + (f" [{' '.join(where)}]" if where else "")

    # ------------------------------------------------------------------ events

    def handle(self, event: Event) -> None:
        with self._lock:
            if event.kind == progress.NOTE:
                if self.verbosity >= 0 and event.line:
                    self._line(event.line if event.line.startswith(PREFIX) else PREFIX + event.line)
                return
            key = (event.worker, event.target or "")
            if event.kind in (progress.DONE, progress.AUDIT_DONE):
                self._finish(self.tasks.pop(key, None), event)
                return
            task = self.tasks.get(key)
            if task is None:  # a task first seen mid-way (an audit reports once it is long) started that long ago
                ran = event.seconds if event.kind in (progress.EPOCH, progress.AUDIT) and event.seconds else 0.0
                started = self.clock() - ran
                task = self.tasks[key] = _Task(self._name(event), started=started, last_line=started)
            self._update(task, event)

    def _update(self, task: _Task, event: Event) -> None:
        if event.kind == progress.WAIT:
            took = f" ({describe_seconds(event.seconds)} so far)" if event.seconds else ""
            task.waiting = (event.source or (event.line or "waiting").removeprefix(PREFIX)) + took
            if self.verbosity >= 0 and not self.live:
                self._line(f"{PREFIX}{task.name}: {task.waiting}")
        elif event.kind in (progress.EPOCH, progress.AUDIT):
            task.waiting = None
            task.done, task.total, task.eta = event.done, event.total, event.eta
            task.eta_at_most = bool(event.eta_at_most)
            task.unit, task.phase = event.unit, event.phase
            if self.verbosity >= 0 and not self.live:
                now = self.clock()
                if now - task.last_line >= self.every and task.share - task.last_share >= self.step:
                    task.last_line, task.last_share = now, task.share
                    self._line(f"{PREFIX}{task.name}: {task.progress_text()}")
        elif event.kind == progress.START:
            task.waiting = None
        self._render()

    def _finish(self, task: _Task | None, event: Event) -> None:
        name = task.name if task is not None else self._name(event)
        repeat = event.source == progress.LOADED and event.target in self.finished
        self.finished.add(event.target or "")
        if self.verbosity >= -1 and not repeat:
            self._line(f"{PREFIX}{name}: {self._final_text(task, event)}")
        self._render()

    @staticmethod
    def _final_text(task: _Task | None, event: Event) -> str:
        took = describe_seconds(event.seconds) if event.seconds is not None else "?"
        if event.kind == progress.AUDIT_DONE:
            unit = event.unit if event.unit not in (None, "epoch") else "sample"
            if event.phase and event.done is not None:   # "scored 1,000,000 secrets in 3 min 10 s"
                return f"{event.phase} {event.done:,.0f} {unit}s in {took}"
            counted = f" ({event.done:,.0f} {unit}s)" if event.done is not None else ""
            return f"audited in {took}{counted}"
        if event.source == progress.LOADED:
            return progress.LOADED
        epochs = ""
        if task is not None and task.done is not None and task.total and task.unit == "epoch":
            early = ", stopped early" if task.done < task.total and event.source == progress.TRAINED else ""
            epochs = f" ({task.done:.0f}/{task.total:.0f} epochs{early})"
        if event.source == progress.FAILED:
            return f"training failed after {took}{epochs}"
        return f"trained in {took}{epochs}"

    def suite(self, text: str, *, force: bool = False) -> None:
        """The suite's progress and ETA (:class:`~.plan.SuiteClock`): the head of the live status line, or a
        plain line at most every :data:`SUITE_EVERY` seconds (``force``: now)."""
        with self._lock:
            self.suite_text = text
            if self.verbosity < 0:
                return
            if self.live:
                self._render()
                return
            now = self.clock()
            if force or now - self._suite_line >= SUITE_EVERY:
                self._suite_line = now
                self._line(PREFIX + text)

    def finish(self) -> None:
        """The run is over: drop the suite's status (live: erase the status line when no task is left)."""
        with self._lock:
            had, self.suite_text = self.suite_text, None
            if self.live and had and self.tasks:
                self._render()
            elif self.live and had:
                self.out.status("")

    def note(self, text: str) -> None:
        """A line that stays (the run's plan), at default verbosity."""
        with self._lock:
            if self.verbosity >= 0:
                self._line(text if text.startswith(PREFIX) else PREFIX + text)

    def close(self, worker: str | None = None) -> None:
        """Forget the open tasks of ``worker`` (its test ended or it went down without closing them)."""
        with self._lock:
            closed = [k for k in self.tasks if k[0] == worker]
            for key in closed:
                del self.tasks[key]
            if closed and self.live and (self.tasks or self.suite_text):
                self._render()
            elif closed and self.live:
                self.out.status("")  # erase the status line of the tasks just dropped

    # ------------------------------------------------------------------ writing

    def _line(self, text: str) -> None:
        self.out.line(text)

    def _render(self) -> None:
        if not self.live or not (self.tasks or self.suite_text):
            return
        shown = ([self.suite_text] if self.suite_text else []) + [f"{t.name}: {t.progress_text()}"
                                                                   for t in self.tasks.values()]
        self.out.status(PREFIX + " | ".join(shown))
