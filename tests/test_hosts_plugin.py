"""Hosts of xdist workers, end to end with ``--tx popen`` workers (local, so a cheap stand-in for ``ssh=``).

The controller places each worker (host, index on that host) in its
``workerinput``; the worker pins the GPU of that index; every test and every
worker of the report names its host, a dead worker included.
"""
from __future__ import annotations

import json
import socket

import pytest

SUITE = '''
import os
import pytest
from pytest_privleak.assertions import check
from pytest_privleak.results import LeakResult


@pytest.mark.parametrize("n", range(4))
def test_figure(n, request):
    if request.config.workerinput["workerid"] == "gw0":
        os._exit(3)                                   # gw0 dies in its first test; xdist replaces it
    check(LeakResult(attack="cea", metric="accuracy", value=0.25 * n, threshold=1.0, label=f"pin {n}"))
'''

#: On each worker, after the plugins configured it: what the controller sent and which GPU was pinned.
CONFTEST = '''
import json, os
import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if hasattr(config, "workerinput"):
        seen = {k: config.workerinput.get(k) for k in ("workerid", "privleak_host", "privleak_local_index")}
        seen["pinned"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        with open(f"placed-{seen['workerid']}.json", "w") as fh:
            json.dump(seen, fh)
'''


def test_popen_workers_are_placed_pinned_per_host_and_a_dead_one_is_reported_with_its_host(pytester, monkeypatch):
    pytester.makepyfile(test_hosts=SUITE)
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")   # three GPUs, as the workers count them (no torch)
    result = pytester.runpytest_subprocess("--dist=load", "--tx", "popen", "--tx", "popen", "--privleak-report=rep",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out + result.stderr.str()
    placed = {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in pytester.path.glob("placed-gw*.json")}
    # gw2 replaces the dead gw0 and takes its index (and GPU) on the host; its gw number would give GPU 7
    assert placed == {
        "gw0": {"workerid": "gw0", "privleak_host": "localhost", "privleak_local_index": 0, "pinned": "3"},
        "gw1": {"workerid": "gw1", "privleak_host": "localhost", "privleak_local_index": 1, "pinned": "5"},
        "gw2": {"workerid": "gw2", "privleak_host": "localhost", "privleak_local_index": 0, "pinned": "3"}}
    report = json.loads((pytester.path / "rep" / "report.json").read_text())
    from pytest_privleak.report.json_writer import validate

    validate(report)
    workers = {w["id"]: w for w in report["run"]["workers"]}
    assert workers["gw0"]["status"] == "crashed" and workers["gw0"]["host"] == "localhost"
    assert workers["gw0"]["hostname"] is None                          # it died before telling its name
    assert workers["gw1"]["status"] == "ok" and workers["gw1"]["hostname"] == socket.gethostname()
    crashed = [t for t in report["tests"] if t["outcome"] == "crashed"]
    assert len(crashed) == 1 and crashed[0]["host"] == "localhost" and crashed[0]["worker"] == "gw0"
    assert workers["gw0"]["crashed_test"] == crashed[0]["nodeid"]
    ran = [t for t in report["tests"] if t["outcome"] == "passed"]
    assert len(ran) == 3 and {t["host"] for t in ran} == {"localhost"} and {t["worker"] for t in ran} <= {"gw1", "gw2"}
    assert f"worker gw0 crashed while running {crashed[0]['nodeid']}" in out


def test_workers_on_another_host_with_a_folder_cache_are_warned_about_once(pytester):
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    # --co: xdist starts no worker, so no host is needed to see the warning
    result = pytester.runpytest_subprocess("--tx", "2*ssh=root@gpu-a//python=python3", "--tx", "ssh=gpu-b",
                                           "--co", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*CacheNotSharedWarning: --tx workers on gpu-a, gpu-b with a target cache in a "
                                 "folder (*.privleak-cache): each host trains its own copy*Fix: give every host "
                                 "the same cache URL*"])
    assert result.stdout.str().count("CacheNotSharedWarning: --tx workers") == 1
    quiet = pytester.runpytest_subprocess("--tx", "ssh=gpu-a", "--co", "-p", "no:cacheprovider",
                                          "--privleak-cache-dir=memory://shared")
    assert "CacheNotSharedWarning" not in quiet.stdout.str()
