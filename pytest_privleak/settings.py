"""The plugin's settings, read from command-line options with ini fallbacks and validated.

Bad values become ``pytest.UsageError`` messages (raised by the plugin) that
name the option and what it accepts.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .device import parse_device, parse_device_list


@dataclass(frozen=True)
class Settings:
    device: str = "auto"
    devices: tuple[str, ...] = ()
    seed: int = 0
    cache_dir: Path = Path(".privleak-cache")


def parse_seed(value: object, *, option: str = "--privleak-seed") -> int:
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{option}={value!r} is not an integer; use a non-negative integer such as 0") from None
    if seed < 0:
        raise ValueError(f"{option}={value!r} is negative; use a non-negative integer such as 0")
    return seed


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
    cache = _pick(config, "privleak_cache_dir", "privleak_cache_dir") or ".privleak-cache"
    cache_dir = Path(cache)
    if not cache_dir.is_absolute():
        cache_dir = Path(config.rootpath) / cache_dir
    return Settings(device=device, devices=devices, seed=seed, cache_dir=cache_dir)
