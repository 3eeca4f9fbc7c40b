"""Open the target cache a location names: a local folder, or shared storage behind a URL."""
from __future__ import annotations

import os

from .remote import RemoteTargetCache
from .targets import TargetCache
from .url import is_url

__all__ = ["open_cache"]


def open_cache(location: str | os.PathLike, *, lease_ttl: float | None = None, **kwargs):
    """A :class:`~pytest_privleak.cache.targets.TargetCache` for a folder, a
    :class:`~pytest_privleak.cache.remote.RemoteTargetCache` for a URL; ``kwargs`` go to it.

    ``lease_ttl`` (seconds; ini ``privleak_cache_lease_ttl``) is how long a URL cache's cross-host lease
    outlives its holder's last heartbeat (``None``: the default); a folder's lock needs none, since it
    is released when its process dies.
    """
    if isinstance(location, str) and is_url(location.strip()):
        if lease_ttl is not None:
            kwargs["lease_ttl"] = lease_ttl
        return RemoteTargetCache(location.strip(), **kwargs)
    return TargetCache(location, **kwargs)
