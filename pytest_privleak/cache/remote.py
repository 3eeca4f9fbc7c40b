"""The target cache on shared storage (any fsspec URL), so that hosts and CI runners train each target once.

Layout under the URL, per content hash ``KEY``::

    KEY/v-<uuid>/...        the entry's files, written once, never changed
    KEY/published.json      the commit marker: the entry's manifest and which v-<uuid> it describes
    KEY.lease.json          while a host builds KEY: who, since when, until when (cache_lease)

Publishing uploads the files into a fresh ``v-<uuid>`` folder, then writes
``published.json`` in one atomic replace (:func:`~pytest_privleak.cache.lease.put_atomic`).
Readers look only at the marker: before it exists the entry is absent, after
it they see one complete version. An upload cut short leaves an unreferenced
``v-<uuid>`` folder and no marker, which readers never see.

Each host keeps a local mirror (a :class:`~pytest_privleak.cache.targets.TargetCache`
folder, :func:`~pytest_privleak.cache.url.default_mirror_dir`): a remote entry
is downloaded into a staging folder there, checked exactly as a local entry
is (:func:`~pytest_privleak.cache.manifest.entry_problems`: sha256 of every
file, the key, the optional HMAC; then the loader's own checks of the content
hash and finite weights), published in the mirror with one rename, and
loaded. An entry that fails is refused like a local one: warned about and
retrained (its marker replaced) or, with ``on_mismatch="error"``, an error
naming the URL. Processes on one host share the mirror's file lock; hosts
share the lease.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from pathlib import Path, PurePosixPath
from typing import Callable, TypeVar

from ..progress import events as progress
from ..atomic import publish_dir_atomic
from .targets import CacheDirError, CacheEntryWarning, TargetCache, _host_tag
from .lease import DEFAULT_LEASE_TTL, Lease, put_atomic, read_bytes
from .lock import CONFIGURED, DEFAULT_MESSAGE_EVERY, check_seconds, configured_lock_timeout
from .manifest import MANIFEST, CacheEntryError, entry_problems, read_manifest, warn_unsigned
from .url import OPTION, check_url, default_mirror_dir

__all__ = ["MARKER", "RemoteTargetCache"]

T = TypeVar("T")
#: The commit marker of a remote entry.
MARKER = "published.json"
_VERSION = re.compile(r"v-[0-9a-f]{32}")
_SCHEMA = "pytest-privleak/cache-entry"


def _safe_name(name: object) -> bool:
    """A manifest file name that stays inside the entry (no absolute path, '..', '.', or backslash)."""
    if not isinstance(name, str) or not name or "\\" in name or name.startswith("/"):
        return False
    parts = PurePosixPath(name).parts
    return all(p not in ("", ".", "..") for p in parts) and name != MANIFEST


def _say(line: str) -> None:
    progress.emit(progress.NOTE, line=line)


#: Pauses (seconds) between attempts to open the remote filesystem before giving up.
OPEN_RETRY_PAUSES = (0.5, 1.0, 2.0)

class RemoteTargetCache:
    """Trained targets under an fsspec URL, shared by every host that reaches it; see the module docstring.

    ``url``: the cache location (checked by :func:`~pytest_privleak.cache.url.check_url`);
    ``mirror_dir``: this host's local copy (default :func:`~pytest_privleak.cache.url.default_mirror_dir`);
    ``host``: the name this host shows in leases and messages (default its hostname);
    ``lease_ttl``: seconds a lease outlives its last heartbeat; ``lease_poll``:
    seconds between a waiter's looks; ``lock_timeout``, ``lock_message_every``
    and ``on_mismatch`` as for :class:`~pytest_privleak.cache.targets.TargetCache`;
    ``storage_options``: keyword arguments for the fsspec filesystem
    (credentials, endpoint, port).
    """

    def __init__(self, url: str, *, mirror_dir: str | os.PathLike | None = None, host: str | None = None,
                 lease_ttl: float = DEFAULT_LEASE_TTL, lease_poll: float = 0.5,
                 lock_timeout: float | None = CONFIGURED, lock_message_every: float = DEFAULT_MESSAGE_EVERY,
                 on_mismatch: str = "retrain", storage_options: dict | None = None) -> None:
        if not isinstance(url, str):
            raise TypeError(f"RemoteTargetCache(url={url!r}): url must be a str such as 's3://bucket/prefix'")
        self.url = check_url(url.strip(), option="RemoteTargetCache(url)")
        if host is not None and (not isinstance(host, str) or not host.strip()):
            raise ValueError(f"RemoteTargetCache(host={host!r}) must be a non-empty str naming this host, or None "
                             "for its hostname")
        self.host = host or socket.gethostname()
        self.lease_ttl = check_seconds("RemoteTargetCache(lease_ttl)", lease_ttl, allow_none=False)
        self.lease_poll = check_seconds("RemoteTargetCache(lease_poll)", lease_poll, allow_none=False)
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(f"RemoteTargetCache(storage_options={storage_options!r}) must be a dict of fsspec "
                            "filesystem arguments, or None")
        self.storage_options = dict(storage_options or {})
        self.local = TargetCache(mirror_dir if mirror_dir is not None else default_mirror_dir(self.url),
                                 lock_timeout=lock_timeout, lock_message_every=lock_message_every,
                                 on_mismatch=on_mismatch)
        self.on_mismatch = on_mismatch
        self._fs = None
        self._remote_root = ""

    # ------------------------------------------------------------------ storage

    @property
    def root(self) -> Path:
        """This host's mirror folder (the remote location is :attr:`url`)."""
        return self.local.root

    @property
    def fs(self):
        """The fsspec filesystem, opened (and, for sftp, connected) on first use."""
        if self._fs is None:
            import fsspec

            for attempt, pause in enumerate((*OPEN_RETRY_PAUSES, None), start=1):
                try:
                    fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
                    fs.makedirs(root, exist_ok=True)
                    break
                except Exception as exc:   # noqa: BLE001 - backends raise anything from socket to auth errors
                    if pause is not None:  # a dropped connection (e.g. sshd's MaxStartups) is worth another try
                        time.sleep(pause)
                        continue
                    raise CacheDirError(
                        f"cannot open the target cache {self.url} after {attempt} attempts "
                        f"({type(exc).__name__}: {exc}). Fix: check that the "
                        f"host or bucket is reachable and that the credentials allow writing there, or point "
                        f"{OPTION} at a local folder", errno_=getattr(exc, "errno", None), filename=self.url) from exc
            self._fs, self._remote_root = fs, root.rstrip("/")
        return self._fs

    def _remote(self, *parts: str) -> str:
        self.fs  # noqa: B018 - opens the filesystem, which sets the root
        return "/".join([self._remote_root, *parts])

    def _url(self, *parts: str) -> str:
        return "/".join([self.url.rstrip("/"), *parts])

    @contextlib.contextmanager
    def _explained(self, operation: str):
        try:
            yield
        except (CacheDirError, CacheEntryError, FileNotFoundError):
            raise
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise CacheDirError(f"cannot {operation} (target cache {self.url}): {exc}. Fix: check that the "
                                f"storage is reachable and writable by these credentials, or point {OPTION} at a "
                                "local folder", errno_=exc.errno, filename=self.url) from exc

    # ------------------------------------------------------------------ the TargetCache surface

    def entry(self, key: str) -> Path:
        """The entry's folder in this host's mirror (the key is checked as by :class:`TargetCache`)."""
        return self.local.entry(key)

    def has(self, key: str) -> bool:
        """Whether the remote cache has published an entry for ``key``."""
        self.entry(key)
        with self._explained(f"look up the entry {key}"):
            return self.fs.exists(self._remote(key, MARKER))

    def problems(self, key: str) -> list[str]:
        """Problems of the mirrored copy of ``key`` (see :meth:`TargetCache.problems`)."""
        return self.local.problems(key)

    def read_meta(self, key: str) -> dict:
        return self.local.read_meta(key)

    def open(self) -> None:
        self.local.open()
        with self._explained("create the cache location"):
            self.fs  # noqa: B018

    # ------------------------------------------------------------------ build / load

    def get_or_build(self, key: str, build: Callable[[], T], save: Callable[[T, Path], dict],
                     load: Callable[[Path], T]) -> tuple[T, bool]:
        """Return ``(object, loaded_from_cache)``: from the mirror, else from the URL, else built here and published.

        One process per host handles ``key`` at a time (the mirror's file
        lock); one host at a time builds it (the lease). A waiter that finds
        the entry published when it gets the lease downloads it instead.
        """
        self.entry(key)
        self.open()
        with self.local._locked(key):
            found = self._load_mirrored(key, load)
            if found is not None:
                warn_unsigned(f"cache entry {key[:16]} (mirror of {self.url})")
                return found[0], True
            found, refused = self._fetch(key, load)
            if found is not None:
                warn_unsigned(f"cache entry {key[:16]} (downloaded from {self.url})")
                return found[0], True
            lease = Lease(self.fs, self._remote(f"{key}.lease.json"), host=self.host, ttl=self.lease_ttl,
                          poll=self.lease_poll, timeout=configured_lock_timeout(self.local.lock_timeout),
                          message_every=self.local.lock_message_every, what=f"cache entry {key[:16]}",
                          where=self.url)
            with contextlib.ExitStack() as stack:
                with self._explained(f"take the lease of the entry {key}"):
                    stack.enter_context(lease)
                marker = read_bytes(self.fs, self._remote(key, MARKER))
                if marker is not None and marker != refused:   # published while we waited
                    found, refused = self._fetch(key, load)
                    if found is not None:
                        warn_unsigned(f"cache entry {key[:16]} (downloaded from {self.url})")
                        return found[0], True
                self.local.clean_stale_staging()
                obj = build()
                self.local._publish(key, obj, save)
                try:
                    self._upload(key, replaced=refused)
                except BaseException:   # keep host and URL in step: a copy only here would never be shared
                    shutil.rmtree(self.local.entry(key), ignore_errors=True)
                    raise
                return obj, False

    def _load_mirrored(self, key: str, load: Callable[[Path], T]) -> tuple[T] | None:
        """``(obj,)`` from a genuine mirrored copy; None when there is none (a damaged one is discarded)."""
        folder = self.local.entry(key)
        if not folder.exists():
            return None
        try:
            problems = self.local.problems(key)
            if problems:
                raise CacheEntryError("; ".join(problems))
            return (load(folder),)
        except CacheEntryError as exc:
            self.local._discard(folder, exc)
            return None

    def _fetch(self, key: str, load: Callable[[Path], T]) -> tuple[tuple[T] | None, bytes | None]:
        """Download, verify, mirror and load the published entry: ``((obj,), None)``, ``(None, None)`` when
        none is published, or ``(None, marker bytes)`` when it was refused (warned about, or raised)."""
        with self._explained(f"read the entry {key}"):
            raw = read_bytes(self.fs, self._remote(key, MARKER))
        if raw is None:
            return None, None
        staging = self.local.root / f".staging-{key[:16]}-{_host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            marker = self._parse_marker(raw, key)
            folder = staging / key
            folder.mkdir(parents=True)
            with self._explained(f"download the entry {key}"):
                for name in marker["manifest"]["files"]:
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    try:
                        self.fs.get_file(self._remote(key, marker["data"], name), str(folder / name))
                    except FileNotFoundError:
                        raise CacheEntryError(f"file {name} listed in {MARKER} is missing from "
                                              f"{self._url(key, marker['data'])}") from None
            (folder / MANIFEST).write_text(json.dumps(marker["manifest"], indent=2), encoding="utf-8")
            problems = entry_problems(folder, key)
            if problems:
                raise CacheEntryError("; ".join(problems))
            publish_dir_atomic(folder, self.local.entry(key))
            obj = load(self.local.entry(key))
        except CacheEntryError as exc:
            shutil.rmtree(self.local.entry(key), ignore_errors=True)
            self._refuse(key, exc)
            return None, raw
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        who = marker.get("published_by") or {}
        _say(f"[privleak] cache entry {key[:16]}: downloaded from {self.url} (trained by host "
             f"{who.get('host', '?')!r}, PID {who.get('pid', '?')})")
        return (obj,), None

    @staticmethod
    def _parse_marker(raw: bytes, key: str) -> dict:
        try:
            marker = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CacheEntryError(f"{MARKER} is not JSON ({exc})") from None
        if not isinstance(marker, dict) or marker.get("schema") != _SCHEMA:
            raise CacheEntryError(f"{MARKER} is not a pytest-privleak entry marker (schema {_SCHEMA!r})")
        if marker.get("key") != key:
            raise CacheEntryError(f"{MARKER} records key {marker.get('key')!r}, not the key {key!r} computed for "
                                  "this target (an entry copied from another target, or a forged content hash)")
        if not isinstance(marker.get("data"), str) or not _VERSION.fullmatch(marker["data"]):
            raise CacheEntryError(f"{MARKER} names no valid data folder (v-<32 hex digits>): {marker.get('data')!r}")
        manifest = marker.get("manifest")
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, dict) or not files:
            raise CacheEntryError(f"{MARKER} records no file digests")
        unsafe = [name for name in files if not _safe_name(name)]
        if unsafe:
            raise CacheEntryError(f"{MARKER} lists file names outside the entry: {unsafe[:3]!r}")
        return marker

    def _refuse(self, key: str, exc: CacheEntryError) -> None:
        where = self._url(key)
        what = (f"cache entry {where} is not what was built for its key: {exc}. pytest-privleak never attacks "
                "such an entry")
        if self.on_mismatch == "error":
            raise CacheEntryError(f"{what}. Fix: delete {self._url(key, MARKER)} (without it the entry is absent) "
                                  "and rerun to retrain and republish it, or use on_mismatch='retrain' to do that "
                                  "automatically") from exc
        message = f"{what}; the target is being retrained and the entry republished"
        warnings.warn(message, CacheEntryWarning, stacklevel=4)
        _say(f"[privleak] {message}")

    def _upload(self, key: str, *, replaced: bytes | None) -> None:
        """Copy the mirrored entry to a fresh ``v-<uuid>`` folder, then point the marker at it."""
        folder = self.local.entry(key)
        manifest = read_manifest(folder)
        version = f"v-{uuid.uuid4().hex}"
        with self._explained(f"publish the entry {key}"):
            for name in manifest["files"]:
                target = self._remote(key, version, name)
                self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                self.fs.put_file(str(folder / name), target)
            marker = {"schema": _SCHEMA, "version": 1, "key": key, "data": version, "manifest": manifest,
                      "published_by": {"host": self.host, "pid": os.getpid(), "at": time.time()}}
            put_atomic(self.fs, self._remote(key, MARKER), json.dumps(marker, indent=2).encode("utf-8"))
        _say(f"[privleak] cache entry {key[:16]}: trained on host {self.host!r} and published to {self.url}")
        old = self._old_version(replaced)
        if old and old != version:
            with contextlib.suppress(OSError):
                self.fs.rm(self._remote(key, old), recursive=True)

    @staticmethod
    def _old_version(raw: bytes | None) -> str | None:
        with contextlib.suppress(Exception):
            data = json.loads(raw.decode("utf-8"))["data"]
            if _VERSION.fullmatch(data):
                return data
        return None
