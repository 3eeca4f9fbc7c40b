"""The cache's smaller holes (issue 23 item 5, issue 21 item 7): each a clear warning or error with the fix.

- a target-cache entry with zeroed weights and recomputed digests loaded silently without an HMAC key;
- a stopped lock holder (kill -STOP) made every waiter wait up to 30 minutes, with no option to lower it;
- ``--privleak-cache-dir`` naming a file gave a FileExistsError traceback in every test;
- with a URL cache and no key, a forged result entry was loaded (a leaking model passed).
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
from safetensors.torch import load_file, save_file

from pytest_privleak.cache import lock as cache_lock
from pytest_privleak.cache import manifest
from pytest_privleak.cache.lock import CacheLockHolderStopped, hold_lock
from pytest_privleak.cache.manifest import HMAC_KEY_ENV, UnsignedCacheWarning, file_digests
from pytest_privleak.cache.results import ResultCache, untrusted_reason
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.cache.url import CacheURLError, cache_location
from pytest_privleak.results import LeakResult


@pytest.fixture
def fresh_warning(monkeypatch):
    """Forget that this process already warned about unsigned entries; no key set."""
    monkeypatch.setattr(manifest, "_warned_unsigned", False)
    monkeypatch.delenv(HMAC_KEY_ENV, raising=False)


def _weights_cache(tmp_path):
    import torch

    cache = TargetCache(tmp_path)

    def save(obj, folder):
        save_file({"w": obj}, str(folder / "model.safetensors"))
        return {}

    def load(folder):
        return load_file(str(folder / "model.safetensors"))["w"]

    build = lambda: torch.ones(4)  # noqa: E731
    return cache, build, save, load


def test_zeroed_weights_with_recomputed_digests_load_with_a_warning_naming_the_key(tmp_path, fresh_warning):
    import torch

    cache, build, save, load = _weights_cache(tmp_path)
    cache.get_or_build("k1", build, save, load)
    entry = tmp_path / "k1"
    save_file({"w": torch.zeros(4)}, str(entry / "model.safetensors"))  # the forger zeroes the weights ...
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"] = file_digests(entry)                                   # ... and recomputes the digests
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(UnsignedCacheWarning, match=rf"unsigned \({HMAC_KEY_ENV} is not set\).*replace a trained "
                                                  rf"target.*fix: set {HMAC_KEY_ENV} to a secret.*secrets\."):
        obj, loaded = cache.get_or_build("k1", build, save, load)
    assert loaded and float(obj.sum()) == 0.0  # unsigned: it cannot be told from genuine, so it is said loudly
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsignedCacheWarning)
        cache.get_or_build("k1", build, save, load)  # once per run, not once per entry


def test_no_unsigned_warning_with_a_key(tmp_path, fresh_warning, monkeypatch):
    monkeypatch.setenv(HMAC_KEY_ENV, "kept outside the cache")
    cache, build, save, load = _weights_cache(tmp_path)
    cache.get_or_build("k1", build, save, load)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsignedCacheWarning)
        assert cache.get_or_build("k1", build, save, load)[1] is True


# --- a stopped lock holder -------------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from pytest_privleak.cache.lock import hold_lock
with hold_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc (Linux)")
def test_a_stopped_holder_is_named_at_once_instead_of_a_30_minute_wait(tmp_path):
    lock_path = tmp_path / "entry.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(CacheLockHolderStopped) as info:
            with hold_lock(lock_path, timeout=1800, message_every=600):
                pass
        waited = time.monotonic() - start
        assert waited < cache_lock.STOPPED_GRACE + 10  # not the 30-minute timeout
        text = str(info.value)
        assert f"PID {holder.pid} on this host" in text and "is stopped (state T" in text
        assert f"kill -CONT {holder.pid}" in text and f"kill {holder.pid}" in text
        assert isinstance(info.value, cache_lock.CacheLockTimeout)  # callers that handle timeouts handle it
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()


def test_process_state_reads_proc(tmp_path):
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("needs /proc (Linux)")
    assert cache_lock.process_state(os.getpid()) in ("R", "S")
    assert cache_lock.process_state(2 ** 22 + 12345) is None and not cache_lock.is_stopped(2 ** 22 + 12345)


@pytest.mark.parametrize("text, seconds", [("300", 300.0), (" 2.5 ", 2.5), ("none", None), ("inf", None)])
def test_lock_timeout_values(text, seconds):
    assert cache_lock.parse_lock_timeout(text) == seconds


@pytest.mark.parametrize("text", ["0", "-3", "abc", "nan", ""])
def test_bad_lock_timeout_values_name_the_option_and_the_fix(text):
    with pytest.raises(ValueError, match=r"--privleak-lock-timeout=.* is not a number of seconds > 0; fix: e.g. "
                                         r"--privleak-lock-timeout=300 .*=none to wait without limit"):
        cache_lock.parse_lock_timeout(text)


def test_the_lock_timeout_option_and_ini_reach_the_cache(pytester):
    pytester.makepyfile(test_lock_timeout=textwrap.dedent("""
        from pytest_privleak.cache.lock import CONFIGURED, configured_lock_timeout
        from pytest_privleak.cache.targets import TargetCache

        def test_timeout(tmp_path, pytestconfig):
            expected = float(pytestconfig.getini("privleak_lock_timeout") or 0) or None
            if pytestconfig.getoption("privleak_lock_timeout"):
                expected = float(pytestconfig.getoption("privleak_lock_timeout"))
            assert TargetCache(tmp_path).lock_timeout is CONFIGURED
            assert configured_lock_timeout(CONFIGURED) == expected
    """))
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-lock-timeout", "7").assert_outcomes(passed=1)
    pytester.makeini("[pytest]\nprivleak_lock_timeout = 42\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    bad = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-lock-timeout=soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--privleak-lock-timeout='soon' is not a number of seconds > 0; fix:*"])
    helped = pytester.runpytest_subprocess("--help")
    helped.stdout.fnmatch_lines(["*--privleak-lock-timeout=SECONDS*"])


# --- --privleak-cache-dir naming a file ----------------------------------------------------------

def test_a_cache_dir_that_is_a_file_is_refused_naming_the_option(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(CacheURLError, match=r"--privleak-cache-dir .*: 'notes.txt' names the cache folder .*notes.txt, "
                                            r"but it is a file, not a folder. Fix: give a folder"):
        cache_location("notes.txt", root=tmp_path)
    with pytest.raises(CacheURLError, match=r"lies under .*notes.txt, which is a file"):
        cache_location("notes.txt/sub", root=tmp_path)
    assert cache_location("fresh/sub", root=tmp_path) == tmp_path / "fresh" / "sub"  # a missing folder is fine


def test_a_cache_dir_that_is_a_file_is_one_usage_error(pytester):
    pytester.makefile(".txt", notes="x")
    pytester.makepyfile(test_one="def test_one(privleak_cache):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-cache-dir=notes.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-cache-dir*'notes.txt' names the cache folder*is a file*Fix:*"])
    assert "FileExistsError" not in result.stdout.str() + result.stderr.str()


# --- results of a URL cache without a key (issue 21 item 7) ------------------------------------------

def _measured():
    return [LeakResult(attack="exposure", metric="exposure_bits", value=13.29, label="pin")]


def test_untrusted_reason(monkeypatch, tmp_path):
    monkeypatch.delenv(HMAC_KEY_ENV, raising=False)
    reason = untrusted_reason("s3://bucket/privleak-cache")
    assert reason and "s3://bucket/privleak-cache" in reason and f"{HMAC_KEY_ENV} is not set" in reason
    assert "every attack is recomputed" in reason and "secrets." in reason
    assert untrusted_reason(tmp_path) is None and untrusted_reason(str(tmp_path)) is None  # a local folder
    monkeypatch.setenv(HMAC_KEY_ENV, "kept outside the cache")
    assert untrusted_reason("s3://bucket/privleak-cache") is None


def test_an_untrusted_result_cache_neither_loads_nor_stores(tmp_path, fresh_warning):
    key = "a" * 64
    ResultCache(tmp_path).store(key, "exposure", _measured())
    with pytest.warns(UnsignedCacheWarning, match="result cache entry"):
        assert ResultCache(tmp_path).load(key) is not None  # a local folder: trusted, said once to be unsigned
    untrusted = ResultCache(tmp_path, untrusted="a shared URL without a key")
    assert untrusted.load(key) is None and untrusted.loaded == []
    untrusted.store("b" * 64, "exposure", _measured())
    assert not (tmp_path / ("b" * 64 + ".json")).exists() and untrusted.stored == []


LDP_TEST = """
from pytest_privleak.ldp import KRR, measure_ldp

def test_audit():
    measure_ldp(KRR(3, 1.0), samples=10_000, train_samples=1_000, val_samples=2_000, progress=None)
"""


@pytest.mark.slow  # two pytest subprocesses per case: 36-41 s on the shared machine
@pytest.mark.parametrize("key", [None, "kept outside the cache"])
def test_a_url_cache_trusts_results_only_with_a_key(pytester, tmp_path, monkeypatch, key):
    pytest.importorskip("fsspec")
    monkeypatch.setenv("PRIVLEAK_CACHE_MIRROR", str(tmp_path / "mirror"))
    if key is None:
        monkeypatch.delenv(HMAC_KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(HMAC_KEY_ENV, key)
    pytester.makepyfile(test_ldp=LDP_TEST)
    url = f"--privleak-cache-dir=file://{tmp_path}/shared"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", url).assert_outcomes(passed=1)
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", url)
    second.assert_outcomes(passed=1)
    out = second.stdout.str()
    if key is None:
        assert "privleak result cache not trusted: the cache is the shared URL file://" in out
        assert f"{HMAC_KEY_ENV} is not set" in out and "Fix: set" in out
        assert "result(s) loaded" not in out
    else:
        assert "not trusted" not in out and "1 result(s) loaded" in out
