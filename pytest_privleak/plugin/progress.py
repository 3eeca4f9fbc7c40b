"""Live progress of target training and long audits through pytest's terminal writer, issue 11 item 7.

Under pytest's output capture, the per-epoch lines of a cold training land
in captured stderr and a new user sees only dots. This plugin module installs
a :mod:`pytest_privleak.progress.events` sink that writes through the terminal
writer with capture suspended (as pytest's live logging does), one line per
target (:mod:`pytest_privleak.progress.display`):

* default verbosity: live on a terminal (one status line rewritten in place),
  rate-limited plain lines otherwise (CI logs), and a final line per target:
  ``trained in 12.3 s (30/30 epochs)`` or ``loaded from cache``; the same for
  LDP audits that run longer than their ``progress`` interval (5 s);
* ``-q``: only the final lines; ``-qq``: nothing;
* ``-s`` without xdist: nothing new (the plain stderr lines are not captured);
* ``-p no:terminal``: nothing new; ``--privleak-progress=off`` turns it off,
  ``live``/``lines`` force a mode (ini ``privleak_progress``).

The plain stderr lines are still written (into the captured output, so a
failing test's report keeps its training log). Under xdist workers send
their events through a per-run folder (:mod:`pytest_privleak.progress.channel`);
a worker on another host (``--tx ssh=...``) gets no live progress, and the
final line of each of its targets is shown when the test that trained it reports.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import pytest

from ..progress import events as progress

MODES = ("auto", "live", "lines", "off")


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register ``--privleak-progress`` and its ini default."""
    group = parser.getgroup("privleak", "privacy leakage assertions (pytest-privleak)")
    group.addoption("--privleak-progress", dest="privleak_progress", default=None, choices=MODES, metavar="MODE",
                    help="live progress of target training and long LDP audits: auto (default: rewritten in place "
                         "on a terminal, a few plain lines otherwise), live, lines, or off; -q shows only each "
                         "target's final line, -qq nothing")
    parser.addini("privleak_progress", "default for --privleak-progress", default="auto")


class TerminalOut:
    """Writes the display's lines through pytest's terminal reporter, with output capture suspended.

    A line always starts on a fresh line: after the reporter's open line of dots
    (or the file name it wrote when the test started) a newline comes first,
    and the reporter writes its next result on a new line, as with live logging.
    """

    def __init__(self, reporter, capman) -> None:
        self.reporter, self.capman = reporter, capman
        self._lock = threading.RLock()
        self._status = False
        self._left: str | None = None
        self._resume: os.PathLike | None = None  # the test file the reporter was writing results for

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        with self._lock:
            if self.capman is None:
                yield
            else:
                with self.capman.global_and_fixture_disabled():
                    yield

    @property
    def _tw(self):
        return self.reporter._tw

    def _status_is_current(self) -> bool:
        """Our status line is the terminal's last line: nobody wrote since (the writer's line is as we left it)."""
        return (self._status and self.reporter.currentfspath is None
                and getattr(self._tw, "_current_line", None) == self._left)

    def _fresh_line(self) -> None:
        before = self.reporter.currentfspath
        if before or self._tw.width_of_current_line:
            self._tw.line()
        self.reporter.currentfspath = None
        if isinstance(before, os.PathLike) and self._resume is None:
            self._resume = before

    def before_result(self) -> None:
        """Write the test file's name again before the reporter's next dot, so the dot follows its file."""
        with self._writing():
            if self._resume is None or self._status_is_current() or self._tw.width_of_current_line:
                return
            self._tw.write(os.path.relpath(self._resume, self.reporter.startpath) + " ")
            self.reporter.currentfspath, self._resume = self._resume, None

    def line(self, text: str) -> None:
        with self._writing():
            if self._status_is_current():
                self.reporter.rewrite(text, erase=True)
                self._tw.line()
            else:
                self._fresh_line()
                self._tw.line(text)
            self._status = False
            self._tw.flush()

    def status(self, text: str) -> None:
        """Rewrite the status line in place (``""``: erase it)."""
        with self._writing():
            if not self._status_is_current():
                if not text:
                    return
                self._fresh_line()
            width = max(self._tw.fullwidth - 1, 20)
            self.reporter.rewrite(text if len(text) <= width else text[:width - 1] + "…", erase=True)
            self._status = bool(text)
            if not text:
                self._tw.write("\r")
            self._tw.flush()
            self._left = getattr(self._tw, "_current_line", None)


def _verbosity(config: pytest.Config) -> int:
    getter = getattr(config, "get_verbosity", None)
    return int(getter()) if getter is not None else int(config.option.verbose)


