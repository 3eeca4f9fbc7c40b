"""--privleak-cache-dir and the ini take a URL: the fixture serves a RemoteTargetCache; a bad URL stops the run."""
import pytest

pytest.importorskip("fsspec", reason="the URL cache needs fsspec (pip install 'pytest-privleak[remote-cache]')")

TEST = """
import json
from pytest_privleak.cache.remote import RemoteTargetCache

def test_cache(privleak_cache):
    assert isinstance(privleak_cache, RemoteTargetCache), type(privleak_cache)
    def save(obj, folder):
        (folder / "v.json").write_text(json.dumps(obj))
        return {}
    obj, loaded = privleak_cache.get_or_build("k" * 64, lambda: [1, 2], save,
                                              lambda f: json.loads((f / "v.json").read_text()))
    assert obj == [1, 2]
    print("LOADED" if loaded else "TRAINED")
"""


def test_a_url_cache_is_shared_by_runs_with_their_own_mirrors(pytester, tmp_path, monkeypatch):
    pytester.makepyfile(test_privleak_url_cache_fixture=TEST)
    url = f"file://{tmp_path}/shared"
    outputs = []
    for host in ("host-a", "host-b"):
        monkeypatch.setenv("PRIVLEAK_CACHE_MIRROR", str(tmp_path / f"mirror-{host}"))
        result = pytester.runpytest_subprocess(f"--privleak-cache-dir={url}", "-s")
        result.assert_outcomes(passed=1)
        outputs.append(result.stdout.str())
    assert "TRAINED" in outputs[0] and "LOADED" in outputs[1]
    assert (tmp_path / "shared" / ("k" * 64) / "published.json").is_file()


def test_the_ini_takes_a_url(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVLEAK_CACHE_MIRROR", str(tmp_path / "mirror"))
    pytester.makeini(f"[pytest]\nprivleak_cache_dir = file://{tmp_path}/shared\n")
    pytester.makepyfile(test_privleak_url_cache_fixture=TEST)
    pytester.runpytest().assert_outcomes(passed=1)


def test_an_unknown_protocol_stops_the_run_naming_the_option_and_the_fix(pytester):
    pytester.makepyfile(test_privleak_url_cache_fixture=TEST)
    result = pytester.runpytest("--privleak-cache-dir=nosuchproto://bucket/cache")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-cache-dir (ini: privleak_cache_dir)='nosuchproto://bucket/cache': "
                                 "fsspec knows no protocol 'nosuchproto'. Fix: *"])


def test_a_folder_stays_a_local_cache_under_the_rootdir(pytester):
    pytester.makepyfile(test_privleak_url_cache_fixture="""
from pytest_privleak.cache.targets import TargetCache
def test_local(privleak_cache, pytestconfig):
    assert type(privleak_cache) is TargetCache
    assert privleak_cache.root == pytestconfig.rootpath / "my-cache"
""")
    pytester.runpytest("--privleak-cache-dir=my-cache").assert_outcomes(passed=1)
