"""Bad inputs and faults of the target cache: each gives a clear error naming the argument, folder or entry and the fix.

Where a fault cannot be produced for real here it is simulated, and the test
says so: tests run as root, which ignores permission bits, so a read-only
folder is an ``os.open``/``os.mkdir`` that fails with EACCES; a full disk or
quota is a write that fails with ENOSPC/EDQUOT.
"""
import errno
import json
import math
import os
import re
from pathlib import Path

import pytest

from pytest_privleak.cache.targets import CacheDirError, CacheEntryError, TargetCache
from pytest_privleak.cache.manifest import HMAC_KEY_ENV


def _save(obj, folder: Path) -> dict:
    (folder / "value.json").write_text(json.dumps(obj))
    return {}


def _load(folder: Path):
    return json.loads((folder / "value.json").read_text())


def _built(tmp_path: Path, key: str = "k") -> TargetCache:
    cache = TargetCache(tmp_path, on_mismatch="error")
    cache.get_or_build(key, lambda: [1, 2], _save, _load)
    return cache


# --------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("kwargs, argument", [
    ({"lock_timeout": -1}, "lock_timeout"),
    ({"lock_timeout": 0}, "lock_timeout"),
    ({"lock_timeout": math.nan}, "lock_timeout"),
    ({"lock_timeout": "30"}, "lock_timeout"),
    ({"lock_timeout": True}, "lock_timeout"),
    ({"lock_message_every": 0}, "lock_message_every"),
    ({"staging_max_age": math.inf}, "staging_max_age"),
])
def test_bad_seconds_name_the_argument_and_the_accepted_values(tmp_path, kwargs, argument):
    with pytest.raises(ValueError, match=rf"TargetCache\({argument}\)=.* must be a finite number of seconds > 0"):
        TargetCache(tmp_path, **kwargs)


def test_bad_on_mismatch_names_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"on_mismatch='ignore'.* must be 'retrain' .* or 'error'"):
        TargetCache(tmp_path, on_mismatch="ignore")


@pytest.mark.parametrize("root", [None, "", 3])
def test_bad_root_names_the_argument(root):
    with pytest.raises(TypeError, match=r"TargetCache\(root=.*\): root must be a non-empty folder path"):
        TargetCache(root)


@pytest.mark.parametrize("key", ["../outside", "a/b", ".staging-x", "", 5, "x" * 200])
def test_key_that_is_not_a_safe_folder_name_is_refused(tmp_path, key):
    cache = TargetCache(tmp_path / "cache")
    with pytest.raises(ValueError, match=r"cache key .* must be 1-128 letters, digits.*no '/', '\.\.' or leading"):
        cache.get_or_build(key, lambda: [1], _save, _load)
    assert not (tmp_path / "outside").exists()


# --------------------------------------------------------------------------- the folder

def test_cache_root_that_is_a_file(tmp_path):
    (tmp_path / "cache").write_text("I am a file")
    with pytest.raises(CacheDirError, match=r"cannot create the cache folder .*cache.*EEXIST.*a file stands in "
                                            r"the path.*--privleak-cache-dir"):
        TargetCache(tmp_path / "cache").get_or_build("k", lambda: [1], _save, _load)


def test_read_only_folder_simulated(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    real_open = os.open

    def read_only_open(path, flags, *args, **kwargs):   # simulated: root ignores permission bits
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and str(root) in os.fspath(path):
            raise PermissionError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_open)
    with pytest.raises(CacheDirError, match=r"lock file k\.lock \(target cache folder .*cache\).*EROFS.*make "
                                            r".* writable .*read-only mount.*--privleak-cache-dir") as info:
        TargetCache(root).get_or_build("k", lambda: [1], _save, _load)
    assert info.value.errno == errno.EROFS


@pytest.mark.parametrize("code", ["ENOSPC", "EDQUOT"])
def test_full_disk_or_quota_simulated(tmp_path, code):
    def save_fails(obj, folder):                          # simulated: the write hits a full disk / quota
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), str(folder / "value.json"))

    cache = TargetCache(tmp_path)
    with pytest.raises(CacheDirError, match=rf"cannot write the entry k .*{code}.*free space on the disk holding "
                                            rf".*--privleak-cache-dir"):
        cache.get_or_build("k", lambda: [1], save_fails, _load)
    assert not cache.entry("k").exists() and not list(tmp_path.glob(".staging-*"))


# --------------------------------------------------------------------------- entries (on_mismatch="error")

def _refused(cache: TargetCache, detail: str, key: str = "k") -> None:
    entry = re.escape(str(cache.entry(key)))
    with pytest.raises(CacheEntryError, match=rf"cache entry {entry} is not what was built.*{detail}.*"
                                              rf"Fix: delete the folder \(rm -rf '{entry}'\)"):
        cache.get_or_build(key, lambda: [9], _save, _load)


def test_manifest_that_is_not_an_object(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "meta.json").write_text("[1, 2]")
    _refused(cache, "meta.json holds a list")


def test_manifest_that_is_not_utf8(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "meta.json").write_bytes(b"\xff\xfe{}")
    _refused(cache, "meta.json is missing or unreadable")


def test_manifest_without_digests_written_by_an_older_version(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "meta.json").write_text(json.dumps({"key": "k", "size": 2}))
    _refused(cache, "records no file digests .*older pytest-privleak")


def test_manifest_with_digests_that_are_not_a_mapping(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "meta.json").write_text(json.dumps({"key": "k", "files": "value.json"}))
    _refused(cache, "records no file digests")


