"""A lease with expiry on shared storage: one host at a time builds a cache entry, and a dead host blocks no one.

A file lock cannot cross hosts (an object store has none, and ``flock`` over
NFS or SFTP is unreliable or absent), so a host that builds an entry writes
``<key>.lease.json`` next to it: a random token, its host, PID, start time
and an expiry. While it builds, a heartbeat thread pushes the expiry forward
every ``ttl / 4`` seconds. A waiter polls: when the holder releases the lease
(deletes it) the waiter takes it; when the expiry has passed (the holder's
host died, lost the network or was stopped) the waiter takes it over. Every
``message_every`` seconds the waiter prints who holds the lease and for how
long; after ``timeout`` seconds it raises :class:`CacheLockTimeout`.

How atomic taking a lease is depends on the backend (see :func:`create_exclusive`):
an exclusive create (``O_EXCL`` on a local or NFS folder, the SFTP ``EXCL``
flag, a conditional put where the backend implements mode ``"xb"``) lets
exactly one host win; elsewhere the lease is written, re-read after a short
settle and kept only if it still holds this host's token, which a close race
can let two hosts pass. Correctness never rests on the lease: entries are
content-addressed and published with one atomic marker write, so two hosts
that both build an entry publish the same thing twice; the lease only saves
the second training. Clocks of the hosts must agree to well within ``ttl``
(NTP does), since a waiter compares the holder's expiry with its own clock.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from ..progress import events as progress
from .lock import CacheLockTimeout, check_seconds

__all__ = ["DEFAULT_LEASE_TTL", "Lease", "LeaseRecord", "create_exclusive", "put_atomic", "read_bytes"]

#: Seconds a lease lives without a heartbeat: a dead host blocks an entry this long at most.
DEFAULT_LEASE_TTL = 120.0


def read_bytes(fs, path: str) -> bytes | None:
    """The object's bytes, or None when it does not exist."""
    try:
        return fs.cat_file(path)
    except FileNotFoundError:
        return None


