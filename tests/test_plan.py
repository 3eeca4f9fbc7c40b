"""The cost said up front (issue 34 item 1): the plan, the suite's ETA, "seed k of n", long attack phases."""
from __future__ import annotations

import re

import pytest

from pytest_privleak.progress import events as progress
from pytest_privleak.progress.display import Display
from pytest_privleak.progress.events import Event
from pytest_privleak.progress.plan import History, Recorder, SuiteClock, describe_models, plan_line
from pytest_privleak.progress.work import Work


class Lines:
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


@pytest.fixture
def events():
    seen: list[Event] = []
    previous = progress.set_sink(seen.append)
    yield seen
    progress.set_sink(previous)


# --- parts: "seed 3 of 7" ----------------------------------------------------------------------------------


def test_events_in_a_part_carry_it_and_nested_parts_join(events):
    with progress.part("reference 2 of 4"):
        with progress.part("seed 1 of 7"):
            progress.emit(progress.START, "lstm-lm 81ab02cd")
        progress.emit(progress.START, "lstm-lm 0c0c0c0c")
    progress.emit(progress.START, "lstm-lm 11111111", part="seed 5 of 7")   # a batched loop names its part
    assert [e.part for e in events] == ["reference 2 of 4, seed 1 of 7", "reference 2 of 4", "seed 5 of 7"]


def test_the_display_names_the_part_of_a_training_in_its_lines():
    out = Lines()
    display = Display(out, live=False, host="here")
    display.handle(Event(progress.DONE, "joint-bilstm-crf 3fa9c2e1", source=progress.TRAINED, seconds=12.3,
                         part="seed 3 of 7"))
    assert out.lines == ["[privleak] joint-bilstm-crf 3fa9c2e1 (seed 3 of 7): trained in 12 s"]


def test_train_over_seeds_names_each_seed_of_its_trainings(events):
    from pytest_privleak.targets.seeds import train_over_seeds

    def train_one(seed):
        progress.emit(progress.DONE, f"t {seed}", source=progress.TRAINED, seconds=1.0)
        return seed

    train_over_seeds(train_one, 3, seed=10)
    assert [(e.target, e.part) for e in events] == [("t 10", "seed 1 of 3"), ("t 11", "seed 2 of 3"),
                                                    ("t 12", "seed 3 of 3")]


# --- long attack phases ------------------------------------------------------------------------------------


def test_a_phase_shows_progress_only_once_it_runs_longer_than_a_few_seconds(events):
    clock = Clock()
    with Work("exposure of my pin code is 1 2 3 4", 10_000, unit="secret", phase="scored", show_after=3.0,
              clock=clock) as work:
        clock.now = 1.0
        work.advance(2_000)
        clock.now = 4.0
        work.advance(2_000)
    assert [(e.kind, e.done, e.total, e.unit) for e in events] == [("audit", 4_000, 10_000, "secret"),
                                                                    ("audit-done", 4_000, None, "secret")]
    assert events[0].eta == pytest.approx(4.0 / 4_000 * 6_000)
    events.clear()
    with Work("short", 10, unit="secret", phase="scored", clock=Clock()) as work:
        work.advance(10)
    assert events == []                                                         # a fast phase says nothing


def test_an_exhaustive_canary_extraction_and_an_exposure_show_secrets_scored_of_the_space(events, monkeypatch):
    from helpers_models import QuadraticModel
    from pytest_privleak import measure_cea, measure_exposure
    from pytest_privleak.canaries import DIGITS, canary
    from pytest_privleak.progress import work

    monkeypatch.setattr(work, "SHOW_AFTER", 0.0)              # as if every batch came after a few seconds
    pin = canary("pin", 4, seed=1)
    measure_cea(QuadraticModel(("my", "pin", "code", "is") + DIGITS, {"PinIntent": list(pin.tokens)}), pin,
                method="exhaustive", batch_size=2_500)

    class Scorer:
        def score(self, utterances):
            return [float(len(u.tokens[-1])) for u in utterances]

    measure_exposure(Scorer(), pin, batch_size=5_000)
    seen = [(e.kind, e.target, e.done) for e in events if e.kind in (progress.AUDIT, progress.AUDIT_DONE)]
    cea, exposure = f"canary extraction of {pin.text}", f"exposure of {pin.text}"
    assert seen == [*(("audit", cea, n) for n in (2_500, 5_000, 7_500, 10_000)), ("audit-done", cea, 10_000),
                    ("audit", exposure, 5_000), ("audit", exposure, 10_000), ("audit-done", exposure, 10_000)]


