"""Content-addressed cache: hashing, atomic publish, lock, no pickle."""
import errno
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_privleak.atomic import write_text_atomic
from pytest_privleak.cache.targets import (CacheDirError, CacheEntryError, CacheEntryWarning, CacheLockTimeout,
                                   TargetCache, _host_tag, content_hash)


@dataclass(frozen=True)
class Cfg:
    dropout: float = 0.2
    layers: tuple = (1, 2)


def test_content_hash_is_canonical_and_sensitive():
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": (1, 2), "a": 1})
    assert content_hash(Cfg()) == content_hash(Cfg())
    assert content_hash(Cfg(dropout=0.2)) != content_hash(Cfg(dropout=0.1))
    assert content_hash({"x": 1}) != content_hash({"x": "1"})


def test_content_hash_rejects_opaque_objects():
    with pytest.raises(TypeError, match="cannot hash"):
        content_hash({"f": object()})


def _save(obj, folder: Path) -> dict:
    (folder / "value.json").write_text(json.dumps(obj))
    return {"size": len(obj)}


def _load(folder: Path):
    return json.loads((folder / "value.json").read_text())


def test_build_once_then_load(tmp_path):
    cache = TargetCache(tmp_path)
    calls = []

    def build():
        calls.append(1)
        return [1, 2, 3]

    first, loaded1 = cache.get_or_build("k1", build, _save, _load)
    second, loaded2 = cache.get_or_build("k1", build, _save, _load)
    assert first == second == [1, 2, 3]
    assert (loaded1, loaded2) == (False, True)
    assert calls == [1]
    assert cache.read_meta("k1")["size"] == 3
    assert not list(tmp_path.glob(".staging-*"))


def test_failed_build_leaves_no_entry(tmp_path):
    cache = TargetCache(tmp_path)

    def broken_save(obj, folder):
        (folder / "half.bin").write_bytes(b"x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache.get_or_build("k2", lambda: [1], broken_save, _load)
    assert not cache.has("k2")
    assert not list(tmp_path.glob(".staging-*"))


def _worker(root: str, counter: str) -> None:
    def build():
        with open(counter, "a") as handle:
            handle.write("built\n")
        return [42]

    TargetCache(root).get_or_build("shared", build, _save, _load)


def test_concurrent_processes_build_once(tmp_path):
    counter = tmp_path / "count.txt"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "cache"), str(counter))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert counter.read_text().count("built") == 1


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_text_atomic(target, "old")
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


# --------------------------------------------------------------------------- integrity

def test_manifest_records_the_key_and_a_digest_of_every_file(tmp_path):
    cache = TargetCache(tmp_path)
    cache.get_or_build("k3", lambda: [1, 2], _save, _load)
    meta = cache.read_meta("k3")
    assert meta["key"] == "k3"
    assert meta["files"] == {"value.json": hashlib.sha256(b"[1, 2]").hexdigest()}
    assert cache.problems("k3") == []


def test_save_metadata_cannot_override_the_manifest(tmp_path):
    cache = TargetCache(tmp_path)
    cache.get_or_build("k4", lambda: [1], lambda obj, folder: {**_save(obj, folder), "key": "other",
                                                               "files": {}}, _load)
    assert cache.read_meta("k4")["key"] == "k4" and "value.json" in cache.read_meta("k4")["files"]


def test_edited_entry_is_retrained_with_a_warning_naming_it(tmp_path):
    cache = TargetCache(tmp_path)
    cache.get_or_build("k5", lambda: [1, 2, 3], _save, _load)
    (cache.entry("k5") / "value.json").write_text("[0, 0, 0]")       # valid JSON, edited content
    with pytest.warns(CacheEntryWarning, match=r"k5.*value\.json has sha256"):
        value, loaded = cache.get_or_build("k5", lambda: [1, 2, 3], _save, _load)
    assert (value, loaded) == ([1, 2, 3], False)
    assert cache.get_or_build("k5", lambda: [9], _save, _load) == ([1, 2, 3], True)


# --------------------------------------------------------------------------- an unwritable folder

