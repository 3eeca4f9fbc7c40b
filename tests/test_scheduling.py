"""Speed plumbing of the plugin: --privleak-rerun and xdist groups by the fixtures that feed a model."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pytest_privleak.plugin.speed import GROUP_PREFIX, group_name


MODEL_TESTS = """
import json, os, pytest

@pytest.fixture(scope="module")
def data(privleak_seed):
    return privleak_seed

@pytest.fixture(scope="module")
def other_data(privleak_seed):
    return privleak_seed + 1

def _note(request):
    with open(os.environ["NOTES"], "a") as f:
        f.write(json.dumps([request.node.nodeid, os.environ.get("PYTEST_XDIST_WORKER", "main")]) + "\\n")

@pytest.mark.parametrize("i", range(6))
def test_a(train_target, data, request, i):
    _note(request)

def test_c(train_target, other_data, request):
    _note(request)

def test_trains_in_its_body(train_target, request):
    _note(request)

def test_no_model(data, request):
    _note(request)

@pytest.mark.xdist_group("mine")
def test_own_group(train_target, data, request):
    _note(request)
"""


def test_group_names_come_from_the_shared_fixtures_that_feed_a_model(pytester):
    items = {item.name: item for item in pytester.getitems(MODEL_TESTS)}
    a, b, c = (group_name(items[n]) for n in ("test_a[0]", "test_a[5]", "test_c"))
    assert a == b and a != c and a.startswith(GROUP_PREFIX) and "::data" in a and "::other_data" in c
    assert group_name(items["test_trains_in_its_body"]) is None    # only train_target: nothing shared to group by
    assert group_name(items["test_no_model"]) is None              # no model fixture


def _workers(path) -> dict[str, set[str]]:
    """Test name (parameters dropped) -> the workers that ran it."""
    out: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        nodeid, worker = json.loads(line)
        out.setdefault(nodeid.split("::")[1].split("[")[0], set()).add(worker)
    return out


@pytest.mark.slow  # two xdist runs: about 60 s on the shared 2-core machine
def test_under_xdist_tests_sharing_a_models_fixtures_run_on_one_worker(pytester, monkeypatch):
    pytest.importorskip("xdist")
    notes = pytester.path / "notes.jsonl"
    monkeypatch.setenv("NOTES", str(notes))
    pytester.makepyfile(test_models=MODEL_TESTS)
    args = ("-n", "2", "-p", "no:cacheprovider", f"--privleak-cache-dir={pytester.path / 'cache'}")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=10)
    assert len(_workers(notes)["test_a"]) == 1          # the six tests fed by `data` ran on one worker
    notes.unlink()
    pytester.runpytest_subprocess(*args, "--privleak-group=off").assert_outcomes(passed=10)
    assert len(_workers(notes)["test_a"]) == 2          # plain --dist load spreads them


def test_the_scheduler_takes_each_tests_group_from_the_workers_file(tmp_path):
    from pytest_privleak.distribute.scheduling import GroupScheduling

    (tmp_path / "gw0.json").write_text(json.dumps({"t.py::a": "g", "t.py::b": "g"}))
    scheduler = GroupScheduling.__new__(GroupScheduling)
    scheduler.folder, scheduler._groups = tmp_path, None
    assert scheduler._split_scope("t.py::a") == scheduler._split_scope("t.py::b") == "group:g"
    assert scheduler._split_scope("t.py::c") == "t.py::c"



CRASH_IN_A_GROUP = """
import os, pytest

@pytest.fixture(scope="module")
def data(privleak_seed):
    return privleak_seed

def test_crashes(train_target, data):
    os._exit(3)   # kills its worker, as a segfault or an out-of-memory kill would

def test_after(train_target, data):
    pass
