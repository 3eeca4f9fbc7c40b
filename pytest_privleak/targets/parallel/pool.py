"""A pool of warm Python processes that train own models' seeds while this process trains some too.

A child (``python -c`` :data:`CHILD`) imports torch once, says it is ready,
then runs the jobs (:mod:`.jobs`) sent to it one a line on stdin, sending its
progress events and each job's end back on stdout; it lives until this
process ends. :func:`run_pool` hands children jobs from the end of the list
while this process trains from the front.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from ...progress import events as progress
from .jobs import OwnTraining, apply_torch_settings, from_job, note

__all__ = ["CHILD", "LAST", "START_AFTER", "run_pool", "shutdown", "main"]


def _reemit(data: Any) -> None:
    try:
        event = progress.Event.from_json(data)
    except (ValueError, TypeError):
        return
    fields = {k: v for k, v in event.to_json().items() if k not in ("kind", "target", "line", "worker", "host")}
    progress.emit(event.kind, event.target, line=event.line, **fields)


#: What a child process runs: :func:`main` of this module (``-m`` would import this module twice).
CHILD = "import sys; from pytest_privleak.targets.parallel.pool import main; sys.exit(main())"


class _Child:
    """A Python process that runs the jobs sent to it one at a time, kept for the rest of this process's life
    (importing torch and the project costs it seconds once, 24 s on a loaded 2-core machine)."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.ready, self.idle = threading.Event(), threading.Event()
        self.result: dict | None = None
        self.reader = threading.Thread(target=self._read, name="privleak-train-child", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if "event" in message:
                _reemit(message["event"])
            elif "ready" in message:
                self.ready.set()
                self.idle.set()
            elif "done" in message:
                self.result = message
                self.idle.set()
        self.ready.set()                       # it ended: nobody waits for it any longer
        self.idle.set()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, job: dict) -> None:
        self.idle.clear()
        self.result = None
        self.process.stdin.write(json.dumps(dict(job, sys_path=list(sys.path))) + "\n")
        self.process.stdin.flush()

    def last_error(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {self.process.poll()}"

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=5)
        self.process.stdout.close()
        self.log.close()


_children: list[_Child] = []


def _children_for(count: int) -> list[_Child]:
    """``count`` live children, started when missing (they start while this process trains)."""
    _children[:] = [c for c in _children if c.alive]
    while len(_children) < count:
        _children.append(_Child())
    return _children[:count]


def shutdown() -> None:
    """End the children (at exit; the plugin calls it when the session ends)."""
    while _children:
        _children.pop().close()


atexit.register(shutdown)


class _Pool:
    """Children that take jobs from the end of a shared deque, each once it is ready, while the caller runs jobs
    from the front in this process; a job a child could not run is listed in ``failed`` and left to the caller's
    own ``train_own_model`` call, which trains it here."""

    def __init__(self, jobs: "collections.deque", children: list[_Child]) -> None:
        self.jobs, self.children = jobs, children
        self.failed: list[str] = []
        self.elsewhere: list[str] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._work, name="privleak-train-pool", daemon=True)

    def take(self, from_end: bool):
        with self.lock:
            if not self.jobs or self.stopped.is_set():
                return None
            return self.jobs.pop() if from_end else self.jobs.popleft()

    def _work(self) -> None:
        busy: dict[_Child, Any] = {}
        while True:
            for child in self.children:
                if child in busy and child.idle.is_set():
                    training, job = busy.pop(child)
                    if (child.result or {}).get("ok"):
                        self.elsewhere.append(training.label)
                    else:
                        why = (child.result or {}).get("error") or child.last_error()
                        self.failed.append(f"{training.label}: {why}")
                if child not in busy and child.ready.is_set() and child.alive and not self.stopped.is_set():
                    item = self.take(from_end=True)
                    if item is not None:
                        busy[child] = item
                        child.send(item[1])
            with self.lock:
                if not busy and (not self.jobs or self.stopped.is_set()
                                 or not any(c.alive for c in self.children)):
                    return
            time.sleep(0.05)


#: How the last :func:`prefetch` spread its trainings: run in this process, and by other processes (tests, benches).
LAST = {"here": 0, "elsewhere": 0}


#: A training shorter than this (seconds) is not worth starting a process for (it imports torch first: about 3 s
#: of CPU, 24 s of wall time on a loaded 2-core machine); children already started are used whatever it takes.
START_AFTER = 2.0


def run_pool(trainings: list[OwnTraining], jobs: list[dict], processes: int,
             here: Callable[[OwnTraining], None]) -> None:
    """Run ``trainings`` (with their ``jobs``) over this process (``here``) and ``processes - 1`` children."""
    LAST.update(here=0, elsewhere=0)
    pending = collections.deque(zip(trainings, jobs))
    if not any(c.alive for c in _children):
        began = time.perf_counter()
        here(pending.popleft()[0])          # the first one here, timed: is a new process worth its start?
        LAST["here"] += 1
        if time.perf_counter() - began < START_AFTER or len(pending) < 2:
            for training, _ in pending:
                here(training)
                LAST["here"] += 1
            return
    pool = _Pool(pending, _children_for(processes - 1))
    pool.thread.start()
    try:
        while True:
            item = pool.take(from_end=False)
            if item is None:
                if not pool.thread.is_alive():
                    break
                pool.thread.join(0.1)
                continue
            here(item[0])                   # this process trains from the front meanwhile
            LAST["here"] += 1
    except BaseException:
        pool.stopped.set()
        raise
    pool.thread.join()
    LAST["elsewhere"] = len(pool.elsewhere)
    for failure in pool.failed:
        note(f"a training in another process failed; it trains here instead ({failure})")


def main() -> int:
    """Run the jobs sent on stdin, one JSON object a line, until it closes (``python -c`` :data:`CHILD`).

    Writes ``{"ready": true}`` once imported, each progress event as ``{"event": ...}`` and each job's end as
    ``{"done": key, "ok": ..., "error": ...}`` on stdout, one a line; whatever else is printed goes to stderr.
    """
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                           # what a training prints goes to stderr, never among the messages
    sys.stdout = sys.stderr
    import torch  # noqa: F401  (imported before saying ready: the expensive part of starting)

    from .. import own_model  # noqa: F401

    def say(message: dict) -> None:
        out.write(json.dumps(message) + "\n")

    progress.set_sink(lambda event: say({"event": event.to_json()}))
    say({"ready": True})
    for line in sys.stdin:
        job = json.loads(line)
        for entry in reversed(job.pop("sys_path", [])):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        try:
            apply_torch_settings(job["torch"])      # the parent's, as a conftest may have set them
            from_job(job).run()
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which trains it again itself
            say({"done": job.get("key"), "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        else:
            say({"done": job.get("key"), "ok": True})
    return 0