def test_cache_folder_under_a_file_names_the_folder_and_the_fix(tmp_path):
    (tmp_path / "file").write_text("not a folder")                  # real: no simulation needed
    cache = TargetCache(tmp_path / "file" / "cache")
    with pytest.raises(CacheDirError, match=r"cannot create the cache folder.*file/cache.*a file stands in the path.*"
                                            r"--privleak-cache-dir") as info:
        cache.get_or_build("k", lambda: [1], _save, _load)
    assert isinstance(info.value, OSError) and info.value.errno in (errno.ENOTDIR, errno.EEXIST)


def _deny_writes_under(monkeypatch, root: Path) -> None:
    """Simulate a read-only folder: tests run as root, which ignores permission bits, so ``os.open`` with a
    write or create flag and ``os.mkdir`` fail with EACCES under ``root`` as they would for another user."""
    real_open, real_mkdir = os.open, os.mkdir
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def denied(path):
        return Path(os.fspath(path)).resolve().is_relative_to(root.resolve())

    def fake_open(path, flags, *args, **kwargs):
        if flags & writing and denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


def test_read_only_folder_names_the_folder_operation_and_fix(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    _deny_writes_under(monkeypatch, root)
    with pytest.raises(CacheDirError, match=r"cannot create the lock file k\.lock \(target cache folder "
                                            r".*cache.*EACCES.*make .* writable.*--privleak-cache-dir"):
        TargetCache(root).get_or_build("k", lambda: [1], _save, _load)


def test_full_disk_names_the_folder_and_the_fix_and_leaves_nothing(tmp_path):
    def save_on_a_full_disk(obj, folder):                              # simulated: a write that hits ENOSPC
        (folder / "value.json").write_text("[")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "value.json"))

    cache = TargetCache(tmp_path)
    with pytest.raises(CacheDirError, match=r"cannot write the entry k.*ENOSPC.*free space on the disk holding"
                                            r".*--privleak-cache-dir"):
        cache.get_or_build("k", lambda: [1], save_on_a_full_disk, _load)
    assert not cache.entry("k").exists() and not list(tmp_path.glob(".staging-*"))


# --------------------------------------------------------------------------- the lock

HOLDER = """
import os, sys, time
from pathlib import Path
from filelock import FileLock
from pytest_privleak.cache.lock import hold_lock
lock, ready, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
# "plain": a worker that locks without recording itself (as an older pytest-privleak did)
with (FileLock(str(lock)) if mode == "plain" else hold_lock(lock)):
    ready.write_text(str(os.getpid()))
    time.sleep(60)
"""


def _start_holder(tmp_path: Path, mode: str = "recorded") -> subprocess.Popen:
    ready = tmp_path / f"ready-{mode}"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "k.lock"), str(ready), mode])
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "holder did not start"
        time.sleep(0.02)
    return proc


def test_lock_held_by_a_hung_process_times_out_naming_its_pid(tmp_path, capsys):
    proc = _start_holder(tmp_path)                                     # holds the lock and makes no progress
    try:
        cache = TargetCache(tmp_path, lock_timeout=2.0, lock_message_every=0.4)
        started = time.monotonic()
        with pytest.raises(CacheLockTimeout, match=rf"gave up after \d+ s .*k\.lock.*PID {proc.pid} on this host, "
                                                    rf"holding it since .*kill {proc.pid}.*lock_timeout"):
            cache.get_or_build("k", lambda: [1], _save, _load)
        assert time.monotonic() - started < 10
        waiting = [line for line in capsys.readouterr().err.splitlines() if "waiting" in line]
        assert len(waiting) >= 2 and all(f"PID {proc.pid}" in line for line in waiting)
    finally:
        proc.kill()
        proc.wait()


def test_lock_of_a_killed_holder_is_taken_over_at_once(tmp_path):
    proc = _start_holder(tmp_path)
    proc.kill()                                                        # SIGKILL while it holds the lock
    proc.wait()
    assert json.loads((tmp_path / "k.lock.holder.json").read_text())["pid"] == proc.pid   # its record is left
    started = time.monotonic()
    value, _ = TargetCache(tmp_path, lock_timeout=5).get_or_build("k", lambda: [7], _save, _load)
    assert value == [7] and time.monotonic() - started < 3              # the kernel released its flock
    assert not (tmp_path / "k.lock.holder.json").exists()              # the new holder removed its own record