def _mode(config: pytest.Config) -> str:
    mode = config.getoption("privleak_progress") or config.getini("privleak_progress") or "auto"
    if mode not in MODES:
        raise pytest.UsageError(f"ini option privleak_progress={mode!r} is not one of {', '.join(MODES)}; "
                                "fix: privleak_progress = auto (or live, lines, off)")
    return mode


def _make_display(config: pytest.Config):
    """The display of this (controller or only) process, or None where nothing new is shown."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    mode = _mode(config)
    verbosity = _verbosity(config)
    if reporter is None or mode == "off" or verbosity <= -2:
        return None
    xdist = config.getoption("dist", default="no") not in ("no", None)
    if not xdist and config.getoption("capture", default="fd") == "no":
        return None  # -s: the plain stderr lines reach the terminal already
    from ..progress.display import Display

    live = mode == "live" or (mode == "auto" and bool(reporter.isatty()))
    return Display(TerminalOut(reporter, config.pluginmanager.get_plugin("capturemanager")),
                   live=live, verbosity=verbosity)


@pytest.hookimpl(trylast=True)  # after the terminal reporter and xdist have configured themselves
def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure (last): on a worker, send progress to the controller; on the controller, open the
    display."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        from ..progress.channel import WORKERINPUT_KEY

        info = workerinput.get(WORKERINPUT_KEY)
        if info is not None:  # else the controller shows no progress: the plain stderr lines stay
            config.pluginmanager.register(WorkerProgress(info, workerinput.get("workerid", "gw?")),
                                          "privleak-progress")
        return
    display = _make_display(config)
    if display is not None:
        config.pluginmanager.register(ControllerProgress(display, config), "privleak-progress")


class WorkerProgress:
    """An xdist worker's sink: the controller's folder, or (another host) the final lines on the reports."""

    def __init__(self, info: dict, worker: str) -> None:
        from ..progress.channel import open_worker_sink

        self.sink = open_worker_sink(info, worker)
        self.previous = progress.set_sink(self.sink)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """pytest, on a worker after each phase: attach the progress lines this worker could not write to the
        controller's folder."""
        report = yield
        take = getattr(self.sink, "take", None)
        pending = take() if take is not None else None
        if pending:  # JSON-safe builtins: xdist sends them with the report
            from ..progress.channel import REPORT_ATTR

            setattr(report, REPORT_ATTR, pending)
        return report

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        """pytest, before each test on a worker: its events name the test (for the next run's plan)."""
        progress.set_current_test(nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        """pytest, after each test on a worker: later events belong to no test."""
        progress.set_current_test(None)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """pytest, at exit on a worker: give the progress sink back."""
        progress.set_sink(self.previous)


class ControllerProgress:
    """The display of this process, fed by its own events and, under xdist, by its workers'; the run's plan at
    start and the suite's ETA as tests finish (:mod:`pytest_privleak.progress.plan`)."""

    def __init__(self, display, config: pytest.Config | None = None) -> None:
        from ..progress.plan import Recorder

        self.display = display
        self.config = config
        self.folder = None
        self.poller = None
        self.recorder = Recorder()
        self.suite = None
        self._durations: dict[str, float] = {}
        self._lock = threading.Lock()
        self.previous = progress.set_sink(self.sink)

    def sink(self, event: progress.Event) -> None:
        progress.print_line(event)  # into the captured output, as before: a failing test keeps its log
        self.handle(event)

    def handle(self, event: progress.Event) -> None:
        """Any event of this run (this process's or a worker's): recorded for the next plan, then shown."""
        try:
            self.recorder.event(event)
        finally:
            self.display.handle(event)

    # the plan and the suite's ETA --------------------------------------------------------------

    def _history(self):
        from ..progress.plan import HISTORY_KEY, History

        cache = getattr(self.config, "cache", None)
        return None if cache is None else History.from_json(cache.get(HISTORY_KEY, None))

    def _cache_folder(self):
        """The target cache's folder (None for a URL cache: the plan does not look into it)."""
        from . import SETTINGS_KEY

        settings = self.config.stash.get(SETTINGS_KEY, None)
        folder = getattr(settings, "cache_dir", None)
        return folder if folder is not None and not isinstance(folder, str) else None

    def _workers(self) -> int:
        count = getattr(self.config.option, "numprocesses", None) if self.config is not None else None
        return count if isinstance(count, int) and count > 0 else 1

    def start_plan(self, nodeids: list[str]) -> None:
        """Say the plan of the collected tests, then keep the suite's ETA."""
        from ..progress.plan import SuiteClock, in_cache, models_of, plan_line
        from .seeds import SEEDS_KEY

        if self.suite is not None or self.config is None or not nodeids:
            return
        history = self._history()
        seeds = self.config.stash.get(SEEDS_KEY, 1)
        cached = None if history is None else in_cache(models_of(history, nodeids), self._cache_folder())
        self.display.note(plan_line(nodeids, seeds, self._workers(), history, cached))
        self.suite = SuiteClock(nodeids, history, workers=self._workers(), cached=cached)

    @pytest.hookimpl(trylast=True)   # after the reporter's "collected N items"
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """pytest, after collection (no xdist): the plan of the tests that will run."""
        if getattr(self.config.option, "dist", "no") in ("no", None):
            self.start_plan([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        """xdist, on the controller: the plan, from the first worker's collection (every worker collects all)."""
        self.start_plan(list(ids))

    def _test_phase(self, report: pytest.TestReport) -> None:
        """Add a phase's seconds to its test; at teardown the test is done: record it, move the suite's ETA on."""
        nodeid = report.nodeid
        self._durations[nodeid] = self._durations.get(nodeid, 0.0) + float(getattr(report, "duration", 0.0) or 0.0)
        if report.when != "teardown":
            return
        seconds = self._durations.pop(nodeid)
        self.recorder.test_done(nodeid, seconds)
        if self.suite is not None:
            self.suite.test_done(nodeid, seconds, self.recorder.history.tests[nodeid]["trained"])
            first = len(self.suite.finished) == 1 and self.suite.total > 1   # an early ETA, then now and then
            self.display.suite(self.suite.text(), force=first)

    # xdist: a folder for the workers' events ------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist, on the controller per worker: make the run's progress folder and tell the worker where it is."""
        from ..progress.channel import WORKERINPUT_KEY, FolderReader, Poller, RunFolder

        with self._lock:
            if self.folder is None:
                self.folder = RunFolder()
                self.poller = Poller(FolderReader(self.folder.path), self.handle)
                self.poller.start()
        node.workerinput[WORKERINPUT_KEY] = self.folder.workerinput()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node) -> None:
        """xdist, on the controller: start reading the progress of a worker that has no folder reader yet."""
        worker = node.workerinput.get("workerid", "?")
        if self.folder is None or self.folder.has_worker(worker):
            return
        spec = getattr(getattr(node, "gateway", None), "spec", None)
        where = f" (ssh={spec.ssh})" if getattr(spec, "ssh", None) else ""
        self.display.handle(progress.Event(progress.NOTE, line=(
            f"[privleak] worker {worker}{where} does not share this machine's file system, so it shows no live "
            "progress; each of its targets gets its final line when the test that trained or loaded it reports")))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist, on the controller: show what the worker wrote before it went down."""
        if self.poller is not None:
            self.poller.drain()
        self.display.close(node.workerinput.get("workerid"))

    # the final lines of a worker without the folder travel with its reports -----------------

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter writes the result
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """pytest, on the controller per report: show a worker's progress before the test's result."""
        from ..progress.channel import REPORT_ATTR

        if self.poller is not None:  # what a worker wrote before its report is shown before the result
            self.poller.drain()
        for data in getattr(report, REPORT_ATTR, None) or ():
            with contextlib.suppress(ValueError):
                self.handle(progress.Event.from_json(data))
        before_result = getattr(self.display.out, "before_result", None)
        if before_result is not None:
            before_result()
        if report.when in ("setup", "call", "teardown"):
            self._test_phase(report)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        """pytest, before each test of this process: its events name the test (for the next run's plan)."""
        progress.set_current_test(nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        """pytest, after each test: close a progress line this process left open."""
        progress.set_current_test(None)
        self.display.close(None)  # a task of this process left open (e.g. an audit that raised)

    @pytest.hookimpl(tryfirst=True)  # the workers are done: show what is left before the summary
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """pytest, at session end (first): stop reading workers' progress, so the summary comes after it; keep
        what this run saw for the next run's plan."""
        self._stop_poller()
        self.display.finish()
        self._keep_history()

    def _keep_history(self) -> None:
        from ..progress.plan import HISTORY_KEY

        cache = getattr(self.config, "cache", None)
        seen = self.recorder.history
        if cache is None or not (seen.tests or seen.models):
            return
        try:
            cache.set(HISTORY_KEY, self._history().merged(seen).to_json())
        except OSError:   # the plan is a convenience: an unwritable cache costs the next estimate, never the run
            pass

    def _stop_poller(self) -> None:
        if self.poller is not None:
            self.poller.stop()
            self.poller = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """pytest, at exit on the controller: stop reading, remove the progress folder, give the sink back."""
        self._stop_poller()
        if self.folder is not None:
            self.folder.remove()
        progress.set_sink(self.previous)