def put_atomic(fs, path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old bytes or the new, never part.

    Written to a unique staging name beside it, then moved over it: a
    ``rename`` on a local or NFS folder, ``posix-rename`` on SFTP (both
    replace atomically), a server-side copy on object stores (the copy appears
    whole: a single object is never visible half-written).
    """
    staging = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
    fs.pipe_file(staging, data)
    try:
        fs.mv(staging, path)
    except BaseException:
        try:
            fs.rm_file(staging)
        except OSError:
            pass
        raise


def create_exclusive(fs, path: str, data: bytes, *, settle: float = 0.5) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call created it.

    Uses the backend's exclusive create (mode ``"xb"``); a backend that
    refuses the mode gets check, write, wait ``settle`` seconds and re-read
    (not atomic: see the module docstring). Either way the bytes are read back,
    so a create that another writer overwrote in the same instant is not
    taken for a win.
    """
    try:
        handle = fs.open(path, "xb")
    except FileExistsError:
        return False
    except (ValueError, NotImplementedError, TypeError):
        if read_bytes(fs, path) is not None:
            return False
        put_atomic(fs, path, data)
        time.sleep(settle)
    except OSError:
        if fs.exists(path):          # SFTP v3 reports an exclusive create's EEXIST as a plain "Failure"
            return False
        raise
    else:
        try:
            with handle:
                handle.write(data)
        except FileExistsError:      # backends that check on commit (a conditional put on close)
            return False
        except OSError:              # created exclusively, but the handle cannot write (paramiko's "xb"):
            put_atomic(fs, path, data)   # the file is ours; fill it by an atomic replace
    return read_bytes(fs, path) == data


@dataclass(frozen=True)
class LeaseRecord:
    """What a lease says about its holder."""

    token: str
    host: str
    pid: int
    since: float
    expires: float
    command: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode("utf-8")

    @classmethod
    def parse(cls, raw: bytes | None) -> "LeaseRecord | None":
        """The record in ``raw``, or None when it is absent, partial or not a lease."""
        if raw is None:
            return None
        try:
            data = json.loads(raw.decode("utf-8"))
            return cls(str(data["token"]), str(data["host"]), int(data["pid"]), float(data["since"]),
                       float(data["expires"]), str(data.get("command", "")))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        started = time.strftime("%H:%M:%S UTC", time.gmtime(self.since))
        left = self.expires - now
        expiry = f"expires in {left:.0f} s" if left >= 0 else f"expired {-left:.0f} s ago"
        return (f"host {self.host!r}, PID {self.pid}, holding it since {started} ({now - self.since:.0f} s; "
                f"the lease {expiry}), command {self.command!r}")


def _notify(line: str) -> None:
    progress.emit(progress.NOTE, line=line)


class Lease:
    """Hold the lease at ``path`` on ``fs`` for a ``with`` block (see the module docstring).

    ``host``: the name this holder shows (default: this machine's hostname);
    ``ttl``: seconds the lease lives without a heartbeat; ``poll``: seconds
    between a waiter's looks; ``timeout``: seconds to wait in all (None: no
    limit); ``message_every``: seconds between "waiting" lines; ``what`` and
    ``where`` name the entry and the cache in messages.
    """

    def __init__(self, fs, path: str, *, host: str | None = None, ttl: float = DEFAULT_LEASE_TTL,
                 poll: float = 0.5, timeout: float | None = None, message_every: float = 30.0,
                 what: str = "a cache entry", where: str = "") -> None:
        self.fs, self.path = fs, path
        self.host = host or socket.gethostname()
        self.ttl = check_seconds("lease ttl", ttl, allow_none=False)
        self.poll = check_seconds("lease poll", poll, allow_none=False)
        self.timeout = check_seconds("lease timeout", timeout, allow_none=True)
        self.message_every = check_seconds("lease message_every", message_every, allow_none=False)
        self.what, self.where = what, where or path
        self.token = uuid.uuid4().hex
        self.since = 0.0
        self.took_over: LeaseRecord | None = None
        self.lost = False
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ------------------------------------------------------------------ the record

    def _record(self) -> LeaseRecord:
        return LeaseRecord(self.token, self.host, os.getpid(), self.since, time.time() + self.ttl,
                           " ".join(sys.argv)[:200])

    def holder(self) -> LeaseRecord | None:
        """The lease's current record (None when free or unreadable)."""
        return LeaseRecord.parse(read_bytes(self.fs, self.path))

    def _mine(self) -> bool:
        record = self.holder()
        return record is not None and record.token == self.token

    # ------------------------------------------------------------------ acquire / release

    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        start = time.monotonic()
        next_message = self.message_every
        unreadable_since: dict[str, float] = {}
        while True:
            self.since = time.time()
            if create_exclusive(self.fs, self.path, self._record().to_bytes(), settle=min(self.poll, 1.0)):
                break
            raw = read_bytes(self.fs, self.path)
            if raw is None:
                continue                                 # released between our create and our read
            record = LeaseRecord.parse(raw)
            digest = hashlib.sha256(raw).hexdigest()[:16]
            if record is not None:
                expired = time.time() > record.expires
            else:                                        # a holder that died between create and write
                expired = time.monotonic() - unreadable_since.setdefault(digest, time.monotonic()) > self.ttl
            if expired and self._take_over(raw, record, digest):
                break
            waited = time.monotonic() - start
            holder = record.describe() if record else "a holder whose lease is not readable yet"
            if self.timeout is not None and waited >= self.timeout:
                raise CacheLockTimeout(
                    f"gave up after {waited:.0f} s waiting for the lease of {self.what} ({self.where}.lease.json): "
                    f"it is held by {holder}. Fix: if that host is training a large target, wait for it or raise "
                    f"the lock timeout; if it is hung, stop it: its lease expires {self.ttl:.0f} s after its last "
                    "heartbeat and is then taken over") from None
            if waited >= next_message:
                progress.emit(progress.WAIT, seconds=waited,
                              line=f"[privleak] waiting {waited:.0f} s for the lease of {self.what} in {self.where}, "
                                   f"held by {holder}",
                              source=f"waiting for the lease held by host {record.host!r}" if record
                              else "waiting for the lease")
                next_message += self.message_every
            time.sleep(self.poll)
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"privleak-lease-{self.token[:8]}", daemon=True)
        self._beat.start()

    def _take_over(self, raw: bytes, record: LeaseRecord | None, digest: str) -> bool:
        """Replace an expired lease with ours; one waiter wins through an exclusive takeover marker."""
        token = record.token if record is not None else digest
        marker = f"{self.path}.takeover-{token}"
        mine = json.dumps({"host": self.host, "pid": os.getpid(), "at": time.time()}).encode("utf-8")
        if not create_exclusive(self.fs, marker, mine, settle=min(self.poll, 1.0)):
            try:                                         # a taker that died mid-takeover: clear its marker
                at = float(json.loads(read_bytes(self.fs, marker) or b"{}").get("at", time.time()))
                if time.time() - at > self.ttl:
                    self.fs.rm_file(marker)
            except (OSError, ValueError, TypeError, AttributeError):
                pass
            return False
        try:
            if read_bytes(self.fs, self.path) != raw:
                return False                             # renewed or released meanwhile
            self.fs.rm_file(self.path)
            self.since = time.time()
            won = create_exclusive(self.fs, self.path, self._record().to_bytes(), settle=min(self.poll, 1.0))
        finally:
            try:
                self.fs.rm_file(marker)
            except OSError:
                pass
        if won:
            self.took_over = record
            who = record.describe() if record else "a holder whose lease was never readable"
            _notify(f"[privleak] took over the expired lease of {self.what} in {self.where} from {who}")
        return won

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                if not self._mine():
                    self.lost = True
                    _notify(f"[privleak] lost the lease of {self.what} in {self.where} (taken over after it "
                            f"expired: this host missed its heartbeats); finishing the build anyway")
                    return
                put_atomic(self.fs, self.path, self._record().to_bytes())
            except OSError as exc:                       # storage unreachable for a moment: try next beat
                _notify(f"[privleak] could not renew the lease of {self.what} in {self.where}: {exc}")

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        try:
            if self._mine():
                self.fs.rm_file(self.path)
        except OSError:
            pass                                         # it expires on its own