"""


def test_a_test_that_kills_its_worker_runs_once_and_the_rest_of_its_group_runs_elsewhere(pytester):
    """xdist's LoadScopeScheduling would send the crashed test to every replacement worker in turn."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_crash=CRASH_IN_A_GROUP)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider",
                                           f"--privleak-cache-dir={pytester.path / 'cache'}")
    result.assert_outcomes(passed=1, failed=1)
    assert len([line for line in result.outlines
                if line.startswith("worker '") and "crashed while running 'test_crash.py::test_crashes'" in line]) == 1

LDP_TEST = """
from pytest_privleak.ldp import SUE
from pytest_privleak.ldp.assertion import measure_ldp

def test_audit():
    result = measure_ldp(SUE(k=5, epsilon=1.0), samples=5_000, train_samples=1_000, val_samples=2_000, progress=None)
    print("CACHE:", result.evidence.get("result cache", "computed"), "VALUE:", repr(result.value))
"""


def test_a_second_run_loads_the_result_and_privleak_rerun_recomputes_it(pytester):
    from pytest_privleak.cache import results as result_cache
    from pytest_privleak.ldp import SUE
    from pytest_privleak.ldp.assertion import measure_ldp

    previous = result_cache.activate(None)   # warm-up outside any cache: the in-process runs below then
    try:                                      # find numpy/scipy's compiled modules already imported
        measure_ldp(SUE(k=5, epsilon=1.0), samples=5_000, train_samples=1_000, val_samples=2_000, progress=None)
    finally:
        result_cache.activate(previous)
    pytester.makepyfile(test_ldp=LDP_TEST)
    args = ("-s", "-p", "no:cacheprovider", f"--privleak-cache-dir={pytester.path / 'cache'}")

    pytester_lines: list[str] = []

    def run(*extra):
        # In-process (no interpreter and torch start-up per run); importlib mode imports the file afresh.
        result = pytester.runpytest(*args, "--import-mode=importlib", *extra)
        result.assert_outcomes(passed=1)
        pytester_lines.append(result.stdout.str())
        line = next(line for line in result.outlines if "CACHE:" in line)
        return line.split("CACHE:")[1].split("VALUE:")[0].strip(), line.split("VALUE:")[1].strip()

    first, value = run()
    assert first == "computed"
    assert "privleak result cache: 0 result(s) loaded, 1 computed and stored" in pytester_lines[-1]
    assert len(list((pytester.path / "cache" / "results").glob("*.json"))) == 1
    second, again = run()
    assert second.startswith("loaded from the result cache (key ") and again == value
    assert "privleak result cache: 1 result(s) loaded, 0 computed and stored; --privleak-rerun" in pytester_lines[-1]
    third, rerun_value = run("--privleak-rerun")
    assert third == "computed" and rerun_value == value


ORDER_TESTS = """
import os, time, pytest

def note(name):
    with open(os.environ["ORDER"], "a") as out:
        out.write(name + "\\n")
    time.sleep(float(os.environ.get("LONG", "0.4")) if name == "long" else 0.4)

@pytest.mark.xdist_group("many")
@pytest.mark.parametrize("i", range(3))
def test_many(i):
    note("many")

@pytest.mark.xdist_group("pair")
@pytest.mark.parametrize("i", range(2))
def test_pair(i):
    note("pair")

@pytest.mark.xdist_group("long")
def test_long():
    note("long")
"""


def test_with_recorded_durations_the_longest_group_starts_first(pytester, monkeypatch):
    """Without durations xdist orders groups by their number of tests (the one-test group starts last); with
    main's durations the longest group is sent first, so it does not start when the others are done."""
    pytest.importorskip("xdist")
    order = pytester.path / "order.txt"
    monkeypatch.setenv("ORDER", str(order))
    pytester.makepyfile(test_order=ORDER_TESTS)
    durations = {f"test_order.py::test_many[{i}]": 1.0 for i in range(3)}
    durations.update({f"test_order.py::test_pair[{i}]": 1.0 for i in range(2)})
    durations["test_order.py::test_long"] = 100.0
    (pytester.path / "durations.json").write_text(json.dumps(durations))
    args = ("-n", "2", "-p", "no:cacheprovider")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=6)
    by_count = order.read_text().split()
    order.unlink()
    pytester.runpytest_subprocess(*args, "--privleak-shard-durations=durations.json").assert_outcomes(passed=6)
    by_duration = order.read_text().split()
    assert "long" not in by_count[:2] and "long" in by_duration[:2], (by_count, by_duration)
    assert "pair" not in by_duration[:2]


