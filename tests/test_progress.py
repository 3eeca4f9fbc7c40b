"""Progress people can see (issue 11 item 7): events, their display, the xdist channel, and pytest runs."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from filelock import FileLock

from pytest_privleak.progress import events as progress
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.cache.lock import CacheLockTimeout, hold_lock
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.ldp.budget import AuditClock
from pytest_privleak.progress.events import Event
from pytest_privleak.progress.channel import FolderReader, FolderSink, ReportSink, RunFolder, open_worker_sink
from pytest_privleak.progress.display import Display
from pytest_privleak.targets import train_target

TINY = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)


@pytest.fixture
def events():
    """Every event of the block, in a list (the plugin's own sink is put back afterwards)."""
    seen: list[Event] = []
    previous = progress.set_sink(seen.append)
    yield seen
    progress.set_sink(previous)


@pytest.fixture
def no_sink():
    """Library use outside pytest: no sink installed."""
    previous = progress.set_sink(None)
    yield
    progress.set_sink(previous)


class Lines:
    """A display writer that records what it was asked to write."""

    def __init__(self):
        self.lines: list[str] = []
        self.statuses: list[str] = []

    def line(self, text):
        self.lines.append(text)

    def status(self, text):
        self.statuses.append(text)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def tiny_data(seed=4):
    return inject_canaries(generate_snips_like(n_train=60, n_valid=15, n_test=15, seed=seed),
                           canary("pin", 4, seed=1), repeats=10)


# --- the event API ---------------------------------------------------------------------------------


def test_without_a_sink_only_events_with_a_plain_line_print_it_on_stderr(no_sink, capsys):
    progress.emit(progress.EPOCH, "t", done=1, total=2, line="[privleak] t epoch 1/2")
    progress.emit(progress.START, "t")
    progress.emit(progress.DONE, "t", source=progress.TRAINED, seconds=1.0)
    assert capsys.readouterr().err == "[privleak] t epoch 1/2\n"


def test_a_failing_sink_never_fails_the_work_it_reports_on(capsys):
    def broken(event):
        raise RuntimeError("display gone")

    previous = progress.set_sink(broken)
    try:
        progress.emit(progress.EPOCH, "t", line="[privleak] still printed")
    finally:
        progress.set_sink(previous)
    assert "[privleak] still printed" in capsys.readouterr().err


def test_events_round_trip_through_json():
    event = Event(progress.EPOCH, "lstm-lm 81ab02cd", done=3, total=30, eta=12.5, worker="gw1", host="h")
    assert Event.from_json(json.loads(json.dumps(event.to_json()))) == event


# --- what training, the cache, the lock and the LDP audit emit ---------------------------------------


def test_training_reports_each_epoch_then_trained_and_a_second_call_loaded_from_cache(tmp_path, events):
    first = train_target("joint-bilstm-crf", tiny_data(), cache=TargetCache(tmp_path), seed=0, **TINY)
    label = f"joint-bilstm-crf {first.content_hash[:8]}"
    assert [(e.kind, e.target, e.done, e.total) for e in events] == [
        ("start", label, None, None), ("epoch", label, 1, 2), ("epoch", label, 2, 2), ("done", label, None, None)]
    assert events[-1].source == "trained" and events[-1].seconds > 0
    assert events[1].line.startswith(f"[privleak] {label} epoch 1/2 train ")  # the plain line, as before
    assert events[2].eta == 0 and events[1].eta > 0
    events.clear()
    train_target("joint-bilstm-crf", tiny_data(), cache=TargetCache(tmp_path), seed=0, **TINY)
    assert [(e.kind, e.target, e.source) for e in events] == [("done", label, "loaded from cache")]


def test_progress_false_reports_no_epochs(events):
    train_target("joint-bilstm-crf", tiny_data(), cache=None, seed=0, progress=False, **TINY)
    assert not [e for e in events if e.kind == progress.EPOCH]


def test_a_lock_wait_is_reported_as_the_target_being_built_naming_the_holder(tmp_path, events):
    lock_path = tmp_path / "k.lock"
    held = FileLock(str(lock_path))
    held.acquire()
    try:
        with progress.target("joint-bilstm-crf 3fa9c2e1"), pytest.raises(CacheLockTimeout):
            with hold_lock(lock_path, timeout=0.5, message_every=0.1, what="cache entry k"):
                pass
    finally:
        held.release()
    waits = [e for e in events if e.kind == progress.WAIT]
    assert len(waits) >= 2 and all(e.target == "joint-bilstm-crf 3fa9c2e1" for e in waits)
    assert all(e.source.startswith("waiting for the lock held by ") for e in waits)
    assert (waits[0].seconds, waits[0].line) == (0.0, None)  # at once, for the display only
    assert waits[1].seconds > 0 and waits[1].line.startswith("[privleak] waiting ")  # then the plain lines


def test_an_ldp_audit_reports_samples_and_a_final_event_only_once_it_reported_progress(events):
    clock = AuditClock("KRR(k=3, epsilon=1)", progress=0)
    clock.plan(400)
    clock.advance(100, "search")
    clock.advance(300, "final estimate")
    clock.finish()
    assert [(e.kind, e.done, e.total, e.unit) for e in events] == [
        ("audit", 100, 400, "sample"), ("audit", 400, 400, "sample"), ("audit-done", 400, 400, "sample")]
    assert events[0].target == "ldp audit KRR(k=3, epsilon=1)" and events[1].phase == "final estimate"
    events.clear()
    quiet = AuditClock("m", progress=60)  # a run shorter than its progress interval: nothing at all
    quiet.advance(10)
    quiet.finish()
    assert events == []


def test_an_explicit_audit_stream_still_gets_the_plain_line(events):
    out = io.StringIO()
    clock = AuditClock("m", progress=0, stream=out)
    clock.advance(5)
    assert out.getvalue().startswith("privleak ldp [m]: search: 5/5 samples") and events[0].line is None


# --- the display ---------------------------------------------------------------------------------------


def _epochs(display, clock, target="t 1234abcd", n=30, seconds=1.0, **who):
    display.handle(Event(progress.START, target, **who))
    for k in range(1, n + 1):
        clock.now += seconds
        display.handle(Event(progress.EPOCH, target, done=k, total=n, eta=(n - k) * seconds, **who))
    display.handle(Event(progress.DONE, target, source=progress.TRAINED, seconds=n * seconds, **who))


def test_plain_lines_come_every_5_s_and_10_percent_then_one_final_line():
    out, clock = Lines(), Clock()
    _epochs(Display(out, live=False, clock=clock, host="here"), clock)
    # epoch k at k s: due at 5, 10, ... (5 s apart, 1/6 of the work each), never once per epoch
    assert out.lines == [f"[privleak] t 1234abcd: epoch {k}/30, ETA {30 - k:.0f} s" if 30 - k >= 10 else
                         f"[privleak] t 1234abcd: epoch {k}/30, ETA {30 - k:.1f} s" for k in (5, 10, 15, 20, 25, 30)] \
        + ["[privleak] t 1234abcd: trained in 30 s (30/30 epochs)"]
    assert out.statuses == []


def test_a_fast_training_gets_only_its_final_line_and_a_slow_one_at_most_ten():
    out, clock = Lines(), Clock()
    display = Display(out, live=False, clock=clock, host="here")
    _epochs(display, clock, "fast 00000000", n=40, seconds=0.1)
    assert out.lines == ["[privleak] fast 00000000: trained in 4.0 s (40/40 epochs)"]
    out.lines.clear()
    _epochs(display, clock, "slow 11111111", n=400, seconds=1.0)
    assert 1 < len(out.lines) <= 11 and out.lines[-1].endswith("trained in 6 min 40 s (400/400 epochs)")


def test_quiet_shows_only_final_lines_and_a_target_loaded_again_is_not_repeated():
    out, clock = Lines(), Clock()
    display = Display(out, live=True, verbosity=-1, clock=clock, host="here")
    _epochs(display, clock, seconds=10.0)
    display.handle(Event(progress.WAIT, "u 22222222", source="waiting for the lock held by PID 7", seconds=30))
    display.handle(Event(progress.DONE, "u 22222222", source=progress.LOADED))
    display.handle(Event(progress.DONE, "u 22222222", source=progress.LOADED, worker="gw1"))
    assert out.lines == ["[privleak] t 1234abcd: trained in 5 min 00 s (30/30 epochs)",
                         "[privleak] u 22222222: loaded from cache"]
    assert out.statuses == []


def test_live_mode_rewrites_one_status_line_for_all_open_targets_of_all_workers():
    out, clock = Lines(), Clock()
    display = Display(out, live=True, clock=clock, host="here")
    display.handle(Event(progress.EPOCH, "a 11111111", done=1, total=3, eta=20.0, worker="gw0", host="here"))
    display.handle(Event(progress.WAIT, "b 22222222", worker="gw1", host="there", seconds=30,
                         source="waiting for the lock held by PID 7 on host there"))
    assert out.statuses[-1] == ("[privleak] a 11111111 [gw0]: epoch 1/3, ETA 20 s | b 22222222 [gw1 on there]: "
                                "waiting for the lock held by PID 7 on host there (30 s so far)")
    display.handle(Event(progress.DONE, "a 11111111", worker="gw0", source=progress.TRAINED, seconds=12.34))
    assert out.lines == ["[privleak] a 11111111 [gw0]: trained in 12 s (1/3 epochs, stopped early)"]
    assert out.statuses[-1].startswith("[privleak] b 22222222 [gw1 on there]: waiting")
    display.close("gw1")
    assert out.statuses[-1] == "" and display.tasks == {}


def test_with_early_stopping_the_eta_is_shown_as_an_upper_bound(events):
    train_target("joint-bilstm-crf", tiny_data(), cache=None, seed=0, **{**TINY, "early_stopping": True})
    assert [e.eta_at_most for e in events if e.kind == progress.EPOCH] == [True, True]
    out = Lines()
    display = Display(out, live=True, host="here")
    display.handle(Event(progress.EPOCH, "t 1234abcd", done=20, total=100, eta=399.0, eta_at_most=True))
    assert out.statuses == ["[privleak] t 1234abcd: epoch 20/100, ETA at most 6 min 39 s"]


def test_an_audit_line_counts_samples_and_its_final_line_says_how_many():
    out, clock = Lines(), Clock()
    display = Display(out, live=False, clock=clock, host="here")
    clock.now = 6.0
    display.handle(Event(progress.AUDIT, "ldp audit m", done=1_200_000, total=2_400_000, eta=12.0,
                         unit="sample", phase="final estimate", seconds=6.0))  # an audit reports once it is long
    display.handle(Event(progress.AUDIT_DONE, "ldp audit m", done=2_400_000, total=2_400_000, unit="sample",
                         seconds=23.4))
    assert out.lines == ["[privleak] ldp audit m: final estimate: 1,200,000/2,400,000 samples (50%), ETA 12 s",
                         "[privleak] ldp audit m: audited in 23 s (2,400,000 samples)"]


# --- the xdist channel -----------------------------------------------------------------------------------


def test_worker_events_reach_the_controller_whole_and_throttled(tmp_path, no_sink, capsys):
    folder = RunFolder()
    try:
        clock = Clock()
        sink = open_worker_sink(folder.workerinput(), "gw3")
        assert isinstance(sink, FolderSink) and folder.has_worker("gw3")
        sink.clock = clock
        reader = FolderReader(folder.path)
        sink(Event(progress.START, "t"))
        for k in (1, 2, 3):
            clock.now += 0.1
            sink(Event(progress.EPOCH, "t", done=k, total=3, line=f"epoch {k}"))
        got = reader.read()
        # epoch 2 came 0.1 s after epoch 1 and is dropped; the last epoch always passes
        assert [(e.kind, e.done, e.worker) for e in got] == [("start", None, "gw3"), ("epoch", 1, "gw3"),
                                                              ("epoch", 3, "gw3")]
        assert capsys.readouterr().err == "epoch 1\nepoch 2\nepoch 3\n"  # the plain lines, into captured stderr
        with open(folder.path / "gw3.jsonl", "a") as fh:
            fh.write('{"kind": "done", "target": "t", "sou')  # a line still being written
        assert reader.read() == []
        with open(folder.path / "gw3.jsonl", "a") as fh:
            fh.write('rce": "trained"}\n')
        assert [(e.kind, e.source) for e in reader.read()] == [("done", "trained")]
    finally:
        folder.remove()
    assert not folder.path.exists()


def test_the_folder_of_a_killed_controller_is_removed_by_the_next_run(tmp_path):
    dead = tmp_path / (RunFolder.PREFIX + "dead")
    dead.mkdir()
    (dead / "run.json").write_text(json.dumps({"token": "t", "pid": 2 ** 22 + 12345}))  # above Linux's pid_max
    alive = RunFolder(parent=str(tmp_path))
    try:
        assert not dead.exists() and alive.path.exists()
        assert RunFolder.remove_stale(tmp_path) == []  # a running controller's folder stays
    finally:
        alive.remove()


def test_a_worker_that_cannot_reach_the_folder_keeps_its_final_events_for_the_report(tmp_path):
    folder = RunFolder()
    try:
        wrong_token = open_worker_sink({"dir": str(folder.path), "token": "another run"}, "gw0")
        missing = open_worker_sink({"dir": str(tmp_path / "not-here"), "token": folder.token}, "gw1")
    finally:
        folder.remove()
    assert isinstance(wrong_token, ReportSink) and isinstance(missing, ReportSink)
    missing(Event(progress.EPOCH, "t", done=1, total=2))
    missing(Event(progress.DONE, "t", source=progress.TRAINED, seconds=1.5))
    assert [(e["kind"], e["worker"]) for e in missing.take()] == [("done", "gw1")] and missing.take() == []


# --- pytest runs (subprocesses) ----------------------------------------------------------------------------

SUITE = f'''
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like

TINY = {TINY!r}

def data(seed):
    return inject_canaries(generate_snips_like(n_train=60, n_valid=15, n_test=15, seed=seed),
                           canary("pin", 4, seed=1), repeats=10)

def test_a(train_target):
    train_target("joint-bilstm-crf", data(4), **TINY)

def test_b(train_target):
    train_target("joint-bilstm-crf", data(5), **TINY)

def test_a_again(train_target):
    train_target("joint-bilstm-crf", data(4), **TINY)
'''

LDP = '''
from pytest_privleak.ldp import KRR, audit

def test_audit():
    audit(KRR(3, 1.0), samples=20_000, train_samples=1_000, val_samples=2_000, progress=0)
'''

TRAINED = r"\[privleak\] joint-bilstm-crf [0-9a-f]{8}%s: trained in [0-9.]+ s \(2/2 epochs\)"
LOADED = r"\[privleak\] joint-bilstm-crf [0-9a-f]{8}%s: loaded from cache"


def _run(pytester, tmp_root, *args):
    """Run pytest in a subprocess; its stdout exactly as written (with the carriage returns of live mode)."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    raw = (pytester.path / "stdout").read_bytes().decode()
    assert "INTERNALERROR" not in raw + result.stderr.str() and result.ret == 0, raw + result.stderr.str()
    assert not list(Path(tmp_root).glob("privleak-progress-*"))  # the run's folder is gone
    return raw


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    tmp_root = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(tmp_root))
    pytester.makepyfile(test_suite=SUITE)
    return tmp_root


def test_a_cold_run_shows_one_final_line_per_target_without_s_and_keeps_it_out_of_junitxml(pytester, project):
    pytester.makepyfile(test_ldp=LDP)
    out = _run(pytester, project, "--junitxml=j.xml", "-o", "junit_logging=all")
    assert len(re.findall(TRAINED % "", out)) == 2 and not re.search(LOADED % "", out)  # test_a_again: no repeat
    assert re.search(r"\[privleak\] ldp audit KRR\(k=3, epsilon=1\): audited in [0-9.]+ s \([0-9,]+ samples\)", out)
    assert "\r" not in out and "epoch 1/2 train" not in out  # not a tty: plain lines; the per-epoch lines stay in
    xml = (pytester.path / "j.xml").read_text()                # the captured output, not the display's lines
    assert "epoch 1/2 train" in xml and "trained in" not in xml and "audited in" not in xml

    quiet = _run(pytester, project, "test_suite.py", "-q")
    assert len(re.findall(LOADED % "", quiet)) == 2 and "trained in" not in quiet


@pytest.mark.slow  # two cold runs and three warm ones: over a minute on a loaded machine
def test_live_mode_rewrites_in_place_and_quiet_shows_only_final_lines(pytester, project):
    pytester.makepyfile(test_ldp=LDP)
    live = _run(pytester, project, "--privleak-progress=live")
    assert "\r[privleak] ldp audit KRR(k=3, epsilon=1): search" in live  # the status line, rewritten in place
    # the status line: the suite's ETA (once a test is done), then each open task
    assert re.search(r"\r\[privleak\] (suite: \d of 4 test\(s\) done[^|]*\| )?joint-bilstm-crf [0-9a-f]{8}: "
                     r"epoch 1/2, ETA", live)
    assert len(re.findall("\r" + TRAINED % "", live)) == 2  # the final line replaces the status line
    (pytester.path / ".privleak-cache").rename(pytester.path / "old-cache")
    quiet = _run(pytester, project, "-q", "--privleak-progress=live")
    assert "\r" not in quiet and "epoch 1/2," not in quiet and "search" not in quiet
    assert len(re.findall(TRAINED % "", quiet)) == 2 and "audited in" in quiet
    assert "[privleak]" not in _run(pytester, project, "-qq")
    assert "[privleak]" not in _run(pytester, project, "--privleak-progress=off")
    assert "[privleak]" not in _run(pytester, project, "-p", "no:terminal")  # no reporter, no display, no crash


@pytest.mark.slow  # three processes importing torch: 20 s idle, about a minute on a loaded machine
def test_under_xdist_each_target_gets_one_line_labelled_with_its_worker(pytester, project):
    # gw1 plays a worker on another host: the controller's folder is not there for it
    pytester.makeconftest('''
import pytest

@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_configure_node(node):
    if node.workerinput["workerid"] == "gw1":
        node.workerinput["privleak_progress"] = dict(node.workerinput["privleak_progress"], dir="/nonexistent")
''')
    out = _run(pytester, project, "-n", "2")
    assert "worker gw1 does not share this machine's file system" in out
    final = re.findall(r"\[privleak\] joint-bilstm-crf ([0-9a-f]{8}) \[(gw[01])\]: (trained in|loaded from cache)",
                       out)
    trained = sorted(t for t, _, what in final if what == "trained in")
    assert len(set(trained)) == len(trained) == 2, out  # each target trained once, and said so once
    assert len(final) <= 3 and {w for _, w, _ in final} <= {"gw0", "gw1"}, out
