"""How progress of xdist workers reaches the controller's terminal: JSON lines in a per-run folder.

xdist workers cannot write to the controller's terminal, and the execnet
channel only carries xdist's own events (an unknown event name stops the
controller), so the controller makes a folder for the run, passes it to the
workers through ``workerinput`` with a token, and polls it from a thread:

* :class:`FolderSink` (worker): appends each event, as one JSON line, to
  ``<folder>/<workerid>.jsonl``, at most one progress event per target every
  ``min_gap`` seconds (start, end and wait events always);
* :class:`FolderReader` / :class:`Poller` (controller): read the complete
  new lines of every worker's file and hand the events on.

A worker that cannot reach the folder (``--tx ssh=...`` on another host, or
a different machine's folder of the same name, told apart by the token)
uses :class:`ReportSink` instead: the final line of each target travels with
the test report and is shown when the test reports, with no live progress.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..atomic import pid_alive
from . import events as progress
from .events import Event

__all__ = ["RunFolder", "FolderSink", "FolderReader", "Poller", "ReportSink", "open_worker_sink",
           "WORKERINPUT_KEY", "REPORT_ATTR"]

logger = logging.getLogger("pytest_privleak.progress")
#: ``workerinput`` key of the controller's folder and token.
WORKERINPUT_KEY = "privleak_progress"
#: Attribute of a test report carrying the final progress events of a worker without the folder.
REPORT_ATTR = "privleak_progress"
TOKEN_FILE = "run.json"
_FORWARDED_ALWAYS = frozenset({progress.START, progress.DONE, progress.AUDIT_DONE, progress.WAIT, progress.NOTE})


class RunFolder:
    """The controller's folder for one run: created on demand, removed at the end.

    A controller that was killed cannot remove its folder; the next run on this
    host removes the folders whose controller is no longer running.
    """

    PREFIX = "privleak-progress-"

    def __init__(self, parent: str | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=self.PREFIX, dir=parent))
        self.token = secrets.token_hex(8)
        (self.path / TOKEN_FILE).write_text(json.dumps({"token": self.token, "pid": os.getpid()}), encoding="utf-8")
        self.remove_stale(self.path.parent)

    @classmethod
    def remove_stale(cls, parent: Path) -> list[Path]:
        """Remove the run folders in ``parent`` whose controller (a PID on this host) has exited."""
        removed = []
        for folder in parent.glob(cls.PREFIX + "*"):
            try:
                pid = int(json.loads((folder / TOKEN_FILE).read_text(encoding="utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being created, or not ours: leave it
            if not pid_alive(pid):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        return removed

    def workerinput(self) -> dict[str, str]:
        return {"dir": str(self.path), "token": self.token}

    def has_worker(self, workerid: str) -> bool:
        """Whether worker ``workerid`` opened its file (it shares this folder)."""
        return (self.path / f"{workerid}.jsonl").exists()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class FolderSink:
    """Worker side: echo the plain line to (captured) stderr, append the event to this worker's file."""

    def __init__(self, path: Path, worker: str, *, min_gap: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.worker, self.min_gap, self.clock = path, worker, min_gap, clock
        self.host = progress.this_host()
        self._last: dict[str | None, float] = {}
        self._lock = threading.Lock()
        path.touch()  # tells the controller this worker shares the folder

    def __call__(self, event: Event) -> None:
        progress.print_line(event)
        if event.kind not in _FORWARDED_ALWAYS and not self._due(event):
            return
        event.worker, event.host = self.worker, self.host
        text = json.dumps(event.to_json(), separators=(",", ":")) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)  # one write of one line: the reader only takes complete lines

    def _due(self, event: Event) -> bool:
        now = self.clock()
        last = self._last.get(event.target)
        if last is not None and now - last < self.min_gap and event.done != event.total:
            return False
        self._last[event.target] = now
        return True


class ReportSink:
    """Worker side without the folder: plain lines on stderr; final events kept for the next test report."""

    def __init__(self, worker: str) -> None:
        self.worker, self.host = worker, progress.this_host()
        self.pending: list[dict] = []

    def __call__(self, event: Event) -> None:
        progress.print_line(event)
        if event.kind in (progress.DONE, progress.AUDIT_DONE):
            event.worker, event.host = self.worker, self.host
            self.pending.append(event.to_json())

    def take(self) -> list[dict]:
        taken, self.pending = self.pending, []
        return taken


def open_worker_sink(info: object, worker: str) -> FolderSink | ReportSink:
    """The sink of worker ``worker`` given the controller's ``workerinput`` entry ``info``."""
    try:
        folder = Path(info["dir"])  # type: ignore[index]
        token = json.loads((folder / TOKEN_FILE).read_text(encoding="utf-8")).get("token")
        if token != info["token"]:  # type: ignore[index]
            raise ValueError("the folder belongs to another run")
        return FolderSink(folder / f"{worker}.jsonl", worker)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        logger.info("worker %s: no live progress through the controller's folder (%s)", worker, exc)
        return ReportSink(worker)


class FolderReader:
    """Controller side: the events appended to the workers' files since the last read."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._offsets: dict[Path, int] = {}

    def read(self) -> list[Event]:
        events: list[Event] = []
        with contextlib.suppress(OSError):
            for path in sorted(self.folder.glob("*.jsonl")):
                events.extend(self._read_file(path))
        return events

    def _read_file(self, path: Path) -> list[Event]:
        start = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self._offsets[path] = start + len(complete)
        events = []
        for raw in complete.splitlines():
            try:
                events.append(Event.from_json(json.loads(raw)))
            except ValueError as exc:  # a damaged line costs one event, never the run
                logger.warning("skipped a progress line of %s: %s", path.name, exc)
        return events


class Poller:
    """A daemon thread that hands the workers' events to ``handle`` every ``interval`` seconds."""

    def __init__(self, reader: FolderReader, handle: Callable[[Event], None], interval: float = 0.3) -> None:
        self.reader, self.handle, self.interval = reader, handle, interval
        self._stop = threading.Event()
        self._reading = threading.Lock()  # drain() is also called from the main thread
        self._thread = threading.Thread(target=self._run, name="privleak-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.drain()

    def drain(self) -> None:
        """Hand on every complete event written so far (in order, whichever thread calls)."""
        with self._reading:
            for event in self.reader.read():
                try:
                    self.handle(event)
                except Exception:  # noqa: BLE001 - the display must not stop the run
                    logger.exception("progress display failed on %r", event)

    def stop(self) -> None:
        """Stop the thread, then hand on what is left (call once the workers are done)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.drain()
