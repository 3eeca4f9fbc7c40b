"""xdist scheduling by group: every test of one ``xdist_group`` runs on one worker, groups spread over workers.

xdist's own ``loadgroup`` reads the group from a ``@group`` suffix its
workers append to the node ids; pytest 9 derives ``nodeid`` from the item's
structured id, so that suffix no longer appears and every test becomes its
own group. Here the workers write ``{nodeid: group}`` to a file the
controller named (a folder on the controller's machine: workers on other
hosts cannot write it, and their tests are then scheduled one by one, as
with ``--dist load``); the scheduler is xdist's ``LoadScopeScheduling`` with
that map as the scope of each test, largest groups first: by the recorded
durations of their tests when ``--privleak-shard-durations`` gives them (main's
last report; a test it does not know costs the mean of those it knows), else
by their number of tests, as xdist orders its scopes. Unlike
``LoadScopeScheduling``, a test that crashed its worker is not run again on
the next worker (it is reported as crashed once, as under ``--dist load``);
the rest of its group is.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

from ..atomic import write_text_atomic

__all__ = ["GroupScheduling", "group_of", "write_groups"]


def group_of(item) -> str | None:
    """The ``xdist_group`` name of ``item`` (several markers: their names joined with ``_``), or None."""
    from .sharding import xdist_group_names

    names = set(xdist_group_names(item, automatic=True))
    return "_".join(sorted(names)) if names else None


def write_groups(path: str, items) -> None:
    """Worker side: write ``{nodeid: group}`` for the grouped tests of this collection."""
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    try:
        write_text_atomic(path, json.dumps(groups))
    except OSError:
        pass  # a worker on another host: the controller schedules its tests one by one


class GroupScheduling(LoadScopeScheduling):
    """``LoadScopeScheduling`` whose scope of a test is its group (from the workers' files), else itself."""

    def __init__(self, config, log, folder: Path, durations: dict[str, float] | None = None) -> None:
        super().__init__(config, log)
        self.folder = Path(folder)
        self.durations = durations or None
        self._cost: dict[str, float] | None = None
        self._groups: dict[str, str] | None = None

    def _load_groups(self) -> dict[str, str]:
        for path in sorted(self.folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items()}
        return {}

    def _costs(self) -> dict[str, float] | None:
        """Each test's estimated seconds from the durations (once the collection is known), else None: xdist's
        own order then stands (by number of tests, or the collection's with ``--no-loadscope-reorder``)."""
        if self.durations is None or self.collection is None or not self.config.option.loadscopereorder:
            return None
        if getattr(self, "_cost", None) is None:
            from .sharding import estimated_costs

            self._cost = estimated_costs(self.collection, self.durations)
        return self._cost

    def _assign_work_unit(self, node) -> None:
        """With durations: the longest waiting group, unless ``node`` still has more than its share of the
        remaining work committed; then the shortest, which will not wait long behind it.

        An xdist worker runs a test only once it knows the next one, so the
        unit sent to a worker that is starting a long test waits for all of
        it; sending it the shortest unit then leaves the long units to
        workers about to be free (greedy longest-first otherwise).
        """
        cost = self._costs()
        if cost and len(self.workqueue) > 1:
            committed = sum(cost.get(n, 0.0) for unit in self.assigned_work.get(node, {}).values()
                            for n, done in unit.items() if not done)
            waiting = {scope: sum(cost.get(n, 0.0) for n in unit) for scope, unit in self.workqueue.items()}
            if committed > sum(waiting.values()) / max(1, len(self.nodes)):
                pick = min(waiting, key=lambda scope: (waiting[scope], scope))
            else:
                pick = min(waiting, key=lambda scope: (-waiting[scope], scope))
            self.workqueue.move_to_end(pick, last=False)
        super()._assign_work_unit(node)

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            self._groups = self._load_groups()
        group = self._groups.get(nodeid)
        return f"group:{group}" if group is not None else nodeid

    def remove_node(self, node) -> str | None:
        """A worker finished or crashed: on a crash, hand its unfinished tests to the others, less the crashed one.

        xdist's ``LoadScopeScheduling`` puts the whole unit back, crashed test included, so a test that
        kills its worker (a segfault, an out-of-memory kill) would kill every replacement in turn.
        """
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
        for unit in workload.values():
            if crashitem in unit:
                unit[crashitem] = True  # reported as crashed by xdist; never sent again
        self.workqueue.update(OrderedDict((scope, unit) for scope, unit in workload.items()
                                          if not all(unit.values())))
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem
