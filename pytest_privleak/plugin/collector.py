"""Gathers every privacy test's results, across xdist workers, into one report.

Two channels carry results to the controlling process, and they are merged
so that nothing is counted twice:

* each test report carries ``report.privleak`` (results, device, seed), which
  xdist ships to the controller as soon as the test ends (so results of tests
  finished before a worker crash survive);
* at the end, each worker puts a JSON payload (its tests, results, device,
  host) in ``config.workeroutput["privleak"]``; the controller reads it in
  ``pytest_testnodedown`` and fills in whatever it has not seen. A worker that
  went down with an error, or without a payload, is recorded as crashed and
  named in the report, with the test it was running and its host.

Each test and worker names its host (``--tx ssh=h1`` workers: ``h1``; ``-n N``:
``localhost``), which the controller knows from the worker's spec
(:mod:`.plugin_hosts`), so a worker that died is still placed.

Results are keyed by (node id, position in the test), so the merged set is
the same with no xdist, ``-n 2`` and ``-p no:xdist``. Both channels carry
results encoded by :func:`results.encode` (plain builtins, non-finite
floats as strings: execnet refuses numpy scalars); the recorder decodes them
with :func:`results.decode_result`, the same way in every mode.

A test marked xfail whose assertion failed is recorded with outcome
``xfailed``; the report shows its leaks as "expected leak".
"""
from __future__ import annotations

import copy
import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..distribute.placement import HOST_KEY
from ..report.lines import Line, alarm, plain
from .. import results as _results
from ..results import decode_result, encode, figure
from ..results import LeakResult, _fmt

PAYLOAD_KEY = "privleak"
#: Until report/terminal.py and report/gate.py build :class:`~report.lines.Line` s, their plain-str lines
#: that report a failure are recognised by these first words (the collector's own lines carry their colour).
_LEGACY_ALARMS = ("REGRESSION", "INVALID", "MISSING", "WEAKENED", "INCONCLUSIVE", "privleak baseline gate FAILED",
                  "worker")
_RED = {"red": True, "bold": True}
_GONE = object()


def _is_alarm(line: str) -> bool:
    """A line's colour: the verdict its builder gave it (a :class:`Line`), else the legacy first words."""
    if isinstance(line, Line):
        return line.alarm
    return line.lstrip().startswith(_LEGACY_ALARMS)


def _identity(result: dict[str, Any]) -> tuple:
    """A result's key within its test and its figure: the same on every worker that computed it alike."""
    return (result.get("attack"), result.get("metric"), result.get("label") or "", repr(result.get("value")))


def _named(result: dict[str, Any]) -> str:
    """``attack.metric [label]`` of a result dict."""
    label = f" [{result['label']}]" if result.get("label") else ""
    return f"{result['attack']}.{result['metric']}{label}"


@dataclass
class CollectedResult:
    """One result with its test, as the terminal table and the hook see it."""

    nodeid: str
    outcome: str
    result: LeakResult
    duration: float = 0.0


@dataclass
class TestRecord:
    """One privacy test: outcome, where and how it ran, and its results (``LeakResult.to_json`` dicts)."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str = "passed"
    duration: float = 0.0
    worker: str | None = None
    device: str | None = None
    seed: int | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    host: str | None = None
    #: seconds of each phase (setup, call, teardown); ``duration`` is their sum, so a target trained by a
    #: module-scoped fixture counts for the test whose setup trained it (what shards and xdist balance on)
    phases: dict[str, float] = field(default_factory=dict)


def _workerinput_of(report: pytest.TestReport) -> dict[str, Any]:
    return getattr(getattr(report, "node", None), "workerinput", None) or {}


def _worker_of(report: pytest.TestReport) -> str | None:
    return _workerinput_of(report).get("workerid")


def _host_of(report: pytest.TestReport) -> str | None:
    """The host the report's worker ran on, as its ``--tx`` spec names it (placed by plugin_hosts)."""
    return _workerinput_of(report).get(HOST_KEY)


class Recorder:
    """Builds :class:`TestRecord` s from test reports; used on workers and on the controller."""

    def __init__(self) -> None:
        self.tests: dict[str, TestRecord] = {}

    def _on_new_results(self, record: TestRecord, start: int) -> None:
        """Called when ``record.results[start:]`` were first seen (the controller runs the hook)."""

    def add_results(self, record: TestRecord, results: list[dict[str, Any]], *, replace: bool) -> None:
        known = len(record.results)
        if replace:
            record.results = list(results)
        elif len(results) > known:
            record.results.extend(results[known:])
        if len(record.results) > known:
            self._on_new_results(record, known)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """pytest, per test report (on the controller: also the workers'): file the results and the outcome under the
        test."""
        meta = getattr(report, "privleak", None)
        if meta is None:
            return
        for key, results in (meta.get("fixtures") or {}).items():
            self.add_fixture_results(key, [decode_result(r) for r in results], report)
        if meta.get("fixture_only") and report.nodeid not in self.tests:
            return
        record = self.tests.setdefault(report.nodeid, TestRecord(report.nodeid))
        record.worker = _worker_of(report) or record.worker
        record.host = _host_of(report) or record.host
        record.device = meta.get("device") or record.device
        record.seed = meta.get("seed", record.seed)
        xfailed = report.skipped and hasattr(report, "wasxfail")  # pytest reports an xfail as skipped
        record.phases[report.when] = float(getattr(report, "duration", 0.0) or 0.0)
        record.duration = sum(record.phases.values())
        if report.when == "setup":
            record.results = []   # a test run again (a rerun plugin) starts over
        if report.when == "call":
            record.outcome = "xfailed" if xfailed else report.outcome
        elif report.failed:
            record.outcome = "error"
        elif report.when == "setup" and report.skipped:
            record.outcome = "xfailed" if xfailed else "skipped"
        self.append_results(record, [decode_result(r) for r in meta.get("results", [])])

    def append_results(self, record: TestRecord, results: list[dict[str, Any]]) -> None:
        if results:
            start = len(record.results)
            record.results.extend(results)
            self._on_new_results(record, start)

    def add_fixture_results(self, key: str, results: list[dict[str, Any]], report: pytest.TestReport) -> None:
        """Results of a wider-scoped fixture (key ``scope::name``), carried by the report of the phase it ran in."""
        worker = _worker_of(report)
        record = self.tests.setdefault(key, TestRecord(key, worker=worker))
        if worker and record.worker and worker != record.worker:
            # a session or package fixture set up again on another xdist worker: its same figures count once
            # (different ones stay, and the gate refuses their shared key, naming it)
            known = {_identity(r) for r in record.results}
            results = [r for r in results if _identity(r) not in known]
        record.host = _host_of(report) or record.host
        if report.failed:
            record.outcome = "error"
        self.append_results(record, results)


class WorkerRecorder(Recorder):
    """On an xdist worker: records locally, then hands everything over in ``config.workeroutput``."""

    def __init__(self, config: pytest.Config, device_of, attribution=None) -> None:
        super().__init__()
        self.config = config
        self.device_of = device_of
        self.attribution = attribution

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        # Runs inside xdist's own sessionfinish wrapper, before it sends "workerfinished".
        """xdist, on a worker at session end (first): send this worker's tests and results to the controller."""
        workerinput = self.config.workerinput
        payload = {"worker": workerinput.get("workerid"), "device": self.device_of(),
                   "gpu": os.environ.get("PRIVLEAK_PINNED_GPU"), "host": workerinput.get(HOST_KEY),
                   "hostname": socket.gethostname(),
                   "tests": [asdict(t) for t in self.tests.values()],
                   "unattributed": [{"result": r.to_json(), "where": where}
                                    for r, where in (self.attribution.take_unattributed()
                                                     if self.attribution is not None else [])]}
        self.config.workeroutput[PAYLOAD_KEY] = json.dumps(encode(payload), allow_nan=False)


