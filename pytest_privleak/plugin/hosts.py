"""xdist workers on several hosts (``--tx ssh=...``): per-host device numbering and the host of each result.

Issue 11 item 2. On the controller, :func:`pytest_configure_node` places each
worker on the host its spec names and gives it an index among that host's
workers (:mod:`.placement`), passed in ``workerinput``; on the worker,
:func:`pytest_configure` pins the GPU of that index on its own host
(:func:`.device.pin_this_worker`) and shares out that host's CPU cores among
its workers (:func:`.device.share_cpu_threads`: one torch thread each for
``-n 2`` on 2 cores, unless ``OMP_NUM_THREADS`` is set). The collector reads the host from the same
``workerinput`` for every test and crash. A ``--tx`` spec on another host with
a plain-folder cache gets one warning: each host would train its own copy.
"""
from __future__ import annotations

import pytest

from ..distribute.placement import HOST_KEY, LOCAL_INDEX_KEY, HostPlacement, host_of_spec, is_remote_spec, spec_strings
from .settings import LEASE_TTL_INI

PLACEMENT_KEY = pytest.StashKey[HostPlacement]()


class CacheNotSharedWarning(pytest.PytestWarning):
    """Workers on other hosts with a target cache that is a folder of this machine."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register the ini key of the URL cache's lease lifetime."""
    parser.addini(LEASE_TTL_INI, "seconds a URL cache's lease outlives the last heartbeat of the host holding it "
                  "(a host that died blocks the entry this long; default 120)", default="")


@pytest.hookimpl(tryfirst=True)  # before plugin.py's own configure, which pins by gw number
def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure (before the main plugin's): on a worker, pin its device and CPU share by its host; on the
    controller, record each worker's host."""
    from .settings import read_settings

    try:
        settings = read_settings(config)
    except ValueError:
        return  # plugin.pytest_configure reports the bad option as a usage error
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        import os
        import sys

        from ..distribute.device import HOST_WORKERS_KEY, pin_this_worker, share_cpu_threads

        pin_this_worker(workerinput, list(settings.devices) or None, settings.device)
        share_cpu_threads(os.environ, workerinput.get(HOST_WORKERS_KEY), "torch" in sys.modules,
                          len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
        return
    warning = cache_not_shared(spec_strings(config.getoption("tx", None)), settings.cache_dir)
    if warning:
        config.issue_config_time_warning(CacheNotSharedWarning(warning), stacklevel=2)


def cache_not_shared(specs: list[str], cache_dir) -> str | None:
    """The warning for workers on other hosts sharing no cache (``cache_dir`` a folder), else ``None``."""
    if not isinstance(cache_dir, str):     # a Path: a folder of this machine (URLs are str)
        remote = sorted({host_of_spec(s) for s in specs if is_remote_spec(s)})
        if remote:
            return (f"--tx workers on {', '.join(remote)} with a target cache in a folder ({cache_dir}): each host "
                    "trains its own copy of every target it needs. Fix: give every host the same cache URL, e.g. "
                    "--privleak-cache-dir=sftp://cachehost/srv/privleak-cache (pytest-privleak[remote-cache])")
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist, on the controller: tell the worker its host and its index among that host's workers."""
    from ..distribute.device import HOST_WORKERS_KEY

    placement = node.config.stash.setdefault(PLACEMENT_KEY, HostPlacement())
    host, index = placement.place(node.gateway.spec, node.gateway.id)
    node.workerinput[HOST_KEY] = host
    node.workerinput[LOCAL_INDEX_KEY] = index
    node.workerinput[HOST_WORKERS_KEY] = _workers_on(node.config, host)


def _workers_on(config: pytest.Config, host: str) -> int:
    """How many xdist workers this run starts on ``host`` (``-n N`` and ``--tx`` specs)."""
    return max(1, sum(1 for spec in spec_strings(config.getoption("tx", None)) if host_of_spec(spec) == host))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist, on the controller: the worker's index is free for its replacement."""
    placement = node.config.stash.get(PLACEMENT_KEY, None)
    if placement is not None:
        placement.release(node.gateway.id)
