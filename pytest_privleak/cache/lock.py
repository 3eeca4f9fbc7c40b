"""The cross-process lock of one cache entry: a timeout, a named holder, and a message while waiting.

The lock is an OS file lock (``filelock``: ``flock`` on Unix, ``msvcrt`` on
Windows). The kernel releases it when its holder exits, however it exits, so
a killed worker never leaves a lock behind; only a holder that is still
running (hung, stopped, or training something long) can block the others.
To make that visible, the holder writes ``<key>.lock.holder.json`` (PID, host,
start time, command line) next to the lock file; a waiter prints one line
every ``message_every`` seconds naming that holder and how long it has held
the lock, and gives up after ``timeout`` seconds with :class:`CacheLockTimeout`
naming the holder and the fix.

A holder on this host that is stopped (``kill -STOP``, Ctrl-Z: state ``T``
in ``/proc/<pid>/stat``) would hold the lock until resumed, so a waiter that
sees it stopped for :data:`STOPPED_GRACE` seconds gives up at once with
:class:`CacheLockHolderStopped` naming the PID and the fix, instead of
waiting out the timeout. The timeout of a run is ``--privleak-lock-timeout``
(ini ``privleak_lock_timeout``; :func:`configure_lock_timeout`), 30 minutes
by default.

Never delete a ``.lock`` file to "break" a lock: waiters that opened the old
file and waiters that create a new one would then hold two locks at once.
Stop the holder instead; its lock goes with it.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..progress import events as progress
from ..atomic import pid_alive, write_text_atomic

logger = logging.getLogger("pytest_privleak.cache")

#: Default wait for an entry's lock: long enough for another worker to train a CI-sized target.
DEFAULT_LOCK_TIMEOUT = 30 * 60.0
#: Default interval between "still waiting" lines.
DEFAULT_MESSAGE_EVERY = 30.0
#: Seconds a holder on this host must be seen stopped before a waiter gives up (a Ctrl-Z resumed at once passes).
STOPPED_GRACE = 3.0
#: Seconds between a waiter's looks at the lock (and at whether its holder is stopped).
POLL_STEP = 0.5
#: The option and ini key that set the run's lock timeout.
LOCK_TIMEOUT_OPTION = "--privleak-lock-timeout"


class CacheLockTimeout(TimeoutError):
    """Waiting for a cache entry's lock took longer than the cache's ``lock_timeout``."""


class CacheLockHolderStopped(CacheLockTimeout):
    """The lock's holder runs on this host but is stopped (state T), so it would hold the lock until resumed."""


class _Configured:
    """The default of ``lock_timeout`` arguments: the run's ``--privleak-lock-timeout``, else 30 minutes."""

    def __repr__(self) -> str:
        return "<the run's --privleak-lock-timeout>"


CONFIGURED = _Configured()
_run_timeout: float | None = DEFAULT_LOCK_TIMEOUT


def configure_lock_timeout(seconds: float | None) -> float | None:
    """Set the lock timeout that ``lock_timeout=CONFIGURED`` means (None: wait without limit); returns the old."""
    global _run_timeout
    previous, _run_timeout = _run_timeout, check_seconds("lock timeout", seconds, allow_none=True)
    return previous


def configured_lock_timeout(value) -> float | None:
    """``value`` itself, or the run's timeout when it is :data:`CONFIGURED`."""
    return _run_timeout if value is CONFIGURED else value


