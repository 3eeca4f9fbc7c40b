"""Speed where it is spent (issue 11 item 6): the attack-result cache and scheduling tests by target.

* ``--privleak-rerun``: recompute every attack result instead of loading it
  from the result cache (:mod:`pytest_privleak.cache.results`, kept in
  ``<cache dir>/results``; for a URL cache in this host's mirror folder).
* Under xdist (``-n N`` without ``--dist``) the distribution mode becomes
  ``loadgroup``, and every test that needs a model fixture gets an
  ``xdist_group`` marker naming the module/class/session fixtures it shares
  with other tests: tests that need the same target run on the same worker,
  one after the other, instead of one worker waiting on the other's training
  lock; distinct targets train on distinct workers at the same time. A test
  with its own ``xdist_group`` marker keeps it; ``--privleak-group=off``
  (or an explicit ``--dist``) turns the automatic grouping off.
* The groups start longest first by the test durations of
  ``--privleak-shard-durations``, else of the last run (kept in
  ``.pytest_cache``, :mod:`pytest_privleak.distribute.durations`), else by their
  number of tests.

No torch is imported here.
"""
from __future__ import annotations

import pytest

from ..distribute.sharding import AUTOMATIC_GROUP_PREFIX as GROUP_PREFIX

#: Fixtures whose presence makes a test "need a model": tests sharing the fixtures that feed them are grouped.
MODEL_FIXTURES = frozenset({"train_target", "train_own_model", "privleak_minilm"})
#: Plugin fixtures that name one shared model by themselves (so they are part of the group name).
SHARED_MODEL_FIXTURES = frozenset({"privleak_minilm"})


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register the result-cache, lock-timeout and grouping options."""
    group = parser.getgroup("privleak")
    group.addoption("--privleak-rerun", dest="privleak_rerun", action="store_true", default=False,
                    help="rerun every attack instead of loading its result from the result cache "
                         "(results are cached by the content hash of model, canary, attack config, seed and "
                         "code; the fresh results replace the cached ones)")
    group.addoption("--privleak-lock-timeout", dest="privleak_lock_timeout", metavar="SECONDS", default=None,
                    help="give up after SECONDS waiting for another process's lock on a cache entry (a worker "
                         "training the same target), or 'none' to wait without limit; default 1800, or the ini "
                         "privleak_lock_timeout. A holder on this host that is stopped (kill -STOP) is reported "
                         "at once, with its PID")
    parser.addini("privleak_lock_timeout", default=None,
                  help="seconds to wait for another process's cache-entry lock ('none': no limit; default 1800); "
                       "--privleak-lock-timeout overrides it")
    group.addoption("--privleak-group", dest="privleak_group", choices=("auto", "off"), metavar="auto|off",
                    default="auto",
                    help="under xdist, run the tests that share a model's fixtures on one worker "
                         "(--dist loadgroup with automatic xdist_group markers; default auto), or off")


@pytest.hookimpl(wrapper=True)  # before xdist's own (tryfirst) hook turns dist "no" into "load"
def pytest_cmdline_main(config: pytest.Config):
    """``-n N`` with no ``--dist``: schedule by group."""
    option = config.option
    if getattr(option, "privleak_group", "auto") == "auto" and hasattr(option, "dist") \
            and getattr(option, "numprocesses", None) and option.dist == "no" and not getattr(option, "distload", False):
        option.dist = "loadgroup"
        config.stash[_GROUPED_KEY] = True
    return (yield)


_GROUPED_KEY = pytest.StashKey[bool]()


def pytest_report_header(config: pytest.Config) -> str | None:
    """pytest, in the header: say why tests that share a model run on one worker (issue 24 item 6)."""
    if not config.stash.get(_GROUPED_KEY, False) or hasattr(config, "workerinput"):
        return None
    return ("privleak: tests that share a model's fixtures run on one xdist worker, so each model is trained "
            "once and no worker waits on another's training (--privleak-group=off spreads them)")


def result_cache_root(cache_dir):
    """Where results are kept: ``<folder>/results``, or ``<this host's mirror of the URL>/results``."""
    from pathlib import Path

    from ..cache.url import default_mirror_dir, is_url
    from ..cache.results import RESULTS_FOLDER

    if isinstance(cache_dir, str) and is_url(cache_dir):
        return default_mirror_dir(cache_dir) / RESULTS_FOLDER
    return Path(cache_dir) / RESULTS_FOLDER


