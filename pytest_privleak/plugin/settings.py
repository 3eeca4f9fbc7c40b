"""The plugin's settings, read from command-line options with ini fallbacks and validated.

Bad values become ``pytest.UsageError`` messages (raised by the plugin) that
name the option and what it accepts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..cache.url import cache_location
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
    tolerances: dict[str, float] = field(default_factory=dict)
    allow_missing: bool = False
    cache_lease_ttl: float | None = None   # seconds; None: the URL cache's default (cache_lease.DEFAULT_LEASE_TTL)


def parse_seed(value: object, *, option: str = "--privleak-seed") -> int:
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{option}={value!r} is not an integer; use a non-negative integer such as 0") from None
    if seed < 0:
        raise ValueError(f"{option}={value!r} is negative; use a non-negative integer such as 0")
    return seed


def parse_tolerances(lines, *, option: str = "privleak_tolerance") -> dict[str, float]:
    """Parse ini lines ``cea.accuracy=0.1`` / ``exposure=2`` / ``default=0.05`` into a dict.

    Keys are ``attack.metric``, a bare ``metric``, or ``default``; values are
    non-negative absolute tolerances in the metric's own unit.
    """
    out: dict[str, float] = {}
    for number, raw in enumerate(lines or [], start=1):
        line = str(raw).strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        try:
            tol = float(value)
        except ValueError:
            tol = float("nan")
        if not sep or not key or not (tol >= 0) or tol == float("inf"):
            raise ValueError(f"ini option {option}, line {number} ({line!r}): expected 'attack.metric=TOLERANCE' "
                             "with a finite non-negative number, e.g. 'cea.accuracy=0.1' or 'default=0.05'")
        out[key] = tol
    return out


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
    tolerances = parse_tolerances(config.getini("privleak_tolerance"))
    try:
        allow_missing = bool(config.getoption("privleak_allow_missing") or config.getini("privleak_allow_missing"))
    except (ValueError, pytest.UsageError) as exc:  # pytest's message does not name the option
        raise ValueError(f"ini option privleak_allow_missing is not a boolean ({exc}); write "
                         "privleak_allow_missing = true (or false)") from None
    lease_ttl = parse_lease_ttl(config.getini(LEASE_TTL_INI))   # registered by plugin_hosts
    return Settings(device=device, devices=devices, seed=seed, cache_dir=cache_dir, report_dir=report_dir,
                    baseline=baseline, save_baseline=save_baseline, tolerances=tolerances,
                    allow_missing=allow_missing, cache_lease_ttl=lease_ttl)
