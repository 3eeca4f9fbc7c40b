"""Content-addressed cache of trained targets, shared by tests and xdist workers.

An entry is a folder named by the SHA-256 of everything that determines the
trained weights (data, config, seed, code version). It is built in a staging
folder and published with one rename, under a cross-process file lock, so two
workers asking for the same target train it once. Weights are stored with
safetensors and metadata as JSON: nothing is ever unpickled.

An entry is loaded only when it is exactly what was built for the key asked
for (:mod:`pytest_privleak.cache.manifest`: sha256 of every file and the key in
``meta.json``). An entry that is not (edited, damaged, copied from another
key) is never attacked: by default it is discarded and the target retrained,
with a :class:`CacheEntryWarning` naming the entry and what did not match;
``TargetCache(on_mismatch="error")`` raises :class:`CacheEntryError` instead,
for teams that want to investigate before anything is deleted. Retraining is
the default because the gate then judges the genuine model either way, and a
damaged disk or a half-restored CI cache should not stop a merge.

The lock (:mod:`pytest_privleak.cache.lock`) has a timeout and names its
holder; a folder that cannot be written gives :class:`CacheDirError` naming
the folder, the operation and the fix; staging folders left by a killed
publish are removed the first time a cache object touches the folder.

This is the cache of a local folder, the default. A cache shared by several
hosts lives at a URL (``--privleak-cache-dir=s3://...``):
:mod:`pytest_privleak.cache.url` picks the backend and
:mod:`pytest_privleak.cache.remote` serves it with the same content
addressing and checks, through a local mirror of this class.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..progress import events as progress
from ..atomic import pid_alive, publish_dir_atomic, write_text_atomic
from .lock import CONFIGURED, DEFAULT_MESSAGE_EVERY, CacheLockTimeout, check_seconds, hold_lock
from .manifest import MANIFEST, CacheEntryError, build_manifest, entry_problems, warn_unsigned

__all__ = ["CacheDirError", "CacheEntryError", "CacheEntryWarning", "CacheLockTimeout", "DEFAULT_CACHE_DIR",
           "TargetCache", "content_hash"]

T = TypeVar("T")
DEFAULT_CACHE_DIR = ".privleak-cache"
#: A staging folder older than this is left over from a killed publish (a publish takes seconds).
DEFAULT_STAGING_MAX_AGE = 3600.0
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_STAGING = re.compile(r"\.staging-[0-9A-Za-z_-]*?-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}")
_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
logger = logging.getLogger("pytest_privleak.cache")


class CacheDirError(OSError):
    """The cache folder cannot be created, written or cleaned; the message names the folder, operation and fix.

    An ``OSError`` with the original ``errno`` and ``filename``, so callers that handle ``OSError`` still do.
    """

    def __init__(self, message: str, *, errno_: int | None = None, filename: str | None = None) -> None:
        super().__init__(message)
        self.errno, self.filename = errno_, filename

    def __str__(self) -> str:
        return str(self.args[0])


class CacheEntryWarning(UserWarning):
    """A cache entry did not match what was built for its key and was discarded; its target was retrained."""


def _canonical(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return _canonical(obj.tolist())
    if hasattr(obj, "content_hash"):
        return {"content_hash": obj.content_hash()}
    raise TypeError(f"cannot hash a {type(obj).__name__} for the target cache; pass plain data "
                    "(str, numbers, lists, dicts, dataclasses)")


def content_hash(obj: Any) -> str:
    """SHA-256 hex digest of the canonical JSON form of ``obj`` (stable across processes)."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def dir_error(folder: Path, operation: str, exc: OSError) -> CacheDirError:
    """A :class:`CacheDirError` for ``exc``, naming ``folder``, ``operation`` and the fix for its errno."""
    elsewhere = "point --privleak-cache-dir (ini: privleak_cache_dir) at another folder"
    if exc.errno in _SPACE:
        fix = f"free space on the disk holding {folder}, or {elsewhere} on a disk with room"
    elif exc.errno in _DENIED:
        fix = f"make {folder} writable by this user (permissions, owner, a read-only mount), or {elsewhere}"
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST):
        fix = f"a file stands in the path of the folder {folder}: move it away, or {elsewhere}"
    else:
        fix = f"check that {folder} is a writable folder with free space, or {elsewhere}"
    return CacheDirError(f"cannot {operation} (target cache folder {folder}): {exc.strerror or exc} "
                         f"[{errno.errorcode.get(exc.errno, exc.errno)}]. Fix: {fix}",
                         errno_=exc.errno, filename=exc.filename)