@pytest.hookimpl(trylast=True)  # after plugin.py stashed the settings
def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure (last): open the result cache on a process that attacks, set the lock timeout, and prepare
    scheduling by group under xdist."""
    from ..cache import results as result_cache
    from . import SETTINGS_KEY

    settings = config.stash.get(SETTINGS_KEY, None)
    controller = getattr(config.option, "dist", "no") not in ("no", None) and not hasattr(config, "workerinput")
    if controller and config.option.dist == "loadgroup":
        import tempfile
        from pathlib import Path

        config.stash[_GROUPS_DIR_KEY] = Path(tempfile.mkdtemp(prefix="privleak-groups-"))
    _use_recorded_durations(config, controller)
    _configure_lock_timeout(config)
    if settings is None or controller:  # an xdist controller runs no attack
        return
    cache = result_cache.ResultCache(result_cache_root(settings.cache_dir),
                                     rerun=bool(config.getoption("privleak_rerun", False)),
                                     untrusted=result_cache.untrusted_reason(settings.cache_dir))
    config.stash[_CACHE_KEY] = cache
    config.stash[_PREVIOUS_KEY] = result_cache.activate(cache)


def _configure_lock_timeout(config: pytest.Config) -> None:
    """The run's cache-lock wait: ``--privleak-lock-timeout``, else the ini ``privleak_lock_timeout``, else 30 min."""
    from ..cache import lock

    value, source = config.getoption("privleak_lock_timeout", None), lock.LOCK_TIMEOUT_OPTION
    if value is None:
        value, source = config.getini("privleak_lock_timeout"), "ini privleak_lock_timeout"
    if value is None or value == "" or value == []:
        return
    try:
        seconds = lock.parse_lock_timeout(value, source=source)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_LOCK_PREVIOUS_KEY] = lock.configure_lock_timeout(seconds)


def _use_recorded_durations(config: pytest.Config, controller: bool) -> None:
    """Record this run's test durations in pytest's cache; under xdist, order the groups by the last run's
    when no ``--privleak-shard-durations`` was given (:mod:`pytest_privleak.distribute.durations`)."""
    if hasattr(config, "workerinput") or getattr(config, "cache", None) is None:
        return  # a worker (the controller records), or -p no:cacheprovider
    from ..distribute import durations as durations_history
    from .shard import DURATIONS_KEY

    config.pluginmanager.register(durations_history.DurationsRecorder(config), "privleak-durations-recorder")
    if controller and _GROUPS_DIR_KEY in config.stash and DURATIONS_KEY not in config.stash:
        recorded = durations_history.read(config)
        if recorded:
            config.stash[DURATIONS_KEY] = recorded


