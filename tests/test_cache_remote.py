"""The target cache on an fsspec URL: hosts train an entry once, leases expire, remote entries are verified.

"Hosts" are threads (memory://, one process) or processes (file://), each with
its own host name and its own mirror folder, so they share nothing but the URL.
"""
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

fsspec = pytest.importorskip("fsspec",
                             reason="the URL cache needs fsspec (pip install 'pytest-privleak[remote-cache]')")

from helpers_cache import HOST_PROCESS, load_value, save_value  # noqa: E402
from pytest_privleak.cache.targets import CacheEntryError, CacheEntryWarning, CacheLockTimeout  # noqa: E402
from pytest_privleak.cache.lease import LeaseRecord  # noqa: E402
from pytest_privleak.cache.remote import MARKER, RemoteTargetCache  # noqa: E402
from pytest_privleak.cache.opening import open_cache  # noqa: E402
from pytest_privleak.cache.url import cache_location, is_url  # noqa: E402

KEY = "0123abcd" * 8


@pytest.fixture
def url():
    """A fresh memory:// location, removed afterwards (the memory filesystem is process-wide)."""
    root = f"memory://privleak-test-{uuid.uuid4().hex[:12]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root[len("memory://"):]):
        fs.rm(root[len("memory://"):], recursive=True)


def _host(url, tmp_path, name, **kwargs) -> RemoteTargetCache:
    kwargs.setdefault("lease_poll", 0.02)
    return RemoteTargetCache(url, mirror_dir=tmp_path / f"mirror-{name}", host=name, **kwargs)


def _remote_files(url) -> list[str]:
    fs, root = fsspec.core.url_to_fs(url)
    return sorted(p[len(root.rstrip("/")) + 1:] for p in fs.find(root))


# --------------------------------------------------------------------------- locations

def test_a_folder_stays_a_path_and_a_url_stays_a_url(tmp_path):
    assert cache_location(".privleak-cache", root=tmp_path) == tmp_path / ".privleak-cache"
    assert cache_location("/abs/cache", root=tmp_path) == Path("/abs/cache")
    assert cache_location("memory://team-cache", root=tmp_path) == "memory://team-cache"
    assert cache_location("file:///srv/cache") == "file:///srv/cache"
    assert is_url("simplecache::memory://x") and not is_url("C:\\cache") and not is_url("cache/s3:x")


def test_open_cache_picks_the_backend_by_location(tmp_path, url):
    from pytest_privleak.cache.targets import TargetCache

    assert type(open_cache(tmp_path / "c")) is TargetCache
    remote = open_cache(url, mirror_dir=tmp_path / "m")
    assert isinstance(remote, RemoteTargetCache) and remote.root == tmp_path / "m"


# --------------------------------------------------------------------------- build once, load everywhere

def test_publish_writes_files_then_one_marker_and_another_host_downloads_it(tmp_path, url, capsys):
    a, b = _host(url, tmp_path, "host-a"), _host(url, tmp_path, "host-b")
    assert a.get_or_build(KEY, lambda: {"w": [1, 2]}, save_value, load_value) == ({"w": [1, 2]}, False)
    files = _remote_files(url)
    assert [f for f in files if f.endswith(MARKER)] == [f"{KEY}/{MARKER}"]
    assert any(f.startswith(f"{KEY}/v-") and f.endswith("/value.json") for f in files)
    assert not any(".lease" in f or ".tmp-" in f for f in files)         # lease released, no staging left
    assert b.get_or_build(KEY, lambda: pytest.fail("host-b must not train"), save_value,
                          load_value) == ({"w": [1, 2]}, True)
    assert b.problems(KEY) == [] and b.read_meta(KEY)["what"] == "test"  # mirrored with its manifest
    err = capsys.readouterr().err
    assert "trained on host 'host-a'" in err and "downloaded from" in err and "trained by host 'host-a'" in err


