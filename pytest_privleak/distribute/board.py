"""A job board in a folder of the controller's machine: xdist workers hand each other trainings (issue 35 item 2).

A worker that needs several trainings no batch can hold (the seeds of an own
model, the references of a ``TargetRecipe(train=...)``) posts each one the
cache lacks as a job, ``jobs/<key>.json``, then works through them itself. A
worker that has run out of tests helps: it claims an open job and runs it.
Whoever runs a job claims it first, ``claims/<key>`` created exclusively, so
each job runs once; the poster then loads what a helper trained from the
target cache, waiting on the cache's lock (or a URL cache's lease) for a
training still under way. The lock, not the board, keeps two processes from
training the same entry; the board only spreads the work.

Workers say that they are still running tests with ``workers/<id>.json``
(their PID): a helper waits for jobs while another worker that could post one
still runs, and a worker that died (its PID gone) counts as finished. The
controller creates the folder and hands its path to the workers on its own
machine (``workerinput``); a worker on another host finds no such folder and
trains what it needs itself. Pure file operations: no torch, no pytest.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from ..atomic import pid_alive, write_text_atomic

__all__ = ["Board"]


class Board:
    """The job board in ``folder`` as seen by worker ``worker`` (its xdist id, e.g. ``"gw1"``)."""

    def __init__(self, folder: str | os.PathLike, worker: str) -> None:
        self.folder, self.worker = Path(folder), str(worker)
        for part in ("jobs", "claims", "workers"):
            (self.folder / part).mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ jobs

    def post(self, key: str, job: dict[str, Any]) -> bool:
        """Offer ``job`` (JSON-safe) under ``key``; False when it is on the board already."""
        final = self.folder / "jobs" / f"{key}.json"
        staging = self.folder / "jobs" / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
        write_text_atomic(staging, json.dumps({"poster": self.worker, "job": job}))
        try:
            os.link(staging, final)            # appears whole, and only once
        except FileExistsError:
            return False
        finally:
            staging.unlink(missing_ok=True)
        return True

    def claim(self, key: str) -> bool:
        """Take the job ``key`` for this worker; False when another process took it first."""
        try:
            handle = os.open(self.folder / "claims" / key, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps({"worker": self.worker, "pid": os.getpid()}))
        return True

    def unclaim(self, key: str) -> None:
        """Give a claimed job up (it failed here): its poster, seeing no live claimer, runs it itself."""
        (self.folder / "claims" / key).unlink(missing_ok=True)

    def claimer(self, key: str) -> str | None:
        """The worker that claimed ``key`` while its process lives (None: unclaimed, or its claimer died)."""
        try:
            data = json.loads((self.folder / "claims" / key).read_text(encoding="utf-8"))
            return str(data["worker"]) if pid_alive(int(data["pid"])) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def withdraw(self, key: str) -> None:
        """The poster no longer needs ``key`` run by others (it has the model)."""
        (self.folder / "jobs" / f"{key}.json").unlink(missing_ok=True)

    def open_jobs(self) -> list[tuple[str, dict[str, Any]]]:
        """``(key, job)`` of every posted job nobody has claimed, posted by other workers, newest first (a poster
        works through its own jobs oldest first, so the two meet in the middle)."""
        out = []
        for path in sorted((self.folder / "jobs").glob("*.json"), key=_mtime, reverse=True):
            key = path.name[:-len(".json")]
            if (self.folder / "claims" / key).exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue                       # withdrawn meanwhile
            if isinstance(data, dict) and data.get("poster") != self.worker and isinstance(data.get("job"), dict):
                out.append((key, data["job"]))
        return out

    # ------------------------------------------------------------------ workers

    def running(self) -> None:
        """This worker runs tests (and may post jobs) until :meth:`finished`."""
        write_text_atomic(self.folder / "workers" / f"{self.worker}.json", json.dumps({"pid": os.getpid()}))

    def finished(self) -> None:
        (self.folder / "workers" / f"{self.worker}.json").unlink(missing_ok=True)

    def others_running(self) -> bool:
        """Whether another worker still runs tests (its PID alive)."""
        for path in (self.folder / "workers").glob("*.json"):
            if path.name == f"{self.worker}.json":
                continue
            try:
                pid = int(json.loads(path.read_text(encoding="utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if pid_alive(pid):
                return True
        return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