class ResultCollector(Recorder):
    """On the controller (or a run without xdist): merges, reports, gates, summarises."""

    def __init__(self, config: pytest.Config, settings, baseline: dict | None = None, attribution=None) -> None:
        super().__init__()
        self.config = config
        self.settings = settings
        self.baseline = baseline
        self.attribution = attribution
        #: results recorded outside any test or fixture: (result dict, where, worker), refused at the end
        self.unattributed: list[tuple[dict[str, Any], str, str | None]] = []
        self.workers: dict[str, dict[str, Any]] = {}
        self.crashed_tests: dict[str, str] = {}
        self.report: dict[str, Any] | None = None
        self.written: dict[str, Path] = {}
        self.errors: list[str] = []

    @property
    def collected(self) -> list[CollectedResult]:
        # A declared leak is shown as the test's outcome "xfailed" would show it: "expected leak".
        return [CollectedResult(t.nodeid, "xfailed" if r.get("expected") else t.outcome, LeakResult.from_json(r),
                                t.duration)
                for t in sorted(self.tests.values(), key=lambda t: t.nodeid) for r in t.results]

    def _on_new_results(self, record: TestRecord, start: int) -> None:
        for data in record.results[start:]:
            self.config.hook.pytest_privleak_result(config=self.config, nodeid=record.nodeid,
                                                    result=LeakResult.from_json(data))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """pytest, per report on the controller: a crashed worker's stand-in report marks its test crashed."""
        if report.when == "???":  # xdist's stand-in report for the test a crashed worker was running
            worker = _worker_of(report) or "?"
            self.crashed_tests[worker] = report.nodeid
            record = self.tests.setdefault(report.nodeid, TestRecord(report.nodeid, worker=worker))
            record.outcome = "crashed"
            record.host = _host_of(report) or record.host
            return
        super().pytest_runtest_logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist: a worker finished or died; merge its payload, or record it as crashed."""
        worker = node.workerinput["workerid"]
        host = node.workerinput.get(HOST_KEY)   # from the controller: known even when the worker died
        raw = (getattr(node, "workeroutput", None) or {}).get(PAYLOAD_KEY)
        payload = json.loads(raw) if raw else {}
        for data in payload.get("tests", []):
            record = self.tests.setdefault(data["nodeid"], TestRecord(data["nodeid"], outcome=data["outcome"],
                                                                      duration=data["duration"]))
            record.worker = record.worker or worker
            record.host = record.host or host
            record.device = record.device or data.get("device")
            record.seed = data.get("seed") if record.seed is None else record.seed
            self.add_results(record, [decode_result(r) for r in data.get("results", [])], replace=False)
        for data in payload.get("unattributed", []):
            self.unattributed.append((decode_result(data["result"]), data.get("where", "outside any test"), worker))
        crashed = error is not None or not raw
        reason = None
        if crashed:
            reason = str(error) if error is not None else "the worker sent no privleak results"
        self.workers[worker] = {"id": worker, "host": host, "hostname": payload.get("hostname"),
                                "device": payload.get("device"), "gpu": payload.get("gpu"),
                                "status": "crashed" if crashed else "ok", "error": reason,
                                "crashed_test": None}

    # --- end of session: report, baseline gate, exit status ---------------------------------

    def build(self) -> dict[str, Any]:
        from ..report.model import build_report, make_test_entry

        tests = [make_test_entry(t.nodeid, t.outcome, t.duration, t.worker, t.device, t.seed, t.results,
                                 host=t.host)
                 for t in sorted(self.tests.values(), key=lambda t: t.nodeid)]
        workers = []
        for wid in sorted(self.workers, key=lambda w: (len(w), w)):
            workers.append({**self.workers[wid], "crashed_test": self.crashed_tests.get(wid)})
        report = build_report(tests, workers, seed=self.settings.seed, xdist=bool(self.workers))
        from .settings import SHARD_REPORT_KEY

        stash = getattr(self.config, "stash", None)
        shard = stash.get(SHARD_REPORT_KEY, None) if stash is not None else None   # this run's shard, for the merge
        if shard is not None:
            report["run"]["shard"] = dict(shard)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Build the report, decide the gate, run the report hook, write the files, set the exit status.

        Never raises: whatever goes wrong here (a bug, a user's report hook, a
        full disk) is named in the terminal summary, the rest is still written,
        and the run fails through its exit status.
        """
        settings = self.settings
        if self.attribution is not None:
            self.unattributed += [(decode_result(encode(r.to_json())), where, None)
                                  for r, where in self.attribution.take_unattributed()]
        if not (self.tests or self.unattributed or settings.report_dir or settings.baseline
                or settings.save_baseline):
            return
        try:
            report = self.build()
        except Exception as exc:  # a bug of ours: say so, fail the run, do not crash pytest
            self.errors.append(f"privleak could not build its report ({type(exc).__name__}: {exc}); "
                               "no report was written, please report this as a bug")
            self._set_exit(session, pytest.ExitCode.INTERNAL_ERROR)
            return
        self._set_exit(session, self.finish(report))

    def finish(self, report: dict[str, Any]) -> pytest.ExitCode | None:
        """Gate ``report``, run the report hook, write the files: the exit status the run asks for.

        Also what ``--privleak-merge-reports`` runs on the merged report, so a merge is gated as a run is.
        """
        status = self._gate(report)
        undeclared = self._undeclared(report)
        status = status or undeclared
        if _results.open_expect_leak_blocks():   # a global expect_leak() would declare every leak expected
            self.errors.append("privleak: an expect_leak() block was still open when the run ended, so every "
                               "leak recorded in it counted as expected; close each expect_leak() around the one "
                               "call that should leak (a `with` block)")
        self._run_report_hooks(report)
        self.report = report
        saved = self._write(report)
        if status is None and not saved:
            status = pytest.ExitCode.USAGE_ERROR  # the baseline to save has unusable keys or no result
        if status is None and self.errors:
            status = pytest.ExitCode.TESTS_FAILED
        if self.baseline is not None:   # the gate decided: the run's exit status keeps it (plugin/__init__)
            from .settings import GATE_STATUS_KEY

            self.config.stash[GATE_STATUS_KEY] = status
        return status

    def _run_report_hooks(self, report: dict[str, Any]) -> None:
        """``pytest_privleak_report`` sees the report but cannot change it (issue 36 item 3): every section the
        plugin wrote (the figures, the run, the gate's verdict) is restored after the hooks, and a change to
        one fails the run, naming it; what a hook adds goes into ``report["hooks"]``, a section of its own."""
        frozen = copy.deepcopy(report)
        try:
            self.config.hook.pytest_privleak_report(config=self.config, report=report)
        except Exception as exc:
            self.errors.append(f"privleak: a pytest_privleak_report hook raised {type(exc).__name__}: {exc}; "
                               "the report is written with what the hooks added before it")
        changed = sorted(key for key in frozen if report.get(key, _GONE) != frozen[key])
        added = {key: report[key] for key in report if key not in frozen}
        report.clear()
        report.update(frozen)
        if added:
            report["hooks"] = encode(added)
        if changed:
            self.errors.append(f"privleak: a pytest_privleak_report hook changed the report's "
                               f"{', '.join(repr(k) for k in changed)}; the plugin's figures, run and verdict are "
                               "restored (no hook can change them); put what a hook adds in a key of its own, "
                               "which the report keeps under \"hooks\"")

    def _undeclared(self, report: dict[str, Any]) -> pytest.ExitCode | None:
        """Swallowed leaks and results nobody owns fail the run, one line each naming the test and the result."""
        from ..report.model import swallowed_leaks
        from ..report.printable import printable

        lines = []
        for test, result in swallowed_leaks(report):
            what = ("violates its limit" if result.get("verdict") == "FAIL"
                    else "is inconclusive (not fully measured: see its inconclusive line)")
            lines.append(f"privleak: swallowed {'leak' if result.get('verdict') == 'FAIL' else 'inconclusive'}: "
                         f"{test['nodeid']} {_named(result)} = {_fmt(figure(result['value']))} {what} "
                         f"({_fmt(figure(result.get('threshold')))}), yet the test {test['outcome']}; let the "
                         "assertion fail, or declare the leak with `with pytest_privleak.expect_leak():` "
                         "(or @pytest.mark.xfail)")
        for result, where, worker in self.unattributed:
            on = f" on worker {worker}" if worker else ""
            lines.append(f"privleak: result recorded outside any test or fixture ({where}{on}): {_named(result)} "
                         f"= {_fmt(figure(result['value']))}; it cannot be attributed, shown or gated; record it "
                         "inside a test or a fixture (not at import or collection time, nor from a thread that "
                         "outlives its test)")
        self.errors += [printable(line) for line in lines]   # labels and test ids come from data: no raw NUL or ESC
        return pytest.ExitCode.TESTS_FAILED if lines else None

    @staticmethod
    def _set_exit(session: pytest.Session, status: pytest.ExitCode | None) -> None:
        if status is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = status

    def _gate(self, report: dict[str, Any]) -> pytest.ExitCode | None:
        """Compare with the baseline (if any) into ``report["baseline"]``; the exit status it asks for."""
        from ..report.gate import compare, failed_comparison, gate_exit
        from ..report.keys import key_problems
        from ..results import encode

        settings = self.settings
        if self.baseline is None:
            return None
        problems = key_problems(report["tests"])
        path = str(settings.baseline)
        try:
            comparison = compare(report, self.baseline, settings.gate_tolerances, path,
                                 allow_missing=settings.allow_missing, errors=problems)
        except Exception as exc:
            comparison = failed_comparison(path, f"the comparison could not run ({type(exc).__name__}: {exc}); "
                                                 "please report this as a bug")
        from ..report.baseline_file import unverified_note

        note = unverified_note(self.baseline, path)
        if note:
            comparison["notes"] = [*comparison.get("notes", []), note]
        report["baseline"] = encode(comparison)
        return gate_exit(comparison)

    def _write(self, report: dict[str, Any]) -> bool:
        """Write the report folder and the baseline asked for; ``False`` if the baseline was refused."""
        from ..report.baseline_file import baseline_to_save, sign, with_tolerances
        from ..report.writer import write_baseline, write_report

        settings = self.settings
        if settings.report_dir is not None:
            try:
                # With the tolerances it was written with (and signed): usable as a baseline as it is.
                self.written.update(write_report(sign(with_tolerances(report, settings.tolerances)[0]),
                                                 settings.report_dir))
            except OSError as exc:
                self.errors.append(f"privleak could not write its report: {exc}; check that the folder is "
                                   "writable")
            except Exception as exc:
                self.errors.append(f"privleak could not write its report ({type(exc).__name__}: {exc}); "
                                   "please report this as a bug")
        if settings.save_baseline is None:
            return True
        try:
            baseline, problems = baseline_to_save(report, settings.tolerances)
            if problems:
                self.errors += [f"privleak baseline NOT saved to {settings.save_baseline}: {p}" for p in problems]
                return False
            self.written["baseline"] = write_baseline(baseline, settings.save_baseline)
        except OSError as exc:
            self.errors.append(f"privleak could not write the baseline {settings.save_baseline}: {exc}; check "
                               "that the folder is writable")
        except Exception as exc:
            self.errors.append(f"privleak could not save the baseline {settings.save_baseline} "
                               f"({type(exc).__name__}: {exc}); please report this as a bug")
        return True

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """pytest, in the terminal summary: the results table, crashed workers, the gate and where the report went."""
        from ..report.terminal import report_lines

        errors = [alarm(error) for error in self.errors]   # each one fails the run
        if self.report is None:
            lines = errors
        else:
            # fit a person's terminal (its width, $COLUMNS where set); a log (CI, a pipe, an xdist worker, which
            # sets COLUMNS=80 whatever the screen) keeps whole cells to grep
            writer = getattr(terminalreporter, "_tw", None)
            columns = getattr(writer, "fullwidth", None) if getattr(terminalreporter, "isatty", False) else None
            lines = report_lines(self.report, self.collected, self.written, errors, columns)
        if self.settings.baseline is not None:
            lines += [plain(note) for note in self.settings.ignored]   # said, not failed
        if not lines:
            return
        terminalreporter.section("privleak results")
        for line in lines:
            terminalreporter.write_line(line, **(_RED if _is_alarm(line) else {}))
