"""Own models' trainings over xdist workers: post them on the job board, run them when idle (issue 35 item 2).

The board is :class:`pytest_privleak.distribute.board.Board`; the plugin makes it
and hands it to :func:`pytest_privleak.targets.parallel.configure`.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .jobs import NotPortable, OwnTraining, from_job, note
from .stacks import StackTraining, from_stack_job, is_stack_job

__all__ = ["post_and_run", "help_others"]


def post_and_run(board: Any, trainings: "list[OwnTraining] | list[StackTraining]", jobs: list[dict],
                 here: Callable[[Any], None]) -> None:
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
        if holder is not None and not training.published(key):
            note(f"waiting for worker {holder} to train {training.label}")
        while board.claimer(key) is not None and not training.published(key):
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
                training = (from_stack_job if is_stack_job(job) else from_job)(job, device=device)
            except NotPortable:
                skipped.add(key)
                continue
            if training.published(key) or not board.claim(key):
                continue
            try:
                training.run()
            except Exception as exc:  # noqa: BLE001 - its poster trains it again and shows the error in its test
                board.unclaim(key)
                skipped.add(key)
                note(f"{training.label} failed here ({type(exc).__name__}: {exc}); its test trains it again")
                continue
            done, ran = done + 1, True
        if not ran:
            if not board.others_running():
                return done
            time.sleep(poll)