def pytest_sessionfinish(session: pytest.Session) -> None:
    """xdist worker: hand this worker's result-cache counts to the controller."""
    cache = session.config.stash.get(_CACHE_KEY, None)
    if cache is not None and hasattr(session.config, "workeroutput"):
        session.config.workeroutput[_COUNTS] = {"loaded": len(cache.loaded), "stored": len(cache.stored)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist, on the controller: add a finished worker's result-cache counts to the run's."""
    counts = (getattr(node, "workeroutput", None) or {}).get(_COUNTS)
    if counts:
        total = node.config.stash.setdefault(_TOTALS_KEY, {"loaded": 0, "stored": 0})
        for key in total:
            total[key] += int(counts.get(key, 0))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line: how many attack results were loaded from the result cache and how many computed and stored."""
    _say_untrusted(terminalreporter, config)
    cache = config.stash.get(_CACHE_KEY, None)
    total = config.stash.get(_TOTALS_KEY, None) or (
        {"loaded": len(cache.loaded), "stored": len(cache.stored)} if cache is not None else None)
    if total and (total["loaded"] or total["stored"]) and config.get_verbosity() >= 0:
        terminalreporter.write_line(
            f"privleak result cache: {total['loaded']} result(s) loaded, {total['stored']} computed and stored"
            + (" (--privleak-rerun)" if config.getoption("privleak_rerun", False) else
               "; --privleak-rerun recomputes them" if total["loaded"] else ""))


def _say_untrusted(terminalreporter, config: pytest.Config) -> None:
    """One line when the result cache is not trusted (a URL cache without the HMAC key, issue 21 item 7)."""
    from ..cache.results import untrusted_reason
    from . import SETTINGS_KEY

    settings = config.stash.get(SETTINGS_KEY, None)
    reason = untrusted_reason(settings.cache_dir) if settings is not None else None
    if reason and not hasattr(config, "workerinput"):
        terminalreporter.write_line(f"privleak {reason}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """pytest, at exit: restore the lock timeout and the result cache, and remove the groups folder."""
    if _LOCK_PREVIOUS_KEY in config.stash:
        from ..cache import lock

        lock.configure_lock_timeout(config.stash[_LOCK_PREVIOUS_KEY])
        del config.stash[_LOCK_PREVIOUS_KEY]
    folder = config.stash.get(_GROUPS_DIR_KEY, None)
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    if _CACHE_KEY in config.stash:
        from ..cache import results as result_cache

        result_cache.activate(config.stash[_PREVIOUS_KEY])
        del config.stash[_CACHE_KEY]


_GROUPS_FILE = "privleak_groups_file"
_COUNTS = "privleak_result_cache"
_TOTALS_KEY = pytest.StashKey[dict]()
_GROUPS_DIR_KEY = pytest.StashKey[object]()
_CACHE_KEY = pytest.StashKey[object]()
_PREVIOUS_KEY = pytest.StashKey[object]()
_LOCK_PREVIOUS_KEY = pytest.StashKey[object]()


def group_name(item: pytest.Item) -> str | None:
    """The automatic ``xdist_group`` of ``item``: the shared fixtures that feed its model, or None.

    A test that uses a model fixture (``train_target``, ``privleak_minilm``) is
    grouped by the non-function-scoped fixtures of its own project it uses
    (where each is defined, and its name) plus the shared model fixtures; a
    test whose only such fixture is ``train_target`` trains inside its body
    and is not grouped.
    """
    names = set(getattr(item, "fixturenames", ()))
    if MODEL_FIXTURES.isdisjoint(names):
        return None
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    parts = set(names & SHARED_MODEL_FIXTURES)
    for name in names:
        chain = defs.get(name) or ()
        if not chain:
            continue
        fixturedef = chain[-1]
        module = getattr(getattr(fixturedef, "func", None), "__module__", "") or ""
        if fixturedef.scope == "function" or module.startswith("pytest_privleak") or module.startswith("_pytest"):
            continue
        parts.add(f"{fixturedef.baseid}::{name}" if fixturedef.baseid else name)
    if not parts:
        return None
    return GROUP_PREFIX + "+".join(sorted(parts))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: ask each worker to write where its tests' groups go (see :class:`GroupScheduling`)."""
    folder = node.config.stash.get(_GROUPS_DIR_KEY, None)
    if folder is not None:
        node.workerinput[_GROUPS_FILE] = str(folder / f"{node.gateway.id}.json")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` (chosen by us or by the user): :class:`GroupScheduling`."""
    if config.stash.get(_GROUPS_DIR_KEY, None) is None:
        return None
    from .shard import DURATIONS_KEY
    from ..distribute.scheduling import GroupScheduling

    return GroupScheduling(config, log, config.stash[_GROUPS_DIR_KEY], config.stash.get(DURATIONS_KEY, None))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """xdist worker: mark the tests that share a model's fixtures and write every test's group for the
    controller's scheduler (pytest 9 ignores xdist's own "@group" node-id suffix)."""
    worker = getattr(config, "workerinput", None)
    path = worker.get(_GROUPS_FILE) if worker is not None else None
    if path and getattr(config.option, "privleak_group", "auto") == "auto":
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                name = group_name(item)
                if name is not None:
                    item.add_marker(pytest.mark.xdist_group(name))
    result = yield
    if path:
        from ..distribute.scheduling import write_groups

        write_groups(path, items)
    return result