def test_the_display_shows_secrets_scored_of_the_space_then_a_final_line():
    out, clock = Lines(), Clock()
    display = Display(out, live=False, clock=clock, host="here")
    clock.now = 6.0
    display.handle(Event(progress.AUDIT, "exposure of x", done=6_000, total=10_000, eta=4.0, seconds=6.0,
                         unit="secret", phase="scored"))
    display.handle(Event(progress.AUDIT_DONE, "exposure of x", done=10_000, seconds=10.0, unit="secret",
                         phase="scored"))
    assert out.lines == ["[privleak] exposure of x: scored: 6,000/10,000 secrets (60%), ETA 4.0 s",
                         "[privleak] exposure of x: scored 10,000 secrets in 10 s"]


# --- the plan ----------------------------------------------------------------------------------------------


def test_models_are_counted_as_targets_times_seeds_references_and_audit_trainings():
    models = {f"joint {i:08x}": {"part": f"seed {i % 7 + 1} of 7"} for i in range(14)}
    models.update({f"reference {j + 1}/4 {j:08x}": {"part": f"seed 1 of 7, reference {j + 1} of 4"}
                   for j in range(4)})
    models.update({"one 0000000a": {"part": None}, "tiny-bert 0000000b": {"part": "seed 1 of 7"},
                   "a1": {"part": "training 1 of 2"}, "a2": {"part": "training 2 of 2"}})
    # the tiny-bert base trained once inside a seed's training is no target of its own
    assert describe_models(models) == ("2 target(s) x 7 seeds = 14 model(s), 2 other model(s), "
                                       "4 reference model(s), 2 audit training(s)")


def _history():
    recorder = Recorder()
    for i, seconds in enumerate((30.0, 40.0)):
        recorder.event(Event(progress.DONE, f"joint {i}", source=progress.TRAINED, seconds=seconds,
                             part=f"seed {i + 1} of 2", test="t.py::test_a"))
    recorder.event(Event(progress.DONE, "joint 0", source=progress.LOADED, part="seed 1 of 2", test="t.py::test_b"))
    recorder.test_done("t.py::test_a", 75.0)
    recorder.test_done("t.py::test_b", 5.0)
    return recorder.history


def test_the_plan_says_what_the_last_run_trained_and_an_estimate_cold_and_warm():
    history = History.from_json(_history().to_json())        # through the JSON kept in pytest's cache
    line = plan_line(["t.py::test_a", "t.py::test_b", "t.py::test_new"], 2, 1, history)
    assert line.startswith("[privleak] plan: 3 test(s), each target trained with 2 seed(s)")
    assert "1 target(s) x 2 seeds = 2 model(s)" in line
    # warm: (75 - 70) + 5 = 10 s; cold: 10 + 30 + 40 = 80 s
    assert "about 80 s with every model trained, about 10 s with the models cached" in line
    assert "1 test(s) not seen before are not included" in line
    assert "about 40 s with every model trained" in plan_line(["t.py::test_a", "t.py::test_b"], 2, 2, history)
    scaled = plan_line(["t.py::test_a", "t.py::test_b"], 4, 1, history)  # 4 seeds now: twice the trainings
    assert "about 2 min 30 s with every model trained" in scaled and "scaled from 2 to 4 seeds" in scaled
    now = plan_line(["t.py::test_a", "t.py::test_b"], 2, 1, history, cached={"joint 0"})   # joint 1 must train
    assert "1 of 2 model(s) in the cache now, so about 50 s (about 80 s with every model trained" in now
    assert "no durations seen yet" in plan_line(["x.py::test"], 7, 1, history)
    assert "pytest's cache is off" in plan_line(["x.py::test"], 7, 1, None)


