"""The cost said up front: the run's plan, from what earlier runs saw, and an ETA for the whole suite (issue 34).

A new user's first question is how long this will take. The plugin keeps, in
pytest's cache (:data:`HISTORY_KEY`), what each test cost the last time it
ran and which models it trained or loaded (:class:`History`, filled by
:class:`Recorder` from the progress events and the test reports). At start
:func:`plan_line` says what the collected tests will do and how long that
took before::

    [privleak] plan: 16 test(s); as the last run saw them: 9 target(s) x 7 seeds = 63 models, 4 reference
    models; estimate from the durations seen: about 27 min with every model trained, about 40 s with the
    models cached (1 worker)

and :class:`SuiteClock` then gives an ETA for the suite as tests finish: the
last run's durations of the tests still to run, scaled by how this run
compares with the last on the tests done so far (a warm run after a cold one
speeds up at once), split over the workers.

Models are told apart by their progress label (kind and content hash) and
the part of a larger job they were (``seed 3 of 7``, ``reference 2 of 4``,
``training 5 of 100``). No pytest and no torch here.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import events as progress
from .display import describe_seconds

__all__ = ["HISTORY_KEY", "History", "Recorder", "SuiteClock", "plan_line", "describe_models"]

#: pytest cache key of the history (``config.cache``), beside the durations of :mod:`..distribute.durations`.
HISTORY_KEY = "privleak/plan"
_SEED = re.compile(r"\bseed (\d+) of (\d+)")
_REFERENCE = re.compile(r"\breference (\d+) of (\d+)")
_TRAINING = re.compile(r"\btraining (\d+) of (\d+)")


@dataclass
class History:
    """What earlier runs saw: per test its seconds and the seconds it spent training; per model label the
    seconds its training took (None: only ever loaded), its part and the tests that used it."""

    tests: dict[str, dict[str, float]] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tests": self.tests, "models": self.models}

    @classmethod
    def from_json(cls, data: Any) -> "History":
        """The history in ``data``; an empty one for anything that is not (a damaged entry costs the estimate)."""
        if not isinstance(data, dict):
            return cls()
        tests, models = {}, {}
        for nodeid, entry in (data.get("tests") or {}).items() if isinstance(data.get("tests"), dict) else ():
            seconds = entry.get("seconds") if isinstance(entry, dict) else None
            trained = entry.get("trained", 0.0) if isinstance(entry, dict) else None
            if _finite(seconds) and _finite(trained):
                tests[str(nodeid)] = {"seconds": float(seconds), "trained": float(trained)}
        for label, entry in (data.get("models") or {}).items() if isinstance(data.get("models"), dict) else ():
            if not isinstance(entry, dict):
                continue
            seconds = entry.get("seconds")
            used_by = entry.get("tests")
            models[str(label)] = {"seconds": float(seconds) if _finite(seconds) else None,
                                  "part": entry.get("part") if isinstance(entry.get("part"), str) else None,
                                  "tests": [str(t) for t in used_by] if isinstance(used_by, list) else []}
        return cls(tests, models)

    def merged(self, newer: "History") -> "History":
        """``newer`` over this one: its tests and models replace the old entries, but a model that was only
        loaded keeps the training seconds an earlier run measured."""
        tests = {**self.tests, **newer.tests}
        models = {**self.models}
        for label, entry in newer.models.items():
            old = models.get(label, {})
            models[label] = {**entry, "seconds": entry["seconds"] if entry["seconds"] is not None
                             else old.get("seconds"),
                             "tests": sorted(set(entry["tests"]) | set(old.get("tests", [])))}
        return History(tests, models)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class Recorder:
    """The controller's record of this run: models from the progress events, tests from their reports."""

    def __init__(self) -> None:
        self.history = History()

    def event(self, event: progress.Event) -> None:
        if event.kind != progress.DONE or event.source not in (progress.TRAINED, progress.LOADED) or not event.target:
            return
        entry = self.history.models.setdefault(event.target, {"seconds": None, "part": event.part, "tests": []})
        if event.source == progress.TRAINED and event.seconds is not None:
            entry["seconds"] = float(event.seconds)
            if event.test:
                test = self.history.tests.setdefault(event.test, {"seconds": 0.0, "trained": 0.0})
                test["trained"] += float(event.seconds)
        if event.test and event.test not in entry["tests"]:
            entry["tests"].append(event.test)

    def test_done(self, nodeid: str, seconds: float) -> None:
        self.history.tests.setdefault(nodeid, {"seconds": 0.0, "trained": 0.0})["seconds"] = float(seconds)


def describe_models(models: dict[str, dict[str, Any]]) -> str:
    """``9 target(s) x 7 seeds = 63 models, 4 reference models, 100 audit trainings`` from the models' parts."""
    seeded: dict[int, int] = {}
    single = references = audit = 0
    for entry in models.values():
        part = entry.get("part") or ""
        if _REFERENCE.search(part):
            references += 1
        elif _TRAINING.search(part):
            audit += 1
        elif _SEED.search(part):
            n = int(_SEED.search(part).group(2))
            seeded[n] = seeded.get(n, 0) + 1
        else:
            single += 1
    parts = []
    for n, count in sorted(seeded.items()):
        targets = math.ceil(count / n)
        parts.append(f"{targets} target(s) x {n} seeds = {count} model(s)" if count == targets * n
                     else f"{count} model(s) of targets trained with {n} seeds")
    if single:
        parts.append(f"{single} single-seed model(s)")
    if references:
        parts.append(f"{references} reference model(s)")
    if audit:
        parts.append(f"{audit} audit training(s)")
    return ", ".join(parts) or "no trained model"