class _Node:
    def __init__(self, name):
        self.name, self.sent, self.shutting_down = name, [], False

    def send_runtest_some(self, indexes):
        self.sent.append(indexes)


def test_a_worker_starting_a_long_test_gets_the_shortest_group_next(tmp_path):
    """Worked by hand: 'a' holds 50 s still to run, the queue holds 20 + 8 + 1 s (a fair share is 14.5 s per
    worker), so 'a' gets the 1 s group; 'b', with 4 s left, gets the 20 s one."""
    from collections import OrderedDict

    from pytest_privleak.distribute.scheduling import GroupScheduling

    ids = ["t.py::long", "t.py::mid", "t.py::small", "t.py::tiny", "t.py::left"]
    scheduler = GroupScheduling.__new__(GroupScheduling)
    a, b = _Node("a"), _Node("b")
    scheduler.registered_collections = {a: ids, b: ids}
    scheduler.config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    scheduler.collection, scheduler._cost = ids, None
    scheduler.durations = {"t.py::long": 50.0, "t.py::mid": 20.0, "t.py::small": 8.0, "t.py::tiny": 1.0,
                           "t.py::left": 4.0}
    scheduler.assigned_work = {a: {"long": {"t.py::long": False}}, b: {"left": {"t.py::left": False}}}
    # xdist's order (by number of tests, all 1 here) would send "mid" first whatever the durations
    scheduler.workqueue = OrderedDict((n.split("::")[1], {n: False}) for n in ids[1:4])
    scheduler._assign_work_unit(a)
    assert a.sent == [[3]] and list(scheduler.workqueue) == ["mid", "small"]
    scheduler._assign_work_unit(b)
    assert b.sent == [[1]] and list(scheduler.workqueue) == ["small"]


def test_without_a_durations_file_the_last_runs_durations_order_the_groups(pytester, monkeypatch):
    """The first run has no history (count order) and records each test's seconds in .pytest_cache; the next
    run starts the group that took longest first. A damaged record is dropped with a warning."""
    pytest.importorskip("xdist")
    order = pytester.path / "order.txt"
    monkeypatch.setenv("ORDER", str(order))
    monkeypatch.setenv("LONG", "3")
    pytester.makepyfile(test_order=ORDER_TESTS)
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=6)
    first = order.read_text().split()
    order.unlink()
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=6)
    second = order.read_text().split()
    assert "long" not in first[:2] and "long" in second[:2], (first, second)
    recorded = json.loads((pytester.path / ".pytest_cache" / "v" / "privleak" / "durations").read_text())
    assert recorded["test_order.py::test_long"] >= 3 and len(recorded) == 6
    (pytester.path / ".pytest_cache" / "v" / "privleak" / "durations").write_text('{"t.py::a": -1}')
    order.unlink()
    damaged = pytester.runpytest_subprocess("-n", "2")
    damaged.assert_outcomes(passed=6, warnings=1)
    damaged.stdout.fnmatch_lines(["*DurationsCacheWarning*not {nodeid: seconds}*"])
    assert "long" not in order.read_text().split()[:2]


def test_the_header_says_why_tests_of_one_model_share_a_worker(pytester):
    """Issue 24 item 6: a one-model suite that runs on one worker says why, in one line."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    grouped = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    grouped.stdout.fnmatch_lines(["privleak: tests that share a model's fixtures run on one xdist worker*"])
    spread = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--privleak-group=off")
    assert "share a model's fixtures run on one xdist worker" not in spread.stdout.str()
