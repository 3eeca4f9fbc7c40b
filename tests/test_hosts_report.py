"""The report names the host of each test and worker; a worker that died is shown with its host."""
from __future__ import annotations

from types import SimpleNamespace

from pytest_privleak.cache.opening import open_cache
from pytest_privleak.plugin.collector import ResultCollector
from pytest_privleak.report.html import render_html
from pytest_privleak.report.json_writer import validate
from pytest_privleak.report.terminal import report_lines
from pytest_privleak.plugin.settings import Settings, parse_lease_ttl


def _node(worker, host, output=None):
    return SimpleNamespace(workerinput={"workerid": worker, "privleak_host": host, "privleak_local_index": 0},
                           workeroutput=output or {})


def test_a_worker_that_died_on_host_h2_is_reported_with_that_host_everywhere():
    collector = ResultCollector(SimpleNamespace(hook=SimpleNamespace()), Settings())
    collector.pytest_runtest_logreport(SimpleNamespace(nodeid="t.py::train", when="???", outcome="failed",
                                                       node=_node("gw1", "h2")))
    collector.pytest_testnodedown(_node("gw1", "h2"), "Not properly terminated")
    report = collector.build()
    validate(report)
    [worker] = report["run"]["workers"]
    assert (worker["id"], worker["host"], worker["status"], worker["hostname"]) == ("gw1", "h2", "crashed", None)
    [test] = report["tests"]
    assert (test["outcome"], test["worker"], test["host"]) == ("crashed", "gw1", "h2")
    assert ("worker gw1 on host h2 crashed while running t.py::train (Not properly terminated); its later "
            "results are missing") in report_lines(report, [], {}, [])
    page = render_html(report)
    assert "Worker gw1 on host h2 crashed while running t.py::train" in page
    assert "workers: gw1 on host h2 (device not used, crashed)" in page


def test_the_lease_ttl_setting_reaches_a_url_cache_and_a_folder_needs_none(tmp_path):
    ttl = parse_lease_ttl(" 7.5 ")
    assert ttl == 7.5 and parse_lease_ttl("") is None
    remote = open_cache("memory://privleak-hosts-ttl", lease_ttl=ttl, mirror_dir=tmp_path / "mirror")
    assert remote.lease_ttl == 7.5
    assert open_cache("memory://privleak-hosts-ttl", lease_ttl=None, mirror_dir=tmp_path / "m2").lease_ttl == 120.0
    assert open_cache(tmp_path / "folder", lease_ttl=ttl).root == tmp_path / "folder"
