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
_HASH = re.compile(r"[0-9a-f]{8}")


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
        loaded keeps the training seconds an earlier run measured; an old model that only tests of ``newer``
        used and that ``newer`` did not see is gone (its config or data changed: a new label took its place)."""
        tests = {**self.tests, **newer.tests}
        ran = set(newer.tests)
        models = {label: entry for label, entry in self.models.items()
                  if label in newer.models or not entry.get("tests") or not set(entry["tests"]) <= ran}
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
    """``6 target(s) x 7 seeds = 42 model(s), 1 other model(s), 4 reference model(s), 100 audit training(s)``.

    Models are grouped by what trained them (the label without its hash) and the seed count of their part;
    a group of ``k x n`` models is ``k`` targets, the rest of a group (a base model trained once inside a
    seed's training) other models.
    """
    groups: dict[tuple[str, int], int] = {}
    other = references = audit = 0
    for label, entry in models.items():
        part = entry.get("part") or ""
        found = _SEED.search(part)
        if _REFERENCE.search(part):
            references += 1
        elif _TRAINING.search(part):
            audit += 1
        elif found:
            key = (label.rsplit(" ", 1)[0], int(found.group(2)))
            groups[key] = groups.get(key, 0) + 1
        else:
            other += 1
    seeded: dict[int, int] = {}
    for (_, n), count in groups.items():
        seeded[n] = seeded.get(n, 0) + count // n
        other += count % n
    parts = [f"{targets} target(s) x {n} seeds = {targets * n} model(s)" for n, targets in sorted(seeded.items())
             if targets]
    if other:
        parts.append(f"{other} other model(s)")
    if references:
        parts.append(f"{references} reference model(s)")
    if audit:
        parts.append(f"{audit} audit training(s)")
    return ", ".join(parts) or "no trained model"


def model_key(label: str) -> str | None:
    """The content-hash prefix a model's label ends with (``"joint-bilstm-crf 3fa9c2e1"``), or None."""
    last = label.rsplit(" ", 1)[-1]
    return last if _HASH.fullmatch(last) else None


def in_cache(models: dict[str, dict[str, Any]], root: Any) -> set[str] | None:
    """The labels of ``models`` whose entry is in the target cache folder ``root`` now (an entry is a folder
    named by the content hash its label starts); None when ``root`` is not a readable folder (a URL cache)."""
    import os

    try:
        names = [entry.name for entry in os.scandir(root) if entry.is_dir()]
    except (OSError, TypeError):
        return None
    prefixes = {name[:8] for name in names}
    return {label for label in models if model_key(label) in prefixes}


def models_of(history: History, nodeids: Iterable[str]) -> dict[str, dict[str, Any]]:
    wanted = set(nodeids)
    return {label: m for label, m in history.models.items() if wanted & set(m.get("tests", []))}


def plan_line(nodeids: Iterable[str], seeds: int, workers: int, history: History | None,
              cached: set[str] | None = None) -> str:
    """The plan of a run of ``nodeids``: what the last run saw them train, how long that took, and, when the
    target cache could be looked at (``cached``: the labels of the models in it), what this run should take."""
    nodeids = list(dict.fromkeys(nodeids))
    head = f"[privleak] plan: {len(nodeids)} test(s), each target trained with {seeds} seed(s) (--privleak-seeds)"
    if history is None:
        return head + "; no durations kept (pytest's cache is off: -p no:cacheprovider), so no estimate"
    seen = [n for n in nodeids if n in history.tests]
    if not seen:
        return head + "; no durations seen yet for these tests: this run measures them and the next one " \
                      "prints an estimate"
    models = models_of(history, nodeids)
    attacks = sum(max(history.tests[n]["seconds"] - history.tests[n]["trained"], 0.0) for n in seen)
    known = {label: _scaled(m, seeds) for label, m in models.items() if m.get("seconds") is not None}
    cold = attacks + sum(known.values())
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
    estimate = (f"about {describe_seconds(cold / workers)} with every model trained, about "
                f"{describe_seconds(attacks / workers)} with the models cached{split}")
    if cached is not None and models:
        now = attacks + sum(s for label, s in known.items() if label not in cached)
        estimate = (f"{len(cached & set(models))} of {len(models)} model(s) in the cache now, so about "
                    f"{describe_seconds(now / workers)}{split} (about {describe_seconds(cold / workers)} with every "
                    "model trained; attack results the cache holds make it shorter)")
    return (head + f"; as the last run saw them: {describe_models(models)}; estimate from the durations seen: "
            + estimate + (f" ({'; '.join(notes)})" if notes else ""))


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

    Per remaining test (its last ``{"seconds", "trained"}`` in the history): its training, scaled by the
    share of its models' training time that is not in the cache now (``cached``: the labels in it; None:
    unknown, all of it), plus the rest (attacks, loading), scaled by this run's pace on that rest so far
    (the finished tests' seconds outside training now over the last run's; 1 before any: attack results
    the cache holds make a warm run faster than its models alone say). A test not seen before counts as
    the mean of this run's finished tests; with no remaining test ever timed there is no ETA. The sum is
    split over the workers.
    """

    def __init__(self, nodeids: Iterable[str], history: History | None = None, *, workers: int = 1,
                 cached: set[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.pending = list(dict.fromkeys(nodeids))
        self.total = len(self.pending)
        self.workers, self.clock = max(int(workers), 1), clock
        history = history or History()
        self.expected: dict[str, tuple[float, float]] = {}   # nodeid -> (seconds outside training, training now)
        for nodeid in self.pending:
            last = history.tests.get(nodeid)
            if last is None:
                continue
            trained = min(last["trained"], last["seconds"])
            mine = {label: m["seconds"] for label, m in history.models.items()
                    if nodeid in m.get("tests", []) and m.get("seconds")}
            total = sum(mine.values())
            if cached is None or total <= 0:
                share = 1.0      # unknown: as much training as the last time
            else:
                share = sum(s for label, s in mine.items() if label not in cached) / total
            self.expected[nodeid] = (last["seconds"] - trained, trained * share)
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

    def pace(self) -> float:
        """This run's seconds outside training over the last run's, on the finished tests (1 before any)."""
        known = [n for n in self.finished if n in self.expected and self.expected[n][0] > 0]
        before = sum(self.expected[n][0] for n in known)
        now = sum(max(self.finished[n] - self.trained[n], 0.0) for n in known)
        return now / before if before > 0 else 1.0

    def eta(self) -> float | None:
        """Seconds left, or None when no remaining test was ever timed (a first run: the mean of its cheap
        first tests would promise minutes for what takes an hour, so it promises nothing)."""
        if not self.pending:
            return 0.0
        if not any(n in self.expected for n in self.pending):
            return None
        pace = self.pace()
        mean = sum(self.finished.values()) / len(self.finished) if self.finished else 0.0
        left = 0.0
        for nodeid in self.pending:
            if nodeid in self.expected:
                rest, training = self.expected[nodeid]
                left += rest * pace + training
            else:
                left += mean
        return left / self.workers

    def text(self) -> str:
        """``suite: 5 of 16 test(s) done, 3 min 10 s so far, ETA 9 min 02 s``."""
        eta = self.eta()
        so_far = describe_seconds(self.clock() - self.start)
        return (f"suite: {len(self.finished)} of {self.total} test(s) done, {so_far} so far"
                + (f", ETA {describe_seconds(eta)}" if eta is not None else
                   ", no ETA: the tests left were never timed (the next run gives one)"))