def parse_lock_timeout(text: object, *, source: str = LOCK_TIMEOUT_OPTION) -> float | None:
    """A lock timeout option or ini value: seconds > 0, or ``none`` (no limit); else ``ValueError`` with the fix."""
    raw = str(text).strip().lower()
    if raw in ("none", "inf", "off"):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{source}={text!r} is not a number of seconds > 0; fix: e.g. {LOCK_TIMEOUT_OPTION}=300 "
                         f"(give up after 5 minutes waiting for another process's cache lock), or "
                         f"{LOCK_TIMEOUT_OPTION}=none to wait without limit (default {DEFAULT_LOCK_TIMEOUT:g} s)")
    return value


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` on this host from ``/proc/<pid>/stat`` (``T``: stopped), or None if unknown."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None
    end = text.rfind(")")  # the command name may hold spaces and parentheses; the state follows the last ')'
    rest = text[end + 1:].split() if end >= 0 else []
    return rest[0] if rest else None


def is_stopped(pid: int) -> bool:
    """Whether ``pid`` on this host is stopped by a signal or a tracer (state ``T`` or ``t``)."""
    return process_state(pid) in ("T", "t")


def check_seconds(name: str, value, *, allow_none: bool) -> float | None:
    """``value`` as a float of seconds > 0 (or None when allowed), else ``ValueError`` naming ``name``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        also = " or None to wait without limit" if allow_none else ""
        raise ValueError(f"{name}={value!r} must be a finite number of seconds > 0{also}")
    return float(value)


@dataclass(frozen=True)
class Holder:
    """Who holds an entry's lock, as its holder recorded it."""

    pid: int
    host: str
    since: float
    command: str

    @classmethod
    def mine(cls) -> "Holder":
        return cls(os.getpid(), socket.gethostname(), time.time(), " ".join(sys.argv)[:200])

    @classmethod
    def read(cls, path: Path) -> "Holder | None":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(int(data["pid"]), str(data["host"]), float(data["since"]), str(data.get("command", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path) -> None:
        write_text_atomic(path, json.dumps({"pid": self.pid, "host": self.host, "since": self.since,
                                            "command": self.command}))

    @property
    def on_this_host(self) -> bool:
        return self.host == socket.gethostname()

    def describe(self) -> str:
        started = time.strftime("%H:%M:%S UTC", time.gmtime(self.since))
        where = "this host" if self.on_this_host else f"host {self.host}"
        state = "" if not self.on_this_host or pid_alive(self.pid) else ", which is no longer running"
        return (f"PID {self.pid} on {where}{state}, holding it since {started} "
                f"({time.time() - self.since:.0f} s), command {self.command!r}")

    def remedy(self, lock_path: Path) -> str:
        if self.on_this_host and not pid_alive(self.pid):
            return (f"the recorded holder PID {self.pid} has exited (the kernel freed its lock), so the lock is held "
                    f"by a process that did not record itself (a worker running an older pytest-privleak, or one "
                    f"that took the lock a moment ago): find it with `fuser {lock_path}`")
        where = "" if self.on_this_host else f" on host {self.host}"
        return (f"if PID {self.pid}{where} is hung or stopped, end it (`kill {self.pid}`); the lock is released "
                f"when its holder exits")


def _holder_text(holder_path: Path) -> str:
    holder = Holder.read(holder_path)
    return holder.describe() if holder else "a process that has not recorded itself (it may have just started)"


def _remedy(holder_path: Path, lock_path: Path) -> str:
    holder = Holder.read(holder_path)
    if holder is None:
        return f"find the holder with `fuser {lock_path}` and stop it if it is hung"
    return holder.remedy(lock_path)


def _holder_short(holder_path: Path) -> str:
    holder = Holder.read(holder_path)
    if holder is None:
        return "a process that has not recorded itself"
    return f"PID {holder.pid} on {'this host' if holder.on_this_host else 'host ' + holder.host}"


def _notify(line: str, *, waited: float, holder: str) -> None:
    """A "still waiting" line: logged, and a progress event (a stderr line outside pytest, live under it)."""
    logger.warning(line)
    progress.emit(progress.WAIT, line=line, seconds=waited, source=f"waiting for the lock held by {holder}")


@contextlib.contextmanager
def hold_lock(lock_path: Path, *, timeout: float | None = DEFAULT_LOCK_TIMEOUT,
              message_every: float = DEFAULT_MESSAGE_EVERY, what: str = "a cache entry") -> Iterator[None]:
    """Hold the file lock at ``lock_path`` for the block, recording this process as its holder.

    While waiting, reports a progress event at once and a line every
    ``message_every`` seconds naming the holder; after ``timeout`` seconds
    (None: never) raises :class:`CacheLockTimeout`.
    ``OSError`` from creating the lock file propagates for the caller to explain.
    """
    holder_path = lock_path.with_name(lock_path.name + ".holder.json")
    timeout = configured_lock_timeout(timeout)
    lock = FileLock(str(lock_path))
    start = time.monotonic()
    last_line = start
    stopped_since: float | None = None
    try:
        lock.acquire(timeout=0)
        acquired = True
    except Timeout:  # say so at once (no stderr line): a live display shows who is being waited for
        acquired = False
        progress.emit(progress.WAIT, seconds=0.0,
                      source=f"waiting for the lock held by {_holder_short(holder_path)}")
    while not acquired:
        waited = time.monotonic() - start
        # wake at least every POLL_STEP (to notice a stopped holder) and every message_every (to say so)
        step = min(POLL_STEP, message_every)
        step = step if timeout is None else min(step, max(timeout - waited, 0.0))
        try:
            lock.acquire(timeout=step, poll_interval=0.05)
            acquired = True
        except Timeout:
            now = time.monotonic()
            waited = now - start
            holder = Holder.read(holder_path)
            stopped = holder is not None and holder.on_this_host and is_stopped(holder.pid)
            stopped_since = (stopped_since or now) if stopped else None
            if stopped and now - stopped_since >= STOPPED_GRACE:
                raise CacheLockHolderStopped(
                    f"gave up after {waited:.0f} s waiting for the lock of {what} ({lock_path}): its holder, PID "
                    f"{holder.pid} on this host (command {holder.command!r}), is stopped (state T in "
                    f"/proc/{holder.pid}/stat: kill -STOP or Ctrl-Z) and keeps the lock until it runs again. Fix: "
                    f"resume it (`kill -CONT {holder.pid}`, or `fg` in its shell) or end it (`kill {holder.pid}`; "
                    "`kill -CONT` first if it ignores the signal while stopped), then rerun. Do not delete the "
                    ".lock file: waiters would then hold two locks at once.") from None
            if timeout is not None and waited >= timeout:
                raise CacheLockTimeout(
                    f"gave up after {waited:.0f} s waiting for the lock of {what} ({lock_path}): it is held by "
                    f"{_holder_text(holder_path)}. Fix: {_remedy(holder_path, lock_path)}; if that process is "
                    f"just training a large target, wait for it or raise {LOCK_TIMEOUT_OPTION} (ini "
                    "privleak_lock_timeout, or TargetCache(lock_timeout=...)). Do not delete the .lock file: "
                    "waiters would then hold two locks at once.") from None
            if now - last_line < message_every:
                continue
            last_line = now
            _notify(f"[privleak] waiting {waited:.0f} s for the lock of {what} ({lock_path}), held by "
                    f"{_holder_text(holder_path)}", waited=waited, holder=_holder_short(holder_path))
    try:
        with contextlib.suppress(OSError):   # the record is for humans; a lock without it still excludes
            Holder.mine().write(holder_path)
        yield
    finally:
        with contextlib.suppress(OSError):
            if (Holder.read(holder_path) or Holder(-1, "", 0, "")).pid == os.getpid():
                holder_path.unlink()
        lock.release()
