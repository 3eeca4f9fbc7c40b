"""The controller's merge of the two result channels (test reports and worker payloads), in process."""
from __future__ import annotations

import json
import socket
from types import SimpleNamespace

from pytest_privleak.plugin.collector import PAYLOAD_KEY, ResultCollector, WorkerRecorder
from pytest_privleak.results import LeakResult
from pytest_privleak.plugin.settings import Settings


def _config(seen):
    hook = SimpleNamespace(pytest_privleak_result=lambda config, nodeid, result: seen.append((nodeid, result.label)))
    return SimpleNamespace(hook=hook, workerinput={"workerid": "gw1"}, workeroutput={})


def _report(nodeid, labels, when="call", outcome="passed", worker="gw1"):
    results = [LeakResult(attack="cea", metric="accuracy", value=0.1, label=lab).to_json() for lab in labels]
    return SimpleNamespace(nodeid=nodeid, when=when, outcome=outcome, failed=outcome == "failed",
                           skipped=outcome == "skipped", duration=0.5,
                           node=SimpleNamespace(workerinput={"workerid": worker}),
                           privleak={"results": results, "device": "cuda:1", "seed": 0})


def _payload(reports):
    worker = WorkerRecorder(_config([]), lambda: "cuda:1")
    for rep in reports:
        worker.pytest_runtest_logreport(rep)
    worker.pytest_sessionfinish()
    return worker.config.workeroutput


def test_results_seen_on_both_channels_are_counted_once_and_payload_fills_the_gaps():
    seen = []
    collector = ResultCollector(_config(seen), Settings())
    collector.pytest_runtest_logreport(_report("t.py::a", ["x", "y"]))
    # the payload repeats t.py::a and brings t.py::b, whose test report never arrived
    out = _payload([_report("t.py::a", ["x", "y"]), _report("t.py::b", ["z"], outcome="failed")])
    collector.pytest_testnodedown(SimpleNamespace(workerinput={"workerid": "gw1"}, workeroutput=out), None)
    assert seen == [("t.py::a", "x"), ("t.py::a", "y"), ("t.py::b", "z")]
    assert [(c.nodeid, c.result.label, c.outcome) for c in collector.collected] == [
        ("t.py::a", "x", "passed"), ("t.py::a", "y", "passed"), ("t.py::b", "z", "failed")]
    report = collector.build()
    assert report["run"]["workers"] == [{"id": "gw1", "host": None, "hostname": socket.gethostname(),
                                         "device": "cuda:1", "gpu": None, "status": "ok", "error": None,
                                         "crashed_test": None}]
    assert json.loads(out[PAYLOAD_KEY])["worker"] == "gw1"


def test_a_worker_without_payload_or_with_an_error_is_crashed():
    collector = ResultCollector(_config([]), Settings())
    collector.pytest_testnodedown(SimpleNamespace(workerinput={"workerid": "gw0"}, workeroutput={}), None)
    out = _payload([])
    collector.pytest_testnodedown(SimpleNamespace(workerinput={"workerid": "gw1"}, workeroutput=out), "boom")
    collector.pytest_runtest_logreport(SimpleNamespace(nodeid="t.py::c", when="???", outcome="failed",
                                                       node=SimpleNamespace(workerinput={"workerid": "gw1"})))
    workers = {w["id"]: w for w in collector.build()["run"]["workers"]}
    assert workers["gw0"]["status"] == "crashed" and "no privleak results" in workers["gw0"]["error"]
    assert workers["gw1"]["status"] == "crashed" and workers["gw1"]["error"] == "boom"
    assert workers["gw1"]["crashed_test"] == "t.py::c"


def test_every_fixture_of_the_plugin_makes_a_privacy_test():
    """A test using any of the plugin's fixtures (``ner_dataset`` too) is reported even when it records nothing."""
    from _pytest.fixtures import FixtureFunctionDefinition

    from pytest_privleak import plugin

    fixtures = {name for name, obj in vars(plugin).items() if isinstance(obj, FixtureFunctionDefinition)}
    assert "ner_dataset" in fixtures and fixtures <= plugin.PRIVLEAK_FIXTURES


def test_a_tests_duration_counts_setup_call_and_teardown_once_each():
    """A module-scoped fixture that trains a target spends its time in the setup of the first test that uses
    it: shards and xdist balance on durations, so that time must count."""
    collector = ResultCollector(_config([]), Settings())
    for when, seconds in (("setup", 20.0), ("call", 0.5), ("teardown", 0.25), ("call", 0.5)):
        report = _report("t.py::a", [] if when != "call" else ["x"], when=when)
        report.duration = seconds
        collector.pytest_runtest_logreport(report)
    assert collector.tests["t.py::a"].duration == 20.75


def test_a_lines_colour_is_the_verdict_its_builder_gave_it_not_its_first_words():
    """Issue 17 item 4: a note that starts like an alarm stays plain; an error that does not is red."""
    from pytest_privleak.plugin.collector import _is_alarm
    from pytest_privleak.report.lines import Line, alarm, plain

    written = []
    terminal = SimpleNamespace(section=lambda *a, **k: None,
                               write_line=lambda line, **markup: written.append((str(line), bool(markup))))
    settings = Settings(baseline=None)
    collector = ResultCollector(SimpleNamespace(hook=None), settings)
    collector.errors = ["the disk is full"]           # every error fails the run: red whatever its words
    collector.pytest_terminal_summary(terminal)
    assert written == [("the disk is full", True)]
    note = plain("privleak: ini privleak_allow_missing = true is ignored by the baseline gate")
    assert isinstance(note, str) and note == str(note) and not _is_alarm(note)
    assert _is_alarm(alarm("all fine?")) and not _is_alarm(Line("REGRESSION-looking text"))