def plan_line(nodeids: Iterable[str], seeds: int, workers: int, history: History | None) -> str:
    """The plan of a run of ``nodeids``: what the last run saw them train and how long that took."""
    nodeids = list(dict.fromkeys(nodeids))
    head = f"[privleak] plan: {len(nodeids)} test(s), each target trained with {seeds} seed(s) (--privleak-seeds)"
    if history is None:
        return head + "; no durations kept (pytest's cache is off: -p no:cacheprovider), so no estimate"
    seen = [n for n in nodeids if n in history.tests]
    if not seen:
        return head + "; no durations seen yet for these tests: this run measures them and the next one " \
                      "prints an estimate"
    wanted = set(nodeids)
    models = {label: m for label, m in history.models.items() if wanted & set(m.get("tests", []))}
    warm = sum(max(history.tests[n]["seconds"] - history.tests[n]["trained"], 0.0) for n in seen)
    known = [_scaled(m, seeds) for m in models.values() if m.get("seconds") is not None]
    cold = warm + sum(known)
    unknown = len(models) - len(known)
    split = f" over {workers} workers" if workers > 1 else ""
    new = len(nodeids) - len(seen)
    notes = []
    if new:
        notes.append(f"{new} test(s) not seen before are not included")
    if unknown:
        notes.append(f"{unknown} model(s) only ever loaded from the cache, their training time unknown")
    then = sorted({int(_SEED.search(m.get("part") or "").group(2)) for m in models.values()
                   if _SEED.search(m.get("part") or "") and not _REFERENCE.search(m.get("part") or "")} - {seeds})
    if then:
        notes.append(f"training time scaled from {'/'.join(map(str, then))} to {seeds} seeds")
    return (head + f"; as the last run saw them: {describe_models(models)}; estimate from the durations seen: "
            f"about {describe_seconds(cold / workers)} with every model trained, about "
            f"{describe_seconds(warm / workers)} with the models cached{split}"
            + (f" ({'; '.join(notes)})" if notes else ""))


def _scaled(model: dict[str, Any], seeds: int) -> float:
    """A model's training seconds, scaled to ``seeds`` when it was one of ``n`` seeds of a target: the target's
    trainings then number ``seeds`` instead of ``n``."""
    part = model.get("part") or ""
    found = _SEED.search(part)
    if found and not _REFERENCE.search(part) and not _TRAINING.search(part):
        return model["seconds"] * seeds / int(found.group(2))
    return model["seconds"]


class SuiteClock:
    """ETA of the whole suite from what each remaining test cost the last time, training apart.

    ``expected``: per test the last run's ``{"seconds", "trained"}`` (:attr:`History.tests`). A test's
    training share is what a warm cache saves, so it is scaled by this run's training pace: the seconds the
    finished tests spent training now over what they spent the last time (1 before any, 0 when nothing
    needed training again); the rest, attacks and loading, is taken as it was. A test not seen before
    counts as the mean of this run's finished tests; with no remaining test ever timed there is no ETA. The
    sum is split over the workers.
    """

    def __init__(self, nodeids: Iterable[str], expected: dict[str, dict[str, float]], *, workers: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pending = list(dict.fromkeys(nodeids))
        self.total = len(self.pending)
        self.expected, self.workers, self.clock = expected, max(int(workers), 1), clock
        self.start = clock()
        self.finished: dict[str, float] = {}
        self.trained: dict[str, float] = {}

    def test_done(self, nodeid: str, seconds: float, trained: float = 0.0) -> None:
        """Test ``nodeid`` took ``seconds``, ``trained`` of them training models."""
        if nodeid in self.finished:
            return
        self.finished[nodeid], self.trained[nodeid] = float(seconds), float(trained)
        if nodeid in self.pending:
            self.pending.remove(nodeid)

    def training_pace(self) -> float:
        known = [n for n in self.finished if n in self.expected]
        before = sum(self.expected[n]["trained"] for n in known)
        return sum(self.trained[n] for n in known) / before if before > 0 else 1.0

    def eta(self) -> float | None:
        """Seconds left, or None when no remaining test was ever timed (a first run: the mean of its cheap
        first tests would promise minutes for what takes an hour, so it promises nothing)."""
        if not self.pending:
            return 0.0
        if not any(n in self.expected for n in self.pending):
            return None
        pace = self.training_pace()
        mean = sum(self.finished.values()) / len(self.finished) if self.finished else None
        left = 0.0
        for nodeid in self.pending:
            last = self.expected.get(nodeid)
            if last is not None:
                trained = min(last["trained"], last["seconds"])
                left += last["seconds"] - trained + trained * pace
            elif mean is not None:
                left += mean
            else:
                return None
        return left / self.workers

    def text(self) -> str:
        """``suite: 5 of 16 test(s) done, 3 min 10 s so far, ETA 9 min 02 s``."""
        eta = self.eta()
        so_far = describe_seconds(self.clock() - self.start)
        return (f"suite: {len(self.finished)} of {self.total} test(s) done, {so_far} so far"
                + (f", ETA {describe_seconds(eta)}" if eta is not None else
                   ", no ETA: the tests left were never timed (the next run gives one)"))
