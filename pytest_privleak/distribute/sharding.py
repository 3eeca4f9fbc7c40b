"""Split a test run into CI shards without splitting the tests that share a target (``--privleak-shard=i/n``).

A target is only known when a test runs, so the unit kept together is a
*group*: the item's ``xdist_group`` marker when it has one (the marker teams
already use to keep a target on one xdist worker with ``--dist loadgroup``),
else its module. Groups go, largest first, to the shard with the least
estimated time so far (ties: fewer tests, then the lower shard number).

The split is a pure function of the sorted node ids, their groups and the
durations file, so every shard of a CI matrix (and every xdist worker of a
shard) computes the same split on its own and together they run each test
exactly once. pytest-split balances by duration too, but splits a module's
tests over several shards, so a shared target would be trained twice.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

SHARD_FIX = "write --privleak-shard=I/N with whole numbers 1 <= I <= N, e.g. --privleak-shard=1/3"
MODULE_PREFIX = "module:"
GROUP_PREFIX = "xdist_group:"
#: Prefix of the ``xdist_group`` names that :mod:`pytest_privleak.plugin.speed` adds on xdist workers only
#: (tests sharing a target); kept here, below both the plugin and the scheduler that read it.
AUTOMATIC_GROUP_PREFIX = "privleak:"


class ShardError(ValueError):
    """A bad ``--privleak-shard`` value or durations file; the message names the option and the fix."""


@dataclass(frozen=True)
class Shard:
    index: int   # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value: str) -> Shard:
    """``"2/3"`` -> ``Shard(2, 3)``; anything else is a :class:`ShardError` naming the option and the fix."""
    text = str(value).strip()
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise ShardError(f"--privleak-shard={value!r} is not of the form I/N; {SHARD_FIX}") from None
    if not sep or n < 1:
        raise ShardError(f"--privleak-shard={value!r}: the number of shards N must be at least 1; {SHARD_FIX}")
    if not 1 <= i <= n:
        raise ShardError(f"--privleak-shard={value!r}: the shard number I must be between 1 and {n} (shards are "
                         f"numbered from 1); {SHARD_FIX}")
    return Shard(i, n)


def group_of(nodeid: str, xdist_groups: Iterable[str] = ()) -> str:
    """The group a test belongs to: its ``xdist_group`` names (joined as xdist does), else its module's path."""
    names = sorted({str(name) for name in xdist_groups})
    if names:
        return GROUP_PREFIX + "_".join(names)
    return MODULE_PREFIX + nodeid.split("::", 1)[0]


def xdist_group_names(item, *, automatic: bool = False) -> list[str]:
    """The ``xdist_group`` marker names of a pytest item (``xdist_group("name")`` or ``name=``).

    Unless ``automatic``, the groups :mod:`pytest_privleak.plugin.speed` adds on xdist workers only (names
    starting with ``AUTOMATIC_GROUP_PREFIX``) are left out, so ``-n 0`` and ``-n N`` split a run alike.
    """
    names = [str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")]
    return names if automatic else [name for name in names if not name.startswith(AUTOMATIC_GROUP_PREFIX)]


# --- durations -------------------------------------------------------------------------


def _duration(nodeid: str, durations: Mapping[str, float]) -> float | None:
    """A test's known duration; under ``--dist loadgroup`` xdist appends ``@group`` to node ids."""
    if nodeid in durations:
        return durations[nodeid]
    base = nodeid.rsplit("@", 1)[0] if "@" in nodeid.rsplit("::", 1)[-1] else None
    return durations.get(base) if base else None


def estimated_costs(nodeids: list[str], durations: Mapping[str, float] | None) -> dict[str, float]:
    """Estimated cost of each test: one unit each without durations; with them, the recorded seconds
    (a test the file does not know costs the mean of those it knows)."""
    if not durations:
        return {n: 1.0 for n in nodeids}
    known = {n: _duration(n, durations) for n in nodeids}
    found = [d for d in known.values() if d is not None]
    mean = sum(found) / len(found) if found else 1.0
    return {n: (mean if d is None else d) for n, d in known.items()}


# --- the split --------------------------------------------------------------------------


def assign_groups(groups: Mapping[str, list[str]], count: int, weights: Mapping[str, float]) -> list[list[str]]:
    """Greedy largest-first: the group names of each shard (index 0 is shard 1).

    ``groups`` maps a group to its node ids; ``weights`` gives each node id's
    cost. Sums run over sorted node ids and ties break on names, so the result
    depends on nothing but the arguments.
    """
    cost = {g: sum(weights[n] for n in sorted(ids)) for g, ids in groups.items()}
    order = sorted(groups, key=lambda g: (-cost[g], g))
    loads = [0.0] * count
    sizes = [0] * count
    shards: list[list[str]] = [[] for _ in range(count)]
    for group in order:
        target = min(range(count), key=lambda s: (loads[s], sizes[s], s))
        shards[target].append(group)
        loads[target] += cost[group]
        sizes[target] += len(groups[group])
    return shards


@dataclass(frozen=True)
class Split:
    """What one shard keeps, and the figures its message prints."""

    shard: Shard
    keep: frozenset[str]      # node ids
    groups: int               # groups in the whole run
    shard_groups: int         # groups on this shard
    estimate: float           # this shard's estimated cost
    total: float              # the whole run's estimated cost


def split(tests: Mapping[str, str], shard: Shard, durations: Mapping[str, float] | None = None) -> Split:
    """``tests`` maps node id -> group; the node ids shard ``shard`` keeps."""
    nodeids = sorted(tests)
    groups: dict[str, list[str]] = {}
    for nodeid in nodeids:
        groups.setdefault(tests[nodeid], []).append(nodeid)
    weights = estimated_costs(nodeids, durations)
    mine = assign_groups(groups, shard.count, weights)[shard.index - 1]
    keep = frozenset(n for g in mine for n in groups[g])
    return Split(shard, keep, len(groups), len(mine), sum(weights[n] for n in sorted(keep)),
                 sum(weights[n] for n in nodeids))