def test_the_mirror_serves_a_host_without_asking_the_url_again(tmp_path, url):
    a = _host(url, tmp_path, "host-a")
    a.get_or_build(KEY, lambda: [7], save_value, load_value)
    fs, root = fsspec.core.url_to_fs(url)
    fs.rm(root, recursive=True)                                        # the shared storage is gone
    assert a.get_or_build(KEY, lambda: pytest.fail("must come from the mirror"), save_value, load_value) == ([7], True)


def test_two_hosts_building_the_same_entry_train_it_once(tmp_path, url):
    calls, results = [], {}

    def build():
        calls.append(threading.current_thread().name)
        time.sleep(0.5)
        return {"trained": True}

    def run(name):
        results[name] = _host(url, tmp_path, name).get_or_build(KEY, build, save_value, load_value)

    threads = [threading.Thread(target=run, args=(n,), name=n) for n in ("host-a", "host-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(loaded for _, loaded in results.values()) == [False, True]
    assert all(obj == {"trained": True} for obj, _ in results.values())


def test_two_host_processes_on_a_file_url_train_once(tmp_path):
    shared = tmp_path / "shared"
    url, log = f"file://{shared}", tmp_path / "built.log"
    procs = [subprocess.Popen([sys.executable, "-c", HOST_PROCESS % KEY, url, str(tmp_path / f"m-{h}"), h, str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for h in ("h1", "h2")]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    trainer = log.read_text().split()
    assert len(trainer) == 1
    assert [r["obj"] for r in results] == [{"by": trainer[0]}] * 2
    assert sorted(r["loaded"] for r in results) == [False, True]
    assert (shared / KEY / MARKER).is_file() and not list(shared.glob("*.lease.json"))


def test_a_failed_build_publishes_nothing_and_frees_the_lease(tmp_path, url):
    a = _host(url, tmp_path, "host-a")

    def broken():
        raise RuntimeError("training diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        a.get_or_build(KEY, broken, save_value, load_value)
    assert _remote_files(url) == []
    assert _host(url, tmp_path, "host-b", lock_timeout=2).get_or_build(KEY, lambda: 1, save_value,
                                                                       load_value) == (1, False)


def test_an_upload_cut_short_before_its_marker_is_invisible(tmp_path, url):
    fs, root = fsspec.core.url_to_fs(url)
    fs.pipe_file(f"{root}/{KEY}/v-{'0' * 32}/value.json", b'"half"')     # files of a publish that never committed
    assert _host(url, tmp_path, "host-a").get_or_build(KEY, lambda: "whole", save_value, load_value) == ("whole", False)


# --------------------------------------------------------------------------- leases

def _plant_lease(url, *, host="dead-host", pid=424242, expires_in=-5.0, since_ago=100.0):
    fs, root = fsspec.core.url_to_fs(url)
    now = time.time()
    fs.pipe_file(f"{root}/{KEY}.lease.json",
                 LeaseRecord("t" * 32, host, pid, now - since_ago, now + expires_in, "pytest").to_bytes())


def test_an_expired_lease_of_a_dead_host_is_taken_over(tmp_path, url, capsys):
    _plant_lease(url, expires_in=-5.0)
    a = _host(url, tmp_path, "host-a", lock_timeout=5)
    assert a.get_or_build(KEY, lambda: "mine", save_value, load_value) == ("mine", False)
    err = capsys.readouterr().err
    assert "took over the expired lease" in err and "'dead-host', PID 424242" in err and "expired 5 s ago" in err
    assert not any(".lease" in f for f in _remote_files(url))


def test_a_waiter_shows_the_holder_then_takes_over_when_the_lease_expires(tmp_path, url, capsys):
    _plant_lease(url, expires_in=1.0, since_ago=50.0)
    a = _host(url, tmp_path, "host-a", lock_timeout=20, lock_message_every=0.3)
    start = time.monotonic()
    assert a.get_or_build(KEY, lambda: "mine", save_value, load_value) == ("mine", False)
    assert time.monotonic() - start >= 0.9                                # it did wait for the expiry
    err = capsys.readouterr().err
    assert "[privleak] waiting" in err and "held by host 'dead-host', PID 424242" in err
    assert re.search(r"holding it since \d\d:\d\d:\d\d UTC \(5[01] s; the lease expires in [01] s\)", err)
    assert "took over the expired lease" in err


def test_a_live_lease_times_out_naming_its_host_pid_and_the_fix(tmp_path, url):
    _plant_lease(url, host="gpu-7", pid=31337, expires_in=600.0)
    a = _host(url, tmp_path, "host-a", lock_timeout=0.4)
    with pytest.raises(CacheLockTimeout, match=r"held by host 'gpu-7', PID 31337.*Fix: .*wait for it or raise "
                                               r"the lock timeout.*expires 120 s after its last heartbeat"):
        a.get_or_build(KEY, lambda: pytest.fail("must not build"), save_value, load_value)


def test_the_heartbeat_keeps_a_long_build_s_lease_alive(tmp_path, url):
    calls = []

    def slow():
        calls.append(1)
        time.sleep(1.2)                    # three lease lifetimes: without renewal host-b would take over
        return "once"

    out = {}
    a = _host(url, tmp_path, "host-a", lease_ttl=0.4)
    b = _host(url, tmp_path, "host-b", lease_ttl=0.4)
    first = threading.Thread(target=lambda: out.setdefault("a", a.get_or_build(KEY, slow, save_value, load_value)))
    first.start()
    time.sleep(0.2)
    out["b"] = b.get_or_build(KEY, slow, save_value, load_value)
    first.join()
    assert len(calls) == 1 and out == {"a": ("once", False), "b": ("once", True)}


# --------------------------------------------------------------------------- integrity

def _tamper(url, name="value.json", data=b'{"w": [0, 0]}'):
    fs, root = fsspec.core.url_to_fs(url)
    [path] = [p for p in fs.find(f"{root}/{KEY}") if p.endswith("/" + name)]
    fs.pipe_file(path, data)


def test_a_tampered_remote_entry_is_retrained_and_republished_with_a_warning(tmp_path, url):
    _host(url, tmp_path, "host-a").get_or_build(KEY, lambda: {"w": [1, 2]}, save_value, load_value)
    _tamper(url)
    fs, root = fsspec.core.url_to_fs(url)
    before = fs.cat_file(f"{root}/{KEY}/{MARKER}")
    b = _host(url, tmp_path, "host-b")
    with pytest.warns(CacheEntryWarning, match=rf"{url}/{KEY} is not what was built.*file value.json has sha256"):
        assert b.get_or_build(KEY, lambda: {"w": [1, 2]}, save_value, load_value) == ({"w": [1, 2]}, False)
    assert fs.cat_file(f"{root}/{KEY}/{MARKER}") != before
    assert len([f for f in _remote_files(url) if f.endswith("value.json")]) == 1    # the bad version is gone
    c = _host(url, tmp_path, "host-c")
    assert c.get_or_build(KEY, lambda: pytest.fail("republished"), save_value, load_value) == ({"w": [1, 2]}, True)


def test_a_tampered_remote_entry_is_an_error_when_asked(tmp_path, url):
    _host(url, tmp_path, "host-a").get_or_build(KEY, lambda: {"w": [1, 2]}, save_value, load_value)
    _tamper(url)
    b = _host(url, tmp_path, "host-b", on_mismatch="error")
    with pytest.raises(CacheEntryError, match=rf"{url}/{KEY} is not what was built.*Fix: delete "
                                              rf"{url}/{KEY}/{MARKER}"):
        b.get_or_build(KEY, lambda: pytest.fail("must not build"), save_value, load_value)
    assert not (tmp_path / "mirror-host-b" / KEY).exists()


@pytest.mark.parametrize("edit, problem", [
    (lambda m: {**m, "key": "f" * 64}, "records key 'ffff"),
    (lambda m: {**m, "data": "../../elsewhere"}, "names no valid data folder"),
    (lambda m: {**m, "manifest": {**m["manifest"], "files": {"../../../etc/x": "0" * 64}}},
     "file names outside the entry"),
    (lambda m: "not a marker", "not a pytest-privleak entry marker"),
])
def test_a_forged_marker_is_refused(tmp_path, url, edit, problem):
    _host(url, tmp_path, "host-a").get_or_build(KEY, lambda: [1], save_value, load_value)
    fs, root = fsspec.core.url_to_fs(url)
    marker = json.loads(fs.cat_file(f"{root}/{KEY}/{MARKER}"))
    fs.pipe_file(f"{root}/{KEY}/{MARKER}", json.dumps(edit(marker)).encode())
    b = _host(url, tmp_path, "host-b", on_mismatch="error")
    with pytest.raises(CacheEntryError, match=problem):
        b.get_or_build(KEY, lambda: pytest.fail("must not build"), save_value, load_value)
    assert not (tmp_path / "etc").exists() and not (tmp_path / "elsewhere").exists()


def test_non_finite_weights_with_a_rewritten_manifest_are_refused_by_the_loader(tmp_path, url):
    """Someone with write access rewrites weights and digests together: the digests agree, the loader does not."""
    torch = pytest.importorskip("torch")
    from pytest_privleak.cache.manifest import sha256_file
    from pytest_privleak.targets.training import WEIGHTS_FILE, load_entry, save_entry

    def save(state, folder):
        save_entry(folder, state, {"kind": "t", "content_hash": KEY,
                                   "code_version": __import__("pytest_privleak.targets.training",
                                                              fromlist=["CODE_VERSION"]).CODE_VERSION})
        return {}

    def load(folder):
        return load_entry(folder, "cpu")[0]

    _host(url, tmp_path, "host-a").get_or_build(KEY, lambda: {"w": torch.ones(3)}, save, load)
    fs, root = fsspec.core.url_to_fs(url)
    marker = json.loads(fs.cat_file(f"{root}/{KEY}/{MARKER}"))
    from safetensors.torch import save_file
    bad = tmp_path / "bad.safetensors"
    save_file({"w": torch.tensor([1.0, float("nan"), 1.0])}, str(bad))
    fs.put_file(str(bad), f"{root}/{KEY}/{marker['data']}/{WEIGHTS_FILE}")
    marker["manifest"]["files"][WEIGHTS_FILE] = sha256_file(bad)
    fs.pipe_file(f"{root}/{KEY}/{MARKER}", json.dumps(marker).encode())
    b = _host(url, tmp_path, "host-b", on_mismatch="error")
    with pytest.raises(CacheEntryError, match=r"weight 'w'.*(NaN|non-finite)"):
        b.get_or_build(KEY, lambda: pytest.fail("must not build"), save, load)


# --------------------------------------------------------------------------- a real target

def test_a_real_target_trained_on_one_host_gives_the_same_figures_on_another(tmp_path, url):
    """A tiny joint BiLSTM-CRF through the URL cache: host-b loads it (never trains) and scores identically."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    from pytest_privleak.canaries import canary, inject_canaries
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets import train_target

    data = inject_canaries(generate_snips_like(n_train=60, n_valid=15, n_test=15, seed=4),
                           canary("pin", 4, seed=1), repeats=10)
    tiny = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)

    def on(host):
        return train_target("joint-bilstm-crf", data, cache=_host(url, tmp_path, host), seed=0, progress=False,
                            **tiny)

    first, second = on("host-a"), on("host-b")
    assert (first.loaded_from_cache, second.loaded_from_cache) == (False, True)
    assert second.content_hash == first.content_hash
    np.testing.assert_array_equal(second.score(data.test), first.score(data.test))
    assert _remote_files(url) and all(not f.endswith(".lease.json") for f in _remote_files(url))


def test_an_upload_that_fails_leaves_no_copy_that_only_this_host_would_see(tmp_path, url, monkeypatch):
    from pytest_privleak.cache.targets import CacheDirError

    a = _host(url, tmp_path, "host-a")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(a.fs, "put_file", refuse)
    with pytest.raises(CacheDirError, match=rf"cannot publish the entry {KEY} \(target cache {url}\).*Fix: "):
        a.get_or_build(KEY, lambda: [1], save_value, load_value)
    assert not a.entry(KEY).exists() and not any(f.endswith(MARKER) for f in _remote_files(url))
    monkeypatch.undo()
    assert a.get_or_build(KEY, lambda: [2], save_value, load_value) == ([2], False)    # retried, published this time


# --------------------------------------------------------------------------- exclusive create across backends

class _Backend:
    """A memory filesystem whose ``open(path, "xb")`` behaves like another backend's."""

    def __init__(self, url, behaviour):
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.behaviour = behaviour

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open(self, path, mode="rb", **kwargs):
        if mode != "xb":
            return self.fs.open(path, mode, **kwargs)
        if self.behaviour == "no-xb":                      # a backend without exclusive create
            raise ValueError("unsupported file mode 'xb'")
        if self.behaviour in ("eexist-as-failure", "read-only-handle") and self.fs.exists(path):
            raise OSError("Failure")                       # SFTP v3 reports EEXIST like this
        fs = self.fs

        class Handle:                                      # the check happens on commit (S3 conditional PUT)
            def __enter__(self):
                return self

            def write(self, data):
                if behaviour == "read-only-handle":
                    raise OSError("File not open for writing")   # paramiko's "xb"
                self.data = data

            def __exit__(self, *exc):
                if exc[0] is None:
                    if fs.exists(path):
                        raise FileExistsError("At least one of the pre-conditions you specified did not hold")
                    fs.pipe_file(path, self.data)
                return False

        behaviour = self.behaviour
        if behaviour == "read-only-handle":
            fs.pipe_file(path, b"")                        # created (empty) at open, as SFTP does
        return Handle()


def test_a_create_refused_on_commit_loses_and_leaves_the_winner_s_lease(url):
    from pytest_privleak.cache.lease import create_exclusive

    fs = _Backend(url, "check-on-commit")
    path = f"{fs.root}/k.lease.json"
    handle = fs.open(path, "xb")                           # opened before the winner commits
    fs.fs.pipe_file(path, b"winner")
    with pytest.raises(FileExistsError):
        with handle:
            handle.write(b"late")
    fs.fs.rm_file(path)
    calls = []
    real_open = fs.open

    def open_then_lose(p, mode="rb", **kw):
        h = real_open(p, mode, **kw)
        if mode == "xb":
            calls.append(1)
            fs.fs.pipe_file(p, b"winner")                  # the other host commits between our open and close
        return h

    fs.open = open_then_lose
    assert create_exclusive(fs, path, b"late") is False and calls == [1]
    assert fs.fs.cat_file(path) == b"winner"


@pytest.mark.parametrize("behaviour", ["no-xb", "eexist-as-failure", "read-only-handle"])
def test_exclusive_create_wins_once_on_each_kind_of_backend(url, behaviour):
    from pytest_privleak.cache.lease import create_exclusive

    fs = _Backend(url, behaviour)
    path = f"{fs.root}/k.lease.json"
    assert create_exclusive(fs, path, b"first", settle=0.01) is True
    assert create_exclusive(fs, path, b"second", settle=0.01) is False
    assert fs.fs.cat_file(path) == b"first"


def test_a_dropped_first_connection_is_retried_not_fatal(tmp_path, monkeypatch):
    """An sshd that drops a connection under load (MaxStartups) must not fail a host's run: CI saw exactly that."""
    import fsspec

    from pytest_privleak.cache import remote as cache_remote

    real, calls = fsspec.core.url_to_fs, []

    def flaky(url, **options):
        calls.append(url)
        if len(calls) == 1:
            raise ConnectionResetError("connection reset by peer")
        return real(url, **options)

    monkeypatch.setattr(cache_remote, "OPEN_RETRY_PAUSES", (0.0, 0.0))
    monkeypatch.setattr(fsspec.core, "url_to_fs", flaky)
    cache = cache_remote.RemoteTargetCache(f"file://{tmp_path}/shared", mirror_dir=tmp_path / "mirror")
    assert cache.fs is not None and len(calls) == 2
