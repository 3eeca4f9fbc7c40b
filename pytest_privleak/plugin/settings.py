"""The plugin's settings, read from command-line options with ini fallbacks and validated.

Bad values become ``pytest.UsageError`` messages (raised by the plugin) that
name the option and what it accepts.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..cache.url import cache_location
from ..report.gate import parse_tolerances  # noqa: F401  (re-exported: the ini's and the command's parser)
from ..distribute.device import parse_device, parse_device_list


@dataclass(frozen=True)
class Settings:
    device: str = "auto"
    devices: tuple[str, ...] = ()
    seed: int = 0
    cache_dir: Path | str = Path(".privleak-cache")   # a folder, or a URL read through fsspec (cache_url)
    report_dir: Path | None = None
    baseline: Path | None = None
    save_baseline: Path | None = None
    #: tolerances resolved into a saved baseline or a written report.json: the ini's, then the command line's
    tolerances: dict[str, float] = field(default_factory=dict)
    #: tolerances the gate may apply to baseline entries that store none: the command line's, and the ini's
    #: only where they tighten the built-in default (the checkout under test must not loosen its own gate)
    gate_tolerances: dict[str, float] = field(default_factory=dict)
    allow_missing: bool = False
    #: a signed baseline may be read without the key to verify it (only from the workflow's command line)
    unsigned_ok: bool = False
    #: one line per weakening setting the gate ignored, and why (printed when a baseline is compared)
    ignored: tuple[str, ...] = ()
    cache_lease_ttl: float | None = None   # seconds; None: the URL cache's default (cache_lease.DEFAULT_LEASE_TTL)


def parse_seed(value: object, *, option: str = "--privleak-seed") -> int:
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{option}={value!r} is not an integer; use a non-negative integer such as 0") from None
    if seed < 0:
        raise ValueError(f"{option}={value!r} is negative; use a non-negative integer such as 0")
    return seed


LEASE_TTL_INI = "privleak_cache_lease_ttl"


def parse_lease_ttl(value: object, *, option: str = f"ini option {LEASE_TTL_INI}") -> float | None:
    """Seconds a URL cache's cross-host lease outlives its holder's last heartbeat; empty -> ``None`` (default).

    A finite number > 0: a dead host blocks an entry this long at most, and a live one renews every ttl/4.
    """
    text = str(value).strip() if value is not None else ""
    if not text:
        return None
    try:
        ttl = float(text)
    except ValueError:
        ttl = float("nan")
    if not (0 < ttl < float("inf")):
        raise ValueError(f"{option} = {value!r} is not a number of seconds > 0; write e.g. {LEASE_TTL_INI} = 120 "
                         "(how long a host that died keeps others from building the entry it held)")
    return ttl


def _path_option(value, option: str, *, kind: str) -> Path | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        raise ValueError(f"{option} is empty; give a {kind} path, e.g. {option}=privleak-report")
    return Path(text)


def parse_report_dir(value) -> Path | None:
    """``--privleak-report[=DIR]``: refuses what looks like a test path swallowed by the optional value."""
    path = _path_option(value, "--privleak-report", kind="folder")
    if path is None:
        return None
    text = str(value)
    if "::" in text or text.endswith(".py") or path.is_file():
        raise ValueError(f"--privleak-report={value!r} looks like a test path, not a report folder; write "
                         "--privleak-report=DIR (with '=') or put --privleak-report after the test paths")
    return path


TOLERANCE_OPTION = "--privleak-tolerance"
ALLOW_MISSING_OPTION = "--privleak-allow-missing"
UNSIGNED_OK_OPTION = "--privleak-unsigned-ok"
MERGE_OPTION = "--privleak-merge-reports"
_TRUSTED = ("the baseline file (save it on the main branch) or the workflow's command line")
#: ``PYTEST_ADDOPTS`` as it was when pytest started, before any conftest was imported (a conftest that sets
#: it at import must not make its own options look like the workflow's); stashed by the plugin.
ADDOPTS_AT_START = pytest.StashKey[str]()
#: The baseline the run was asked to gate on, read before any conftest was imported (issue 36 item 4).
BASELINE_AT_START_KEY = pytest.StashKey[object]()
#: The exit status the gate decided (``None``: passed), set once the gate ran (:class:`.collector.ResultCollector`).
GATE_STATUS_KEY = pytest.StashKey[object]()
#: ``{"index", "count", "durations"}`` of this run's CI shard, which its report names (set by plugin/shard.py).
SHARD_REPORT_KEY = pytest.StashKey[dict]()


def trusted_args(config) -> list[str]:
    """The arguments the workflow gave: the command line and ``PYTEST_ADDOPTS`` as it was at start-up (not
    the ini's ``addopts``, nor a value a conftest set later)."""
    args = [str(a) for a in config.invocation_params.args]
    stash = getattr(config, "stash", None)
    addopts = stash.get(ADDOPTS_AT_START, None) if stash is not None else None
    return args + shlex.split(os.environ.get("PYTEST_ADDOPTS", "") if addopts is None else addopts)


def given_by_workflow(config, flag: str) -> bool:
    """Whether ``flag`` was passed by the workflow (pytest refuses abbreviated long options)."""
    return any(a == flag or a.startswith(flag + "=") for a in trusted_args(config))


def overridden_by_workflow(config, ini: str) -> bool:
    """Whether the workflow set ini option ``ini`` with ``-o ini=...`` / ``--override-ini=ini=...``."""
    args = trusted_args(config)
    for i, arg in enumerate(args):
        value = None
        if arg in ("-o", "--override-ini") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--override-ini="):
            value = arg[len("--override-ini="):]
        elif arg.startswith("-o") and arg != "-o":
            value = arg[2:]
        if value is not None and value.split("=", 1)[0].strip() == ini:
            return True
    return False


def builtin_tolerance(key: str) -> float:
    """The built-in tolerance an ini key ``attack.metric`` / ``metric`` / ``default`` would replace."""
    from ..report.gate import DEFAULT_TOLERANCES, FALLBACK_TOLERANCE

    if key in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[key]
    metric = key.split(".", 1)[1] if "." in key else key
    return DEFAULT_TOLERANCES.get(metric, FALLBACK_TOLERANCE)


def gate_settings(config, ini_tolerances: dict[str, float]) -> tuple[dict, dict, bool, list[str]]:
    """Tolerances to save and to gate with, whether missing entries are allowed, and what was ignored.

    Whatever weakens the gate comes from the trusted side only: the baseline file
    or the workflow's command line. The ini (and its ``addopts``) belongs to the
    checkout under test, so an ini that raises a tolerance above the built-in one
    or allows missing entries is ignored by the gate, with one line saying why.
    """
    ignored = []
    cli_lines = config.getoption("privleak_tolerance") or []
    cli: dict[str, float] = {}
    if cli_lines and given_by_workflow(config, TOLERANCE_OPTION):
        cli = parse_tolerances(cli_lines, option=TOLERANCE_OPTION)
    elif cli_lines:
        ignored.append(f"privleak: {TOLERANCE_OPTION} {' '.join(map(str, cli_lines))} comes from the ini's addopts, "
                       f"so the baseline gate ignores it: the checkout under test must not loosen its own gate; "
                       f"pass it on the workflow's command line or store it in the baseline")
    gate = {}
    trusted_ini = overridden_by_workflow(config, "privleak_tolerance")
    for key, tol in ini_tolerances.items():
        builtin = builtin_tolerance(key)
        if tol > builtin and not trusted_ini:
            ignored.append(f"privleak: ini privleak_tolerance {key}={tol:g} raises the built-in tolerance "
                           f"{builtin:g}, so the baseline gate ignores it (the checkout under test must not loosen "
                           f"its own gate); put it in {_TRUSTED}: {TOLERANCE_OPTION} {key}={tol:g}")
        else:
            gate[key] = tol
    allow_cli = bool(config.getoption("privleak_allow_missing"))
    allow = allow_cli and given_by_workflow(config, ALLOW_MISSING_OPTION)
    if allow_cli and not allow:
        ignored.append(f"privleak: {ALLOW_MISSING_OPTION} comes from the ini's addopts, so the baseline gate "
                       "ignores it (the checkout under test must not excuse its own missing results); pass it on "
                       "the workflow's command line")
    try:
        allow_ini = bool(config.getini("privleak_allow_missing"))
    except (ValueError, pytest.UsageError) as exc:  # pytest's message does not name the option
        raise ValueError(f"ini option privleak_allow_missing is not a boolean ({exc}); write "
                         "privleak_allow_missing = true (or false)") from None
    if allow_ini and overridden_by_workflow(config, "privleak_allow_missing"):
        allow = True
    elif allow_ini and not allow:
        ignored.append("privleak: ini privleak_allow_missing = true is ignored by the baseline gate (the checkout "
                       "under test must not excuse its own missing results); pass --privleak-allow-missing on "
                       "the workflow's command line")
    return {**ini_tolerances, **cli}, {**gate, **cli}, allow, ignored


#: Options whose value is a path: given as a separate argument, pytest counts an existing one as a test path
#: when it picks the rootdir and the ini file (before any plugin's options are known).
PATH_OPTIONS = ("--privleak-baseline", "--privleak-save-baseline", "--privleak-cache-dir",
                "--privleak-merge-reports", "--privleak-shard-durations")
_MANY_VALUES = ("--privleak-merge-reports",)


def _separate_path_values(config) -> list[tuple[str, str]]:
    """(option, value) for each existing path given as ``--option VALUE`` (not ``--option=VALUE``)."""
    args, found = trusted_args(config), []
    for i, arg in enumerate(args):
        if arg not in PATH_OPTIONS:
            continue
        for value in args[i + 1:] if arg in _MANY_VALUES else args[i + 1:i + 2]:
            if value.startswith("-"):
                break
            try:
                exists = (Path(config.invocation_params.dir) / value).exists()
            except (OSError, ValueError):
                exists = False
            if exists:
                found.append((arg, value))
    return found


def rootdir_moved(config, options=None) -> str | None:
    """Why pytest's rootdir is not the project's, when a path option's value moved it; else ``None``.

    pytest picks the rootdir (and the ini file) from the free arguments before
    any plugin's options are known, so ``--privleak-baseline ../artifacts/b.json``
    counts ``../artifacts/b.json`` as a test path: the rootdir moves to a common
    ancestor, node ids (so every result key) and the default cache folder move
    with it, and the project's ini may not be read at all. Nothing can undo that
    after the fact, so the run is refused with the fix.
    """
    counted = _separate_path_values(config)
    if not counted:
        return None
    options = config.option if options is None else options
    try:
        from _pytest.config.findpaths import determine_setup

        rootdir, inipath = determine_setup(inifile=options.inifilename, override_ini=options.override_ini,
                                           args=[str(a) for a in (options.file_or_dir or [])],
                                           rootdir_cmd_arg=options.rootdir or None,
                                           invocation_dir=config.invocation_params.dir)[:2]
    except Exception:  # another pytest: cannot tell, so do not refuse
        return None
    moved = []
    if Path(rootdir) != Path(config.rootpath):
        moved.append(f"moved its rootdir to {config.rootpath} (the project's is {rootdir})")
    if inipath is not None and (config.inipath is None or Path(inipath) != Path(config.inipath)):
        moved.append(f"did not read the project's ini file {inipath}")
    if not moved:
        return None
    spelled = ", ".join(f"{option} {value}" for option, value in counted)
    fixed = " ".join(f"{option}={value}" for option, value in counted)
    return (f"pytest {' and '.join(moved)} because it counted the value of {spelled} as a test path (it picks "
            f"the rootdir before plugins' options are known): node ids, so every baseline key, the default cache "
            f"folder and the ini settings would not be the project's; write the option with '=' ({fixed})")


def _pick(config, option: str, ini: str):
    """Command line first, then the ini key, else ``None``."""
    value = config.getoption(option)
    if value is None:
        value = config.getini(ini) or None
    return value


def read_settings(config) -> Settings:
    """Build :class:`Settings` from a pytest config; raises ``ValueError`` on bad values."""
    device = parse_device(_pick(config, "privleak_device", "privleak_device") or "auto")
    devices_raw = _pick(config, "privleak_devices", "privleak_devices")
    devices = tuple(parse_device_list(devices_raw)) if devices_raw else ()
    seed = parse_seed(_pick(config, "privleak_seed", "privleak_seed") or 0)
    cache_dir = cache_location(_pick(config, "privleak_cache_dir", "privleak_cache_dir") or ".privleak-cache",
                               root=config.rootpath)
    report_dir = parse_report_dir(config.getoption("privleak_report"))
    baseline = _path_option(config.getoption("privleak_baseline"), "--privleak-baseline", kind="file")
    save_baseline = _path_option(config.getoption("privleak_save_baseline"), "--privleak-save-baseline",
                                 kind="file")
    if save_baseline is not None and save_baseline.is_dir():
        raise ValueError(f"--privleak-save-baseline={str(save_baseline)!r} is a folder; give a file path "
                         "such as .privleak/baseline.json")
    tolerances, gate_tolerances, allow_missing, ignored = gate_settings(
        config, parse_tolerances(config.getini("privleak_tolerance")))
    lease_ttl = parse_lease_ttl(config.getini(LEASE_TTL_INI))   # registered by plugin_hosts
    unsigned_ok = bool(config.getoption("privleak_unsigned_ok", False))
    if unsigned_ok and not given_by_workflow(config, UNSIGNED_OK_OPTION):
        ignored.append(f"privleak: {UNSIGNED_OK_OPTION} comes from the ini's addopts, so it is ignored: only the "
                       "workflow may accept a signed baseline it cannot verify")
        unsigned_ok = False
    return Settings(device=device, devices=devices, seed=seed, cache_dir=cache_dir, report_dir=report_dir,
                    baseline=baseline, save_baseline=save_baseline, tolerances=tolerances,
                    gate_tolerances=gate_tolerances, allow_missing=allow_missing, ignored=tuple(ignored),
                    cache_lease_ttl=lease_ttl, unsigned_ok=unsigned_ok)
