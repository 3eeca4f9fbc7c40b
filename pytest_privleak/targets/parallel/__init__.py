"""Own models' trainings spread over processes: this process's cores, or the run's xdist workers (issue 35 item 2).

A team's own training function cannot be batched like the built-in targets,
so the ``k`` seeds of ``train_own_model(..., seeds=k)`` and the references of
a ``TargetRecipe(train=...)`` train in parallel instead. :func:`prefetch`
takes those trainings (:class:`OwnTraining`, one ``train_own_model`` call
each) and makes sure the target cache holds every one; the caller then calls
``train_own_model`` as before, which loads them. Each is the same call with
the same arguments wherever it runs (one torch thread, the global RNG seeded
by its seed), so seed ``s`` gives the same weights as one after another.

* **A pool** (``--privleak-train-processes``, default: the cores this
  process may use; an xdist worker's share of its host's cores): this
  process trains the first missing trainings itself while ``processes - 1``
  new Python processes (:data:`.pool.CHILD`, warm for the rest of the run)
  take the last ones, each publishing to the cache; their progress events
  come back to this process.
* **xdist workers** (the board, :mod:`pytest_privleak.distribute.board`),
  where a worker has one core or its model trains on a GPU: the
  worker posts the missing trainings as jobs and works through them; a worker
  that has run out of tests claims jobs and runs them (on its own device: the
  GPUs of ``--privleak-devices`` too); the poster loads their results,
  waiting on the cache's lock or lease for one under way.

A new process (or another worker) runs ``train``, ``build`` (and the
training's ``sources=``) by their module and name, with the dataset sent as
JSON, so this needs: a cache (``cache=None`` trains here), a dataset of
pytest_privleak (an ``NLUDataset``, or the one ``inject_canaries`` returns),
a CPU device for the pool (one GPU is not shared between processes), and
functions a new Python process can import from the same file: a function in
a package of the project or in a test module that pytest imports by its name
(the default ``--import-mode=prepend``) does; a lambda, a function defined
inside another, ``__main__`` and ``--import-mode=importlib`` do not.
Anything else trains here, one after another as before, with one line saying
why (only where spreading would have paid: its first training took
:data:`.pool.START_AFTER` seconds or more). A training that fails in another
process is trained again here, so its error reads as before.

A built-in target's seeds train as one stack (:mod:`..stacked`); under
xdist :func:`spread_stack` cuts the missing ones in two stacks and posts the
second for a worker out of tests (:mod:`.stacks`).

Modules: :mod:`.jobs` (a training, and as JSON), :mod:`.pool` (the child
processes), :mod:`.board` (the xdist job board's poster and helper),
:mod:`.stacks` (a built-in target's seed stack as two jobs).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import pool
from .board import help_others, post_and_run
from .jobs import NotPortable, OwnTraining, from_job, note, to_job
from .pool import shutdown

__all__ = ["OwnTraining", "NotPortable", "configure", "current", "prefetch", "spread_stack", "help_others",
           "shutdown", "usable_cores", "to_job", "from_job"]


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

    on_cpu = all(t.device == "cpu" for t in missing)
    try:
        jobs = [to_job(t) for t in missing]
        if spread.board is None and not on_cpu:
            raise NotPortable("they train on a GPU, which the processes of one worker do not share")
    except NotPortable as exc:
        began = time.perf_counter()
        here(missing[0])                    # said only where spreading them would have paid
        if time.perf_counter() - began >= pool.START_AFTER:
            note(f"{what} train one after another: {exc}. Fix for parallel training: a cache, an NLUDataset, "
                 "and train/build defined in a module of your project that a new Python process can import")
        return made
    if spread.processes >= 2 and on_cpu:     # this process's own cores first: no waiting for an idle worker
        pool.run_pool(missing, jobs, min(spread.processes, len(missing)), here)
    else:
        post_and_run(spread.board, missing, jobs, here)
    return made


def spread_stack(kind: str, dataset: Any, seeds: Sequence[int], *, device: str, cache: Any,
                 config: dict[str, Any]) -> bool:
    """Under xdist, train the seeds of ``kind`` the cache lacks as two stacks, the second posted on the job
    board for a worker out of tests (:mod:`.stacks`); True when it did (the caller then loads them all).

    Nothing happens without a board, a cache, a CPU device (on a GPU one stack is the fast way) or two missing
    seeds, or when the stack cannot be run by another worker; the caller trains them as one stack then.
    """
    from .stacks import StackTraining, to_stack_job

    board = _spread.board
    if board is None or cache is None or str(device).split(":")[0] != "cpu":
        return False
    whole = StackTraining(kind, dataset, tuple(seeds), cache, str(device), dict(config))
    try:
        keys = whole.model_keys
    except (TypeError, ValueError):
        return False
    missing = tuple(s for s, key in zip(seeds, keys) if not cache.has(key))
    if len(missing) < 2:
        return False
    half = -(-len(missing) // 2)
    stacks = [StackTraining(kind, dataset, part, cache, str(device), dict(config))
              for part in (missing[:half], missing[half:])]
    try:
        jobs = [to_stack_job(t) for t in stacks]
    except NotPortable:
        return False
    post_and_run(board, stacks, jobs, lambda training: training.run())
    return True