@contextlib.contextmanager
def _explained(folder: Path, operation: str) -> Iterator[None]:
    """Turn a raw ``OSError`` of the block into a :class:`CacheDirError`."""
    try:
        yield
    except CacheDirError:
        raise
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            raise
        raise dir_error(folder, operation, exc) from exc


class TargetCache:
    """Folder of trained targets keyed by content hash; see the module docstring.

    ``lock_timeout``: seconds to wait for another process's lock on an entry
    (None: no limit; default: the run's ``--privleak-lock-timeout``, else 30 minutes); ``lock_message_every``: seconds between "still waiting"
    lines; ``on_mismatch``: ``"retrain"`` (warn, discard, rebuild) or
    ``"error"`` (raise :class:`CacheEntryError`) for an entry that is not what
    was built for its key; ``staging_max_age``: seconds after which a staging
    folder whose creator cannot be checked is removed as left over.

    A folder this process cannot write still serves the entries it holds
    (verified, without a lock: nobody can change them); anything it would
    have to build or retrain there is a :class:`CacheDirError`.
    """

    def __init__(self, root: str | os.PathLike = DEFAULT_CACHE_DIR, *,
                 lock_timeout: float | None = CONFIGURED, lock_message_every: float = DEFAULT_MESSAGE_EVERY,
                 on_mismatch: str = "retrain", staging_max_age: float = DEFAULT_STAGING_MAX_AGE) -> None:
        if not isinstance(root, (str, os.PathLike)) or not str(root):
            raise TypeError(f"TargetCache(root={root!r}): root must be a non-empty folder path (str or Path)")
        if on_mismatch not in ("retrain", "error"):
            raise ValueError(f"TargetCache(on_mismatch={on_mismatch!r}) must be 'retrain' (warn, discard and "
                             "retrain) or 'error' (raise CacheEntryError)")
        self.root = Path(root)
        self.lock_timeout = lock_timeout if lock_timeout is CONFIGURED else check_seconds(
            "TargetCache(lock_timeout)", lock_timeout, allow_none=True)
        self.lock_message_every = check_seconds("TargetCache(lock_message_every)", lock_message_every,
                                                allow_none=False)
        self.staging_max_age = check_seconds("TargetCache(staging_max_age)", staging_max_age, allow_none=False)
        self.on_mismatch = on_mismatch
        self._opened = False

    # ------------------------------------------------------------------ paths

    def entry(self, key: str) -> Path:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"cache key {key!r} must be 1-128 letters, digits, '-' or '_' starting with a letter "
                             "or digit (a content hash); it names a folder, so no '/', '..' or leading '.'")
        return self.root / key

    def has(self, key: str) -> bool:
        """Whether an entry for ``key`` is present (not whether it is genuine: see :meth:`problems`)."""
        return (self.entry(key) / MANIFEST).is_file()

    def problems(self, key: str) -> list[str]:
        """Every way the entry for ``key`` departs from what was built for it (empty: genuine)."""
        return entry_problems(self.entry(key), key)

    # ------------------------------------------------------------------ build / load

    def get_or_build(
        self,
        key: str,
        build: Callable[[], T],
        save: Callable[[T, Path], dict],
        load: Callable[[Path], T],
    ) -> tuple[T, bool]:
        """Return ``(object, loaded_from_cache)``; build and publish it under a lock when absent.

        ``save(obj, folder)`` writes the object's files and returns JSON-safe
        metadata. The entry is verified before ``load`` runs; ``load`` may
        raise :class:`CacheEntryError` for an entry it cannot rebuild. Either
        way a mismatched entry is handled as ``on_mismatch`` says.
        """
        folder = self.entry(key)
        self.open()
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self._locked(key))
            except CacheDirError as exc:
                if exc.errno not in _DENIED or not folder.exists():
                    raise
                return self._load_read_only(folder, key, load, exc), True
            if folder.exists():
                try:
                    return self._load_verified(folder, key, load), True
                except CacheEntryError as exc:
                    self._discard(folder, exc)
            self.clean_stale_staging()
            obj = build()
            self._publish(key, obj, save)
            return obj, False

    def _load_verified(self, folder: Path, key: str, load: Callable[[Path], T]) -> T:
        """``load(folder)`` once the entry proves itself (:meth:`problems`); warns once if the cache is unsigned."""
        problems = self.problems(key)
        if problems:
            raise CacheEntryError("; ".join(problems))
        loaded = load(folder)
        warn_unsigned(f"cache entry {folder}")
        return loaded

    def _load_read_only(self, folder: Path, key: str, load: Callable[[Path], T], denied: CacheDirError) -> T:
        """Load a verified entry from a cache folder this process cannot write (a prebuilt, read-only cache).

        No lock is needed: nobody can replace an entry in a folder that cannot
        be written. An entry that does not verify cannot be retrained here, so
        it is an error whatever ``on_mismatch`` says.
        """
        try:
            return self._load_verified(folder, key, load)
        except CacheEntryError as exc:
            reason = denied.strerror or errno.errorcode.get(denied.errno, "permission denied")
            raise CacheEntryError(
                f"cache entry {folder} is not what was built for its key: {exc}. pytest-privleak never attacks such "
                f"an entry, and cannot retrain it because the cache folder is not writable ({reason}). Fix: "
                "rebuild the cache where it is writable, or point --privleak-cache-dir at a writable folder") from exc

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        """Hold ``key``'s lock; a lock file that cannot be created is a :class:`CacheDirError`."""
        lock_path = self.root / f"{key}.lock"
        with contextlib.ExitStack() as stack:
            with _explained(self.root, f"create the lock file {lock_path.name}"):
                stack.enter_context(hold_lock(lock_path, timeout=self.lock_timeout,
                                              message_every=self.lock_message_every,
                                              what=f"cache entry {key[:16]}"))
            yield

    def _discard(self, folder: Path, exc: CacheEntryError) -> None:
        what = (f"cache entry {folder} is not what was built for its key: {exc}. pytest-privleak never attacks "
                "such an entry")
        if self.on_mismatch == "error":
            raise CacheEntryError(f"{what}. Fix: delete the folder (rm -rf '{folder}') and rerun to retrain it, or "
                                  "use TargetCache(on_mismatch='retrain') to do that automatically") from exc
        message = f"{what}; it was deleted and the target is being retrained"
        warnings.warn(message, CacheEntryWarning, stacklevel=4)
        logger.warning(message)
        progress.emit(progress.NOTE, line=f"[privleak] {message}")
        with _explained(folder, "delete a damaged entry"):
            shutil.rmtree(folder)

    def _publish(self, key: str, obj: T, save: Callable[[T, Path], dict]) -> None:
        staging = self.root / f".staging-{key[:16]}-{_host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            with _explained(self.root, f"write the entry {key}"):
                staging.mkdir()
                meta = save(obj, staging)
                manifest = build_manifest(staging, key, dict(meta or {}))
                write_text_atomic(staging / MANIFEST, json.dumps(manifest, indent=2))
                publish_dir_atomic(staging, self.entry(key))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def read_meta(self, key: str) -> dict:
        path = self.entry(key) / MANIFEST
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CacheEntryError(f"cache entry {path} is unreadable ({exc}); delete the folder "
                                  f"{self.entry(key)} and rerun to retrain it") from exc

    # ------------------------------------------------------------------ housekeeping

    def open(self) -> None:
        """Create the folder and remove staging folders left by killed publishes (once per cache object;
        :meth:`get_or_build` cleans again before each build)."""
        if self._opened:
            return
        with _explained(self.root, "create the cache folder"):
            self.root.mkdir(parents=True, exist_ok=True)
        self.clean_stale_staging()
        self._opened = True

    def clean_stale_staging(self) -> list[Path]:
        """Delete staging folders whose creator died (same host) or that are older than ``staging_max_age``.

        A staging folder lives only while an entry's files are written, so one
        that outlives its creator, or that hour, was left by a killed publish.
        Returns the folders removed.
        """
        removed = []
        try:
            candidates = [p for p in self.root.iterdir() if p.name.startswith(".staging-") and p.is_dir()]
        except OSError:
            return removed
        for path in candidates:
            if self._staging_is_stale(path):
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists():
                    removed.append(path)
        if removed:
            line = (f"[privleak] removed {len(removed)} staging folder(s) left in {self.root} by an interrupted "
                    f"publish: {', '.join(p.name for p in removed)}")
            logger.warning(line)
            progress.emit(progress.NOTE, line=line)
        return removed

    def _staging_is_stale(self, path: Path) -> bool:
        match = _STAGING.fullmatch(path.name)
        if match and match["host"] == _host_tag() and int(match["pid"]) != os.getpid() \
                and not pid_alive(int(match["pid"])):
            return True
        try:
            return time.time() - path.stat().st_mtime > self.staging_max_age
        except OSError:
            return False

