"""Own models' trainings spread over processes: this process's cores, or the run's xdist workers (issue 35 item 2).

A team's own training function cannot be batched like the built-in targets,
so the ``k`` seeds of ``train_own_model(..., seeds=k)`` and the references of
a ``TargetRecipe(train=...)`` train in parallel instead. :func:`prefetch`
takes those trainings (:class:`OwnTraining`, one ``train_own_model`` call
each) and makes sure the target cache holds every one; the caller then calls
``train_own_model`` as before, which loads them. Each is the same call with
the same arguments wherever it runs (one torch thread, the global RNG seeded
by its seed), so seed ``s`` gives the same weights as one after another.

* **No xdist workers** (``--privleak-train-processes``, default: the cores
  this process may use): this process trains the first missing trainings
  itself while ``processes - 1`` new Python processes
  (``python -m pytest_privleak.targets.parallel``) take the last ones, each
  publishing to the cache; their progress events come back to this process.
* **xdist workers** (the board, :mod:`pytest_privleak.distribute.board`): the
  worker posts the missing trainings as jobs and works through them; a worker
  that has run out of tests claims jobs and runs them (on its own device: the
  GPUs of ``--privleak-devices`` too); the poster loads their results,
  waiting on the cache's lock or lease for one under way.

A new process (or another worker) runs ``train``, ``build`` (and the
training's ``sources=``) by their module and name, with the dataset sent as
JSON, so this needs: a cache (``cache=None`` trains here), a
:class:`~pytest_privleak.data.types.NLUDataset`, a CPU device for the pool
(one GPU is not shared between processes), and functions a new Python
process can import from the same file: a function in a package of the
project or in a test module that pytest imports by its name (the default
``--import-mode=prepend``) does; ``__main__``, ``--import-mode=importlib``
and a module no longer on ``sys.path`` do not. Anything else trains here,
one after another as before, with one line saying why. A training that fails
in another process is trained again here, so its error reads as before.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..progress import events as progress

__all__ = ["OwnTraining", "NotPortable", "configure", "current", "prefetch", "help_others", "usable_cores"]


@dataclass(frozen=True)
class Spread:
    """How this process spreads trainings: ``processes`` (1: no pool), ``board`` (an xdist run's job board)."""

    processes: int = 1
    board: Any = None


_spread = Spread()


def configure(processes: int = 1, board: Any = None) -> Spread:
    """Set how :func:`prefetch` spreads trainings in this process (the plugin does, from
    ``--privleak-train-processes`` and the xdist board); returns the previous setting."""
    global _spread
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes={processes!r} must be an integer >= 1 (1: one training at a time)")
    previous, _spread = _spread, Spread(processes, board)
    return previous


def current() -> Spread:
    return _spread


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class NotPortable(Exception):
    """A training that only this process can run; the message says why, in a few words."""


@dataclass(frozen=True)
class OwnTraining:
    """One ``train_own_model(train, dataset, build=..., wrap=..., cache=..., ...)`` call."""

    train: Callable[..., Any]
    dataset: Any
    build: Callable[[Any], Any]
    wrap: Callable[[Any], Any] | None = None
    cache: Any = None
    device: str = "cpu"
    seed: int = 0
    sources: Sequence[str] = ()
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def run(self) -> Any:
        from .own_model import train_own_model

        return train_own_model(self.train, self.dataset, build=self.build, wrap=self.wrap, cache=self.cache,
                               device=self.device, seed=self.seed, sources=self.sources, name=self.name,
                               **self.config)

    def check(self) -> None:
        """The errors ``train_own_model`` gives these arguments, raised before anything is spread."""
        from .own_model import _check

        _check(self.train, self.build, self.wrap, self.dataset)

    def key(self) -> str:
        from .own_model import own_model_key

        return own_model_key(self.train, self.dataset, self.config, seed=self.seed, device=self.device,
                             sources=self.sources)

    @property
    def label(self) -> str:
        return self.name or f"{getattr(self.train, '__qualname__', 'model')} {self.key()[:8]}"


# --------------------------------------------------------------------------- a training as JSON


def _function(function: Any, argument: str) -> dict[str, str]:
    """Where another process finds ``function``: its module (importable from ``sys.path``), name and file."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    name = getattr(function, "__qualname__", "")
    where = f"{argument}={getattr(function, '__module__', '?')}:{name}"
    if "<lambda>" in name or "<locals>" in name:
        raise NotPortable(f"{where} is a lambda or a function defined inside another, which a new process cannot "
                          "import by its name")
    if module is None or module.__name__ == "__main__" or not getattr(module, "__file__", None):
        raise NotPortable(f"{where} is in __main__ or in no file, which a new process cannot import")
    file = Path(module.__file__).resolve()
    if not _findable(module.__name__, file):
        raise NotPortable(f"{where}: a new process would not find {file} as module {module.__name__!r} on sys.path "
                          "(e.g. a test module under pytest's --import-mode=importlib)")
    return {"module": module.__name__, "name": name, "file": str(file)}


def _findable(name: str, file: Path) -> bool:
    """Whether importing ``name`` from ``sys.path`` in a new process would load ``file``."""
    import importlib.machinery

    top = name.split(".")[0]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if "." not in name:
        return spec.origin is not None and Path(spec.origin).resolve() == file
    roots = [Path(p).resolve() for p in (spec.submodule_search_locations or [])]
    return any(root in file.parents for root in roots)


def _resolve(spec: dict[str, str], argument: str) -> Any:
    """The function ``spec`` names, from the same file; :class:`NotPortable` when this process cannot import it."""
    import importlib

    where = f"{argument}={spec['module']}:{spec['name']}"
    module = sys.modules.get(spec["module"])
    if module is None:
        try:
            module = importlib.import_module(spec["module"])
        except Exception as exc:  # noqa: BLE001 - any failure to import means: train it where it was asked for
            raise NotPortable(f"{where}: a new process cannot import {spec['module']!r} "
                              f"({type(exc).__name__}: {exc})") from exc
    if str(Path(getattr(module, "__file__", "") or "").resolve()) != spec["file"]:
        raise NotPortable(f"{where}: module {spec['module']!r} is another file in a new process "
                          f"({getattr(module, '__file__', None)}, not {spec['file']})")
    target: Any = module
    for part in spec["name"].split("."):
        target = getattr(target, part, None)
    if target is None:
        raise NotPortable(f"{where}: not found in {spec['file']}")
    return target


def _cache_spec(cache: Any) -> dict[str, Any]:
    from ..cache.remote import RemoteTargetCache
    from ..cache.targets import TargetCache

    if isinstance(cache, RemoteTargetCache) and not cache.storage_options:
        return {"url": cache.url, "mirror": str(cache.local.root), "lease_ttl": cache.lease_ttl,
                "on_mismatch": cache.on_mismatch}
    if type(cache) is TargetCache:
        return {"folder": str(Path(cache.root).resolve()), "on_mismatch": cache.on_mismatch}
    raise NotPortable(f"the cache {type(cache).__name__} cannot be opened by another process")


def _open_cache(spec: dict[str, Any]) -> Any:
    from ..cache.remote import RemoteTargetCache
    from ..cache.targets import TargetCache

    if "url" in spec:
        return RemoteTargetCache(spec["url"], mirror_dir=spec["mirror"], lease_ttl=spec["lease_ttl"],
                                 on_mismatch=spec["on_mismatch"])
    return TargetCache(spec["folder"], on_mismatch=spec["on_mismatch"])


def to_job(training: OwnTraining) -> dict[str, Any]:
    """``training`` as JSON-safe data another process can run (:func:`from_job`); :class:`NotPortable` if not."""
    from ..data.types import NLUDataset

    if training.cache is None:
        raise NotPortable("no cache to hand the trained model back through")
    if type(training.dataset) is not NLUDataset:
        raise NotPortable(f"the dataset is a {type(training.dataset).__name__}, not an NLUDataset")
    return {"train": _function(training.train, "train"), "build": _function(training.build, "build"),
            "dataset": training.dataset.to_json(), "dataset_name": training.dataset.name,
            "cache": _cache_spec(training.cache), "device": training.device, "seed": training.seed,
            "sources": [str(Path(s).resolve()) for s in training.sources], "name": training.label,
            "config": training.config, "key": training.key()}


def from_job(job: dict[str, Any], device: str | None = None) -> OwnTraining:
    """The training ``job`` describes (``device``: run it there instead, e.g. a helper worker's own GPU)."""
    from ..data.types import NLUDataset, Utterance

    splits = {split: tuple(Utterance(**u) for u in job["dataset"][split]) for split in ("train", "valid", "test")}
    training = OwnTraining(_resolve(job["train"], "train"), NLUDataset(**splits, name=job["dataset_name"]),
                           _resolve(job["build"], "build"), None, _open_cache(job["cache"]),
                           device or job["device"], int(job["seed"]), tuple(job["sources"]), job["name"],
                           dict(job["config"]))
    if training.key() != job["key"]:
        raise NotPortable("it keys differently in another process (its source or torch differs)")
    return training


# --------------------------------------------------------------------------- the pool


def _note(line: str) -> None:
    progress.emit(progress.NOTE, line=f"[privleak] {line}")


def _reemit(data: Any) -> None:
    try:
        event = progress.Event.from_json(data)
    except (ValueError, TypeError):
        return
    fields = {k: v for k, v in event.to_json().items() if k not in ("kind", "target", "line", "worker", "host")}
    progress.emit(event.kind, event.target, line=event.line, **fields)


#: What a child process runs: :func:`main` of this module (``-m`` would import this module twice).
CHILD = "import sys; from pytest_privleak.targets.parallel import main; sys.exit(main())"


class _Child:
    """A Python process that runs the jobs sent to it one at a time, kept for the rest of this process's life
    (importing torch and the project costs it seconds once, 24 s on a loaded 2-core machine)."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.ready, self.idle = threading.Event(), threading.Event()
        self.result: dict | None = None
        self.reader = threading.Thread(target=self._read, name="privleak-train-child", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if "event" in message:
                _reemit(message["event"])
            elif "ready" in message:
                self.ready.set()
                self.idle.set()
            elif "done" in message:
                self.result = message
                self.idle.set()
        self.ready.set()                       # it ended: nobody waits for it any longer
        self.idle.set()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, job: dict) -> None:
        self.idle.clear()
        self.result = None
        self.process.stdin.write(json.dumps(dict(job, sys_path=list(sys.path))) + "\n")
        self.process.stdin.flush()

    def last_error(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {self.process.poll()}"

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


_children: list[_Child] = []


def _children_for(count: int) -> list[_Child]:
    """``count`` live children, started when missing (they start while this process trains)."""
    _children[:] = [c for c in _children if c.alive]
    while len(_children) < count:
        _children.append(_Child())
    return _children[:count]


def shutdown() -> None:
    """End the children (at exit; the plugin calls it when the session ends)."""
    while _children:
        _children.pop().close()


atexit.register(shutdown)


class _Pool:
    """Children that take jobs from the end of a shared deque, each once it is ready, while the caller runs jobs
    from the front in this process; a job a child could not run goes back for the caller."""

    def __init__(self, jobs: "collections.deque", children: list[_Child]) -> None:
        self.jobs, self.children = jobs, children
        self.failed: list[str] = []
        self.elsewhere: list[str] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._work, name="privleak-train-pool", daemon=True)

    def take(self, from_end: bool):
        with self.lock:
            if not self.jobs or self.stopped.is_set():
                return None
            return self.jobs.pop() if from_end else self.jobs.popleft()

    def _work(self) -> None:
        busy: dict[_Child, Any] = {}
        while True:
            for child in self.children:
                if child in busy and child.idle.is_set():
                    training, job = busy.pop(child)
                    if (child.result or {}).get("ok"):
                        self.elsewhere.append(training.label)
                    else:
                        why = (child.result or {}).get("error") or child.last_error()
                        self.failed.append(f"{training.label}: {why}")
                if child not in busy and child.ready.is_set() and child.alive and not self.stopped.is_set():
                    item = self.take(from_end=True)
                    if item is not None:
                        busy[child] = item
                        child.send(item[1])
            with self.lock:
                if not busy and (not self.jobs or self.stopped.is_set()
                                 or not any(c.alive for c in self.children)):
                    return
            time.sleep(0.05)


#: How the last :func:`prefetch` spread its trainings: run in this process, and by other processes (tests, benches).
LAST = {"here": 0, "elsewhere": 0}


#: A training shorter than this (seconds) is not worth starting a process for (it imports torch first: about 3 s
#: of CPU, 24 s of wall time on a loaded 2-core machine); children already started are used whatever it takes.
START_AFTER = 2.0


def _pool(trainings: list[OwnTraining], jobs: list[dict], processes: int,
          here: Callable[[OwnTraining], None]) -> None:
    LAST.update(here=0, elsewhere=0)
    pending = collections.deque(zip(trainings, jobs))
    if not any(c.alive for c in _children):
        began = time.perf_counter()
        here(pending.popleft()[0])          # the first one here, timed: is a new process worth its start?
        LAST["here"] += 1
        if time.perf_counter() - began < START_AFTER or len(pending) < 2:
            for training, _ in pending:
                here(training)
                LAST["here"] += 1
            return
    pool = _Pool(pending, _children_for(processes - 1))
    pool.thread.start()
    try:
        while True:
            item = pool.take(from_end=False)
            if item is None:
                if not pool.thread.is_alive():
                    break
                pool.thread.join(0.1)
                continue
            here(item[0])                   # this process trains from the front meanwhile
            LAST["here"] += 1
    except BaseException:
        pool.stopped.set()
        raise
    pool.thread.join()
    LAST["elsewhere"] = len(pool.elsewhere)
    for failure in pool.failed:
        _note(f"a training in another process failed; it trains here instead ({failure})")


# --------------------------------------------------------------------------- the board


def _board(board: Any, trainings: list[OwnTraining], jobs: list[dict],
           here: Callable[[OwnTraining], None]) -> None:
    """Post every training, run each one this worker claims first; leave the others to their helpers."""
    keys = [job["key"] for job in jobs]
    for key, job in zip(keys, jobs):
        board.post(key, job)
    others = []
    try:
        for key, training in zip(keys, trainings):
            if board.claim(key):
                here(training)
            else:
                others.append((key, training))
    finally:
        for key in keys:
            board.withdraw(key)
    for key, training in others:         # claimed by a helper: wait for it to publish, while it lives
        holder = board.claimer(key)
        if holder is not None and not training.cache.has(key):
            _note(f"waiting for worker {holder} to train {training.label}")
        while board.claimer(key) is not None and not training.cache.has(key):
            time.sleep(0.2)


def help_others(board: Any, device: str | None = None, poll: float = 0.5) -> int:
    """Run the jobs other workers post, until no worker that could post one runs; the number run.

    A job this process cannot run (its functions do not import here, another
    device type) is left to its poster, who then trains it itself.
    """
    from torch import device as torch_device

    done, skipped = 0, set()
    while True:
        ran = False
        for key, job in board.open_jobs():
            if key in skipped:
                continue
            if device is not None and torch_device(device).type != torch_device(job.get("device", "cpu")).type:
                skipped.add(key)
                continue
            try:
                training = from_job(job, device=device)
            except NotPortable:
                skipped.add(key)
                continue
            if training.cache.has(key) or not board.claim(key):
                continue
            try:
                training.run()
            except Exception as exc:  # noqa: BLE001 - its poster trains it again and shows the error in its test
                board.unclaim(key)
                skipped.add(key)
                _note(f"{training.label} failed here ({type(exc).__name__}: {exc}); its test trains it again")
                continue
            done, ran = done + 1, True
        if not ran:
            if not board.others_running():
                return done
            time.sleep(poll)


# --------------------------------------------------------------------------- the one entry point


def prefetch(trainings: Sequence[OwnTraining], *, what: str) -> dict[int, Any]:
    """Make sure the cache holds every training of ``trainings``, spread as :func:`configure` says.

    ``what`` names them in the one line said when they cannot be spread
    (e.g. ``"the 7 seeds of train_own_model(intent_model.train:train)"``).
    Returns what ``train_own_model`` returned for the trainings run in this
    process, by their index in ``trainings``; the caller's own
    ``train_own_model`` calls load the others from the cache.
    """
    spread = _spread
    made: dict[int, Any] = {}
    if len(trainings) < 2 or (spread.processes < 2 and spread.board is None):
        return made
    for training in trainings:
        training.check()
    missing = [t for t in trainings if t.cache is not None and not t.cache.has(t.key())]
    if len(missing) < 2:
        return made
    index = {id(t): i for i, t in enumerate(trainings)}

    def here(training: OwnTraining) -> None:
        made[index[id(training)]] = training.run()
    try:
        jobs = [to_job(t) for t in missing]
        if spread.board is None and any(t.device != "cpu" for t in missing):
            raise NotPortable("they train on a GPU, which the processes of one worker do not share")
    except NotPortable as exc:
        began = time.perf_counter()
        here(missing[0])                    # said only where spreading them would have paid
        if time.perf_counter() - began >= START_AFTER:
            _note(f"{what} train one after another: {exc}. Fix for parallel training: a cache, an NLUDataset, "
                  "and train/build defined in a module of your project that a new Python process can import")
        return made
    if spread.board is not None:
        _board(spread.board, missing, jobs, here)
    else:
        _pool(missing, jobs, min(spread.processes, len(missing)), here)
    return made


# --------------------------------------------------------------------------- a child process


def main() -> int:
    """Run the jobs sent on stdin, one JSON object a line, until it closes (``python -c`` :data:`CHILD`).

    Writes ``{"ready": true}`` once imported, each progress event as ``{"event": ...}`` and each job's end as
    ``{"done": key, "ok": ..., "error": ...}`` on stdout, one a line; whatever else is printed goes to stderr.
    """
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                           # what a training prints goes to stderr, never among the messages
    sys.stdout = sys.stderr
    import torch  # noqa: F401  (imported before saying ready: the expensive part of starting)

    from . import own_model  # noqa: F401

    def say(message: dict) -> None:
        out.write(json.dumps(message) + "\n")

    progress.set_sink(lambda event: say({"event": event.to_json()}))
    say({"ready": True})
    for line in sys.stdin:
        job = json.loads(line)
        for entry in reversed(job.pop("sys_path", [])):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        try:
            from_job(job).run()
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which trains it again itself
            say({"done": job.get("key"), "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        else:
            say({"done": job.get("key"), "ok": True})
    return 0
