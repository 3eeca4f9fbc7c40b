"""Where an xdist worker runs: the host its ``--tx`` spec names, and its index among that host's workers.

xdist numbers workers globally: ``--tx 2*ssh=h1 --tx 2*ssh=h2`` gives gw0, gw1
on h1 and gw2, gw3 on h2. A GPU is local to its host, so gw2 must get h2's
first GPU, not the third. The controller places each worker when xdist
configures it (``pytest_configure_node``, in :mod:`.plugin_hosts`) and hands
the host and the per-host index to the worker in ``workerinput``, under
:data:`HOST_KEY` and :data:`LOCAL_INDEX_KEY`; :mod:`.device` maps that index
to a GPU of the worker's own host. A replacement for a crashed worker takes
the lowest index free on its host (the dead worker's GPU).

Pure functions of execnet specs (``XSpec`` or their strings), so they are
tested without starting a worker.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["HOST_KEY", "LOCAL", "LOCAL_INDEX_KEY", "HostPlacement", "host_of_spec", "is_remote_spec",
           "local_indices", "spec_strings"]

#: ``workerinput`` key: the host the worker runs on, as its ``--tx`` spec names it.
HOST_KEY = "privleak_host"
#: ``workerinput`` key: the worker's index among the workers of its host (0, 1, ...).
LOCAL_INDEX_KEY = "privleak_local_index"
#: The host name of workers started on the controller's own machine (``-n N``, ``--tx popen``).
LOCAL = "localhost"


def _spec(spec):
    """An execnet ``XSpec`` for ``spec`` (a string such as ``ssh=root@h1//python=python3`` or an ``XSpec``)."""
    if isinstance(spec, str):
        from execnet import XSpec

        return XSpec(spec)
    return spec


def host_of_spec(spec) -> str:
    """The host a spec starts its worker on.

    ``ssh=[ssh options] [user@]host`` -> ``host`` (the ssh alias or address as written), ``socket=host:port``
    -> ``host``, ``vagrant_ssh=machine`` -> ``machine``; ``popen`` (what ``-n N`` uses) -> ``"localhost"``,
    or ``"via <gateway>"`` for a popen started through another gateway.
    """
    spec = _spec(spec)
    if spec.ssh:
        target = str(spec.ssh).split()[-1]
        return target.rsplit("@", 1)[-1]
    if spec.socket:
        return str(spec.socket).rsplit(":", 1)[0] or LOCAL
    if spec.vagrant_ssh:
        return str(spec.vagrant_ssh)
    if spec.popen and spec.via:
        return f"via {spec.via}"
    return LOCAL


def is_remote_spec(spec) -> bool:
    """Whether the spec may start its worker on another machine (ssh, socket, vagrant, popen via a gateway)."""
    return host_of_spec(spec) != LOCAL


def spec_strings(tx: Iterable[str] | None) -> list[str]:
    """``--tx`` values with their ``N*`` multipliers expanded: ``["2*ssh=h1"]`` -> ``["ssh=h1", "ssh=h1"]``."""
    out = []
    for value in tx or ():
        count, star, rest = str(value).partition("*")
        if star and count.strip().isdigit():
            out += [rest] * int(count)
        else:
            out.append(str(value))
    return out


class HostPlacement:
    """The controller's record of which index each live worker holds on its host.

    :meth:`place` gives a new worker the lowest index free on its host;
    :meth:`release` frees a worker's index when it goes down, so its
    replacement takes the same GPU.
    """

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, int]] = {}

    def place(self, spec, worker_id: str) -> tuple[str, int]:
        """``(host, index)`` for worker ``worker_id`` started by ``spec``; the same answer when asked twice."""
        if worker_id in self._held:
            return self._held[worker_id]
        host = host_of_spec(spec)
        taken = {index for h, index in self._held.values() if h == host}
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        self._held[worker_id] = (host, index)
        return host, index

    def release(self, worker_id: str) -> None:
        self._held.pop(worker_id, None)


def local_indices(specs: Iterable) -> list[tuple[str, int]]:
    """``(host, index on that host)`` of each spec in order, as workers started together get them."""
    placement = HostPlacement()
    return [placement.place(spec, f"gw{k}") for k, spec in enumerate(specs)]