def test_a_model_only_loaded_keeps_the_training_time_an_earlier_run_measured_and_damage_is_ignored():
    later = Recorder()
    later.event(Event(progress.DONE, "joint 0", source=progress.LOADED, part="seed 1 of 2", test="t.py::test_a"))
    later.test_done("t.py::test_a", 3.0)
    merged = _history().merged(later.history)
    assert merged.models["joint 0"]["seconds"] == 30.0 and merged.tests["t.py::test_a"]["seconds"] == 3.0
    stale = History(models={"joint 0": {"seconds": 30.0, "part": None, "tests": ["t.py::test_a"]},
                            "old 1": {"seconds": 9.0, "part": None, "tests": ["t.py::test_a"]},
                            "other 2": {"seconds": 9.0, "part": None, "tests": ["t.py::test_z"]}})
    assert sorted(stale.merged(later.history).models) == ["joint 0", "other 2"]   # test_a ran without "old 1"
    assert History.from_json({"tests": {"a": {"seconds": "NaN"}}, "models": [1]}).to_json() == {"tests": {},
                                                                                                 "models": {}}
    assert History.from_json("garbage").tests == {}


def test_the_suite_eta_counts_the_training_the_cache_lacks_and_this_runs_pace_on_the_rest():
    clock = Clock()
    history = History(tests={"a": {"seconds": 100.0, "trained": 90.0}, "b": {"seconds": 100.0, "trained": 90.0},
                             "c": {"seconds": 50.0, "trained": 0.0}},
                      models={"m1 00000001": {"seconds": 90.0, "part": None, "tests": ["a"]},
                              "m2 00000002": {"seconds": 60.0, "part": None, "tests": ["b"]},
                              "m3 00000003": {"seconds": 30.0, "part": None, "tests": ["b"]}})
    suite = SuiteClock(["a", "b", "c", "d"], history, workers=2, cached={"m1 00000001", "m2 00000002"}, clock=clock)
    assert suite.expected["b"] == (10.0, 30.0)        # b's training: 90 s, a third of it (m3) not cached
    assert suite.eta() == pytest.approx((10 + 0 + 10 + 30 + 50) / 2)   # d never timed: counted as nothing yet
    clock.now = 5.0
    suite.test_done("a", 5.0, trained=0.0)            # its model loaded; the rest took half as long as before
    # b: 10 * 0.5 + 30, c: 50 * 0.5, d: the mean of this run's tests (5 s): over 2 workers
    assert suite.eta() == pytest.approx((35 + 25 + 5) / 2)
    assert suite.text() == "suite: 1 of 4 test(s) done, 5.0 s so far, ETA 32 s"
    first = SuiteClock(["x", "y"], None, clock=clock)
    first.test_done("x", 1.0)                         # a first run: nothing timed, no promise from one cheap test
    assert first.eta() is None and first.text().endswith("no ETA: the tests left were never timed (the next "
                                                         "run gives one)")
    for nodeid in "bcd":
        suite.test_done(nodeid, 1.0)
    assert suite.eta() == 0.0


def test_the_cache_check_finds_a_models_entry_by_the_hash_its_label_ends_with(tmp_path):
    from pytest_privleak.progress.plan import in_cache, model_key

    (tmp_path / ("3fa9c2e1" + "0" * 56)).mkdir()
    (tmp_path / ("81ab02cd" + "0" * 56 + ".lock")).touch()     # a lock file is no entry
    models = {"joint-bilstm-crf 3fa9c2e1": {}, "lstm-lm 81ab02cd": {}, "reference 1/4 (offline)": {}}
    assert in_cache(models, tmp_path) == {"joint-bilstm-crf 3fa9c2e1"}
    assert in_cache(models, "s3://bucket/cache") is None and in_cache(models, tmp_path / "none") is None
    assert model_key("reference 1/4 (offline)") is None


