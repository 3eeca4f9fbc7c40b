"""Where the target cache lives: a local folder (the default) or a URL that fsspec resolves.

``--privleak-cache-dir`` (ini ``privleak_cache_dir``) takes either. A plain
path is a folder on this machine, served by :class:`~pytest_privleak.cache.targets.TargetCache`
with no dependency beyond the plugin's own. A URL (``file://``, ``sftp://host/path``,
``s3://bucket/prefix``, ``memory://``, or any protocol fsspec knows, chains
such as ``simplecache::s3://`` included) is a cache shared by every host that
reaches it, served by :class:`~pytest_privleak.cache.remote.RemoteTargetCache`
through fsspec, which is an optional extra: a URL without it, with an unknown
protocol or without the protocol's backend is refused when the run starts, with
a message naming the option and the package to install. Nothing here imports
fsspec until a URL is given.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["CacheURLError", "OPTION", "REMOTE_EXTRA", "cache_location", "check_url", "default_mirror_dir",
           "is_url"]

#: How the option is named in messages.
OPTION = "--privleak-cache-dir (ini: privleak_cache_dir)"
#: The install command of the optional extra that brings fsspec.
REMOTE_EXTRA = "pip install 'pytest-privleak[remote-cache]'"
#: Environment variable naming the local folder that mirrors a URL cache on this host.
MIRROR_ENV = "PRIVLEAK_CACHE_MIRROR"
_URL = re.compile(r"(?P<protocols>[A-Za-z][A-Za-z0-9+.-]*(?:::[A-Za-z][A-Za-z0-9+.-]*)*)://(?P<rest>.*)", re.S)
#: Backends whose package name differs from what fsspec's message suggests, or that it does not name.
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "az": "adlfs",
             "sftp": "paramiko", "ssh": "paramiko", "http": "aiohttp", "https": "aiohttp"}


class CacheURLError(ValueError):
    """The cache location is a URL this installation cannot open; the message names the option and the fix."""


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``proto://...``, chains ``a::b://...``), not a folder path."""
    return bool(_URL.fullmatch(text))


def _protocols(url: str) -> list[str]:
    """Every protocol of a (possibly chained) fsspec URL: ``simplecache::s3://b`` -> ``[simplecache, s3]``."""
    out = []
    for part in url.split("::"):
        out.append(part.split("://", 1)[0] if "://" in part else part)
    return [p for p in out if p]


def check_url(url: str, *, option: str = OPTION) -> str:
    """Return ``url`` when fsspec can open it here, else raise :class:`CacheURLError` naming ``option`` and the fix.

    Checks without connecting: fsspec is importable, every protocol of the
    chain is known to fsspec and its backend package is installed, and the
    URL names a location after ``://`` (``memory://`` excepted).
    """
    match = _URL.fullmatch(url)
    if not match:
        raise CacheURLError(f"{option}={url!r} is not a URL (expected PROTOCOL://LOCATION, e.g. "
                            "s3://bucket/prefix); give a URL, or a local folder path")
    try:
        import fsspec
    except ImportError:
        raise CacheURLError(
            f"{option}={url!r} is a URL, and URL caches are read and written through fsspec, which is not "
            f"installed. Fix: {REMOTE_EXTRA} (plus the backend of the protocol, e.g. s3fs for s3://, paramiko "
            "for sftp://), or give a local folder path") from None
    for protocol in _protocols(url):
        try:
            fsspec.get_filesystem_class(protocol)
        except ValueError:
            known = ", ".join(sorted(p for p in fsspec.available_protocols() if p.isalnum())[:40])
            raise CacheURLError(
                f"{option}={url!r}: fsspec knows no protocol {protocol!r}. Fix: use one it knows ({known}, ...), "
                "e.g. file:///shared/privleak-cache, sftp://host/path or s3://bucket/prefix, or a local folder "
                "path") from None
        except ImportError as exc:
            package = _PACKAGES.get(protocol, f"the fsspec backend for {protocol}://")
            raise CacheURLError(
                f"{option}={url!r}: the {protocol}:// backend is not installed ({exc}). Fix: pip install "
                f"{package} (next to {REMOTE_EXTRA}), or give a local folder path") from None
    if not match["rest"].strip("/") and _protocols(url)[-1] != "memory":
        raise CacheURLError(f"{option}={url!r} names no location after '://'. Fix: give the folder, host or "
                            "bucket, e.g. sftp://host/srv/privleak-cache or s3://bucket/privleak-cache")
    return url


def cache_location(value: object, *, root: str | os.PathLike | None = None, option: str = OPTION) -> Path | str:
    """The cache location an option value names: a checked URL (``str``) or a folder ``Path``.

    A relative folder is taken under ``root`` (the rootdir) when given.
    Raises :class:`CacheURLError` (a ``ValueError``) for an empty value or a
    URL this installation cannot open.
    """
    text = str(value).strip() if value is not None else ""
    if not text:
        raise CacheURLError(f"{option} is empty; give a folder (default .privleak-cache) or a URL such as "
                            "s3://bucket/privleak-cache")
    if is_url(text):
        return check_url(text, option=option)
    path = Path(text)
    if not path.is_absolute() and root is not None:
        path = Path(root) / path
    _check_folder(path, text, option)
    return path


def _check_folder(path: Path, text: str, option: str) -> None:
    """Refuse a cache folder that is, or lies under, an existing file: every test would fail creating it."""
    for place in (path, *path.parents):
        if place.exists() or place.is_symlink():
            if place.is_dir():
                return
            what = "is a file" if place == path else f"lies under {place}, which is a file"
            raise CacheURLError(f"{option}: {text!r} names the cache folder {path}, but it {what}, not a folder. "
                                "Fix: give a folder (created when missing), e.g. .privleak-cache, or move that file "
                                "away")


def default_mirror_dir(url: str) -> Path:
    """The folder that mirrors the URL cache ``url`` on this host.

    ``$PRIVLEAK_CACHE_MIRROR`` when set, else ``$XDG_CACHE_HOME`` (or
    ``~/.cache``) ``/pytest-privleak/<sha256(url)[:16]>``: one per URL, kept
    across runs so a host downloads an entry once.
    """
    tag = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    base = os.environ.get(MIRROR_ENV)
    if base:
        return Path(base) / tag
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "pytest-privleak" / tag