def test_entry_folder_without_manifest(tmp_path):
    cache = TargetCache(tmp_path, on_mismatch="error")
    cache.entry("k").mkdir(parents=True)
    (cache.entry("k") / "value.json").write_text("[0]")
    _refused(cache, "meta.json is missing")


def test_listed_file_missing(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "value.json").unlink()
    _refused(cache, "file value.json is missing")


def test_unsigned_entry_while_a_secret_is_set(tmp_path, monkeypatch):
    cache = _built(tmp_path)
    monkeypatch.setenv(HMAC_KEY_ENV, "secret")
    _refused(cache, f"carries no HMAC although {HMAC_KEY_ENV} is set")


def test_entry_signed_with_another_secret(tmp_path, monkeypatch):
    monkeypatch.setenv(HMAC_KEY_ENV, "old secret")
    cache = _built(tmp_path)
    monkeypatch.setenv(HMAC_KEY_ENV, "new secret")
    _refused(cache, f"HMAC does not match the secret in {HMAC_KEY_ENV}")


def test_refused_entry_is_kept_for_investigation(tmp_path):
    cache = _built(tmp_path)
    (cache.entry("k") / "value.json").write_text("[0, 0]")
    _refused(cache, "value.json has sha256")
    assert (cache.entry("k") / "value.json").read_text() == "[0, 0]"


# --------------------------------------------------------------------------- cache locations given by URL

def _cache_url_module():
    from pytest_privleak.cache import url as cache_url

    return cache_url


@pytest.mark.parametrize("value, message", [
    ("", r"--privleak-cache-dir \(ini: privleak_cache_dir\) is empty; give a folder .* or a URL"),
    ("   ", r"--privleak-cache-dir \(ini: privleak_cache_dir\) is empty"),
    ("nosuchproto://bucket/x",
     r"--privleak-cache-dir \(ini: privleak_cache_dir\)='nosuchproto://bucket/x': fsspec knows no protocol "
     r"'nosuchproto'\. Fix: use one it knows \(.*file.*\).*or a local folder"),
    ("file://", r"'file://' names no location after '://'\. Fix: give the folder, host or bucket"),
])
def test_bad_cache_location_names_the_option_and_the_fix(value, message):
    pytest.importorskip("fsspec")
    cache_url = _cache_url_module()
    with pytest.raises(cache_url.CacheURLError, match=message):
        cache_url.cache_location(value)
    assert issubclass(cache_url.CacheURLError, ValueError)       # settings turn it into a pytest UsageError


def test_url_without_fsspec_names_the_extra_to_install(monkeypatch):
    cache_url = _cache_url_module()
    monkeypatch.setitem(__import__("sys").modules, "fsspec", None)      # as if fsspec were not installed
    with pytest.raises(cache_url.CacheURLError,
                       match=r"privleak_cache_dir\)='s3://team/cache' is a URL.*fsspec, which is not installed\. "
                             r"Fix: pip install 'pytest-privleak\[remote-cache\]'.*or give a local folder path"):
        cache_url.cache_location("s3://team/cache")


def test_url_whose_backend_is_missing_names_the_package(monkeypatch):
    fsspec = pytest.importorskip("fsspec")
    cache_url = _cache_url_module()

    def missing(protocol):
        raise ImportError(f"Install the {protocol} backend")

    monkeypatch.setattr(fsspec, "get_filesystem_class", missing)       # s3fs may be installed on some machines
    with pytest.raises(cache_url.CacheURLError, match=r"the s3:// backend is not installed \(Install the s3 "
                                                      r"backend\)\. Fix: pip install s3fs"):
        cache_url.cache_location("s3://team/cache")


@pytest.mark.parametrize("kwargs, message", [
    ({"url": 3}, r"RemoteTargetCache\(url=3\): url must be a str such as 's3://bucket/prefix'"),
    ({"url": "/not/a/url"}, r"RemoteTargetCache\(url\)='/not/a/url' is not a URL .*give a URL, or a local folder"),
    ({"host": ""}, r"RemoteTargetCache\(host=''\) must be a non-empty str naming this host"),
    ({"lease_ttl": 0}, r"RemoteTargetCache\(lease_ttl\)=0 must be a finite number of seconds > 0"),
    ({"lease_poll": math.nan}, r"RemoteTargetCache\(lease_poll\)=nan must be a finite number of seconds > 0"),
    ({"storage_options": "key=secret"}, r"RemoteTargetCache\(storage_options='key=secret'\) must be a dict"),
])
def test_bad_remote_cache_arguments_name_the_argument(tmp_path, kwargs, message):
    pytest.importorskip("fsspec")
    from pytest_privleak.cache.remote import RemoteTargetCache

    kwargs = {"url": "memory://bad-args", "mirror_dir": tmp_path, **kwargs}
    with pytest.raises((TypeError, ValueError), match=message):
        RemoteTargetCache(**kwargs)


def test_unreachable_remote_cache_names_the_url_and_the_fix(tmp_path, monkeypatch):
    pytest.importorskip("fsspec")
    from pytest_privleak.cache import remote as cache_remote
    from pytest_privleak.cache.remote import RemoteTargetCache

    monkeypatch.setattr(cache_remote, "OPEN_RETRY_PAUSES", (0.0, 0.0))

    (tmp_path / "a-file").write_text("x")
    url = f"file://{tmp_path}/a-file/cache"                               # a file stands where the folder goes
    cache = RemoteTargetCache(url, mirror_dir=tmp_path / "mirror")
    with pytest.raises(CacheDirError, match=rf"cannot open the target cache {url} after 3 attempts .*Fix: check "
                                            r"that the host "
                                            r"or bucket is reachable .*or point --privleak-cache-dir .* at a local"):
        cache.get_or_build("k", lambda: [1], _save, _load)