def test_the_display_writes_the_suite_line_now_and_then_and_heads_the_live_status_with_it():
    out, clock = Lines(), Clock()
    display = Display(out, live=False, clock=clock, host="here")
    display.suite("suite: 1 of 4 test(s) done", force=True)
    clock.now = 10.0
    display.suite("suite: 2 of 4 test(s) done")
    clock.now = 31.0
    display.suite("suite: 3 of 4 test(s) done")
    assert out.lines == ["[privleak] suite: 1 of 4 test(s) done", "[privleak] suite: 3 of 4 test(s) done"]
    live = Lines()
    display = Display(live, live=True, host="here")
    display.suite("suite: 1 of 4 test(s) done, ETA 9 s")
    display.handle(Event(progress.EPOCH, "lstm-lm 81ab02cd", done=1, total=2, eta=3.0, part="seed 1 of 7"))
    assert live.statuses[-1] == ("[privleak] suite: 1 of 4 test(s) done, ETA 9 s | lstm-lm 81ab02cd (seed 1 of 7): "
                                 "epoch 1/2, ETA 3.0 s")
    display.finish()
    assert live.statuses[-1] == "[privleak] lstm-lm 81ab02cd (seed 1 of 7): epoch 1/2, ETA 3.0 s"


# --- through pytest ----------------------------------------------------------------------------------------

TINY = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)

PROJECT = f'''
import time

import numpy as np
from pytest_privleak import measure_exposure
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like

TINY = {TINY!r}


def test_train(train_target):
    data = inject_canaries(generate_snips_like(n_train=60, n_valid=15, n_test=15, seed=4), canary("pin", 4, seed=1),
                           repeats=10)
    train_target("joint-bilstm-crf", data, **TINY)


class Slow:
    """A scorer as slow as an own model over a large space: 40 batches of 250 secrets, 0.16 s each."""

    def score(self, utterances):
        time.sleep(0.16)
        return np.arange(len(utterances), dtype=float)


def test_long_exact_exposure():
    measure_exposure(Slow(), canary("pin", 4, seed=1), method="exact", batch_size=250)
'''


@pytest.mark.slow  # two runs of pytest in subprocesses, one with a 6 s exposure: about 30 s on a loaded machine
def test_a_run_says_its_plan_each_seed_and_the_progress_of_a_long_exposure(pytester):
    pytester.makepyfile(test_project=PROJECT)
    first = pytester.runpytest_subprocess("--privleak-seeds", "2", "--privleak-progress", "lines")
    first.assert_outcomes(passed=2)
    out = first.stdout.str()
    assert re.search(r"\[privleak\] plan: 2 test\(s\), each target trained with 2 seed\(s\) \(--privleak-seeds\); "
                     r"no durations seen yet", out), out
    seeds = re.findall(r"\[privleak\] joint-bilstm-crf [0-9a-f]{8} \(seed (\d) of 2\): trained in", out)
    assert sorted(seeds) == ["1", "2"], out
    assert re.search(r"\[privleak\] exposure of my pin code is \d \d \d \d: scored: [\d,]+/10,000 secrets "
                     r"\(\d+%\), ETA", out), out                              # a line during the long exposure
    assert re.search(r"exposure of my pin code is \d \d \d \d: scored 10,000 secrets in", out), out
    assert re.search(r"\[privleak\] suite: [12] of 2 test\(s\) done", out), out

    warm = pytester.runpytest_subprocess("--privleak-seeds", "2", "--privleak-progress", "lines", "-k", "train")
    warm.assert_outcomes(passed=1)
    plan = re.search(r"\[privleak\] plan: 1 test\(s\).*", warm.stdout.str()).group(0)
    assert "as the last run saw them: 1 target(s) x 2 seeds = 2 model(s)" in plan, plan
    assert re.search(r"2 of 2 model\(s\) in the cache now, so about [\d.]+ s \(about [\d.]+ s with every model "
                     r"trained", plan), plan
    assert len(re.findall(r"\(seed \d of 2\): loaded from cache", warm.stdout.str())) == 2