def test_stale_record_of_a_dead_holder_is_not_blamed_for_a_live_lock(tmp_path):
    dead = _start_holder(tmp_path)
    dead.kill()
    dead.wait()                                                        # leaves a record naming a dead PID
    live = _start_holder(tmp_path, mode="plain")                       # locks without recording itself
    try:
        cache = TargetCache(tmp_path, lock_timeout=0.5, lock_message_every=0.5)
        with pytest.raises(CacheLockTimeout, match=rf"PID {dead.pid} on this host, which is no longer running.*"
                                                    r"did not record itself.*fuser .*k\.lock"):
            cache.get_or_build("k", lambda: [1], _save, _load)
    finally:
        live.kill()
        live.wait()


# --------------------------------------------------------------------------- staging left by a killed publish

PUBLISHER = """
import json, sys, time
from pathlib import Path
from pytest_privleak.cache.targets import TargetCache
root, ready = sys.argv[1], Path(sys.argv[2])

def save(obj, folder):
    (folder / "value.json").write_text(json.dumps(obj))
    ready.write_text("saving")
    time.sleep(60)                      # killed here, in the middle of the publish
    return {}

TargetCache(root).get_or_build("k", lambda: [1], save, lambda folder: None)
"""


def test_staging_left_by_a_killed_publish_is_removed_when_the_cache_is_next_used(tmp_path, capsys):
    ready = tmp_path / "ready"
    root = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(root), str(ready)])
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    left = list(root.glob(".staging-*"))
    assert len(left) == 1 and f"-{proc.pid}-" in left[0].name         # what a killed publish leaves behind
    value, loaded = TargetCache(root).get_or_build("other", lambda: [2], _save, _load)
    assert (value, loaded) == ([2], False)
    assert not list(root.glob(".staging-*"))
    assert "removed 1 staging folder(s)" in capsys.readouterr().err


def test_staging_of_a_live_creator_is_kept_until_it_is_old(tmp_path):
    cache = TargetCache(tmp_path, staging_max_age=60)
    host = _host_tag()
    live = tmp_path / f".staging-abcd-{host}-1-0123abcd"               # PID 1 is always alive
    legacy = tmp_path / f".staging-abcd-{'e' * 32}"                    # older name: no PID, judged by age
    old_legacy = tmp_path / f".staging-ef01-{'f' * 32}"
    for path in (live, legacy, old_legacy):
        path.mkdir()
    os.utime(old_legacy, (time.time() - 120, time.time() - 120))
    assert cache.clean_stale_staging() == [old_legacy]
    assert live.exists() and legacy.exists()


def test_read_only_folder_still_serves_its_verified_entries(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    TargetCache(root).get_or_build("k", lambda: [1, 2], _save, _load)
    _deny_writes_under(monkeypatch, root)                              # simulated, as above
    assert TargetCache(root).get_or_build("k", lambda: [9], _save, _load) == ([1, 2], True)
    with pytest.raises(CacheDirError, match="cannot create the lock file other.lock"):
        TargetCache(root).get_or_build("other", lambda: [9], _save, _load)


def test_read_only_folder_refuses_an_edited_entry_it_cannot_retrain(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    TargetCache(root).get_or_build("k", lambda: [1, 2], _save, _load)
    (root / "k" / "value.json").write_text("[0, 0]")
    _deny_writes_under(monkeypatch, root)
    with pytest.raises(CacheEntryError, match=r"cache entry .*k is not what was built.*value\.json has sha256.*"
                                              r"cannot retrain it because the cache folder is not writable.*"
                                              r"--privleak-cache-dir"):
        TargetCache(root).get_or_build("k", lambda: [9], _save, _load)


def test_atomic_writes_get_the_mode_a_plain_write_would(tmp_path):
    """mkstemp's 0600 must not leak into reports and baselines that other users and CI steps read."""
    import os

    from pytest_privleak.atomic import write_text_atomic

    umask = os.umask(0o022)
    try:
        target = write_text_atomic(tmp_path / "report.json", "{}")
        plain = tmp_path / "plain.json"
        plain.write_text("{}")
    finally:
        os.umask(umask)
    assert oct(target.stat().st_mode & 0o777) == oct(plain.stat().st_mode & 0o777) == oct(0o644)
