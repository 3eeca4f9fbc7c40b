"""The URL cache on S3, against moto's local S3 server: conditional puts make one racing host win the lease.

Checks the object-store path that memory:// and sftp:// cannot: s3fs's
exclusive create (a conditional PUT, If-None-Match: *, refused at commit with
FileExistsError), the marker replaced by a server-side copy, two hosts
training an entry once, and a tampered object refused. Skipped, with the
reason, where s3fs or moto's server are not installed.
"""
import socket
import threading
import time

import pytest

pytest.importorskip("fsspec", reason="the URL cache needs fsspec (pip install 'pytest-privleak[remote-cache]')")
s3fs = pytest.importorskip("s3fs", reason="s3:// needs s3fs (pip install s3fs)")
moto_server = pytest.importorskip("moto.server", reason="the S3 tests need moto's server (pip install 'moto[server]')")

from helpers_cache import load_value, save_value  # noqa: E402
from pytest_privleak.cache.targets import CacheEntryError  # noqa: E402
from pytest_privleak.cache.lease import create_exclusive, put_atomic, read_bytes  # noqa: E402
from pytest_privleak.cache.remote import MARKER, RemoteTargetCache  # noqa: E402

KEY = "c0de" * 16


@pytest.fixture(scope="module")
def s3():
    """storage_options for a moto S3 server on 127.0.0.1 holding the bucket ``privleak``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp = pytest.MonkeyPatch()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        mp.setenv(name, "test")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}, "skip_instance_cache": True}
    s3fs.S3FileSystem(**options).mkdir("privleak")
    yield options
    server.stop()
    mp.undo()


def test_one_of_several_racing_hosts_wins_the_conditional_put(s3):
    wins = []

    def race(i):
        wins.append(create_exclusive(s3fs.S3FileSystem(**s3), "privleak/race/k.lease.json", f"h{i}".encode()))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    fs = s3fs.S3FileSystem(**s3)
    put_atomic(fs, "privleak/race/k.lease.json", b"replaced")
    assert read_bytes(fs, "privleak/race/k.lease.json") == b"replaced"
    assert fs.ls("privleak/race", detail=False) == ["privleak/race/k.lease.json"]


def test_two_hosts_on_s3_train_once_and_a_tampered_object_is_refused(s3, tmp_path):
    url, calls, out = "s3://privleak/cache", [], {}

    def build():
        calls.append(1)
        time.sleep(0.5)
        return {"w": [1, 2]}

    def host(name):
        cache = RemoteTargetCache(url, mirror_dir=tmp_path / name, host=name, lease_poll=0.05, storage_options=s3)
        out[name] = cache.get_or_build(KEY, build, save_value, load_value)

    threads = [threading.Thread(target=host, args=(n,)) for n in ("h1", "h2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted(loaded for _, loaded in out.values()) == [False, True]

    fs = s3fs.S3FileSystem(**s3)
    [data] = [p for p in fs.find(f"privleak/cache/{KEY}") if p.endswith("/value.json")]
    fs.pipe_file(data, b'{"w": [0, 0]}')
    third = RemoteTargetCache(url, mirror_dir=tmp_path / "h3", host="h3", on_mismatch="error", storage_options=s3)
    with pytest.raises(CacheEntryError, match=rf"{url}/{KEY} is not what was built.*Fix: delete {url}/{KEY}/{MARKER}"):
        third.get_or_build(KEY, lambda: pytest.fail("must not build"), save_value, load_value)
