"""What a cache entry must prove before it is loaded: its files are the ones written when it was built.

Every entry's ``meta.json`` is its manifest: the key (content hash) it was
built for and the SHA-256 digest of each of its files. :func:`entry_problems`
lists every way an entry departs from its manifest (a file edited, added or
removed, a key that is not the one asked for), so the cache never loads, and
no attack ever runs on, an entry that was changed after it was written.

What this does and does not protect against: a digest stored beside the file
it covers detects accidental damage (a truncated copy, a bad disk, a restore
that mixes two entries) and naive tampering (swapping a vocabulary, zeroing
weights, editing the recorded content hash). Someone who can write the cache
folder can also rewrite the manifest to match their edits; only a secret kept
outside the cache stops that. Setting :data:`HMAC_KEY_ENV` to such a secret
makes every new entry carry an HMAC-SHA256 of its manifest, and every entry
loaded while the variable is set must carry a valid one.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import warnings
from pathlib import Path

MANIFEST = "meta.json"
#: Environment variable holding a secret that signs manifests (optional; see the module docstring).
HMAC_KEY_ENV = "PRIVLEAK_CACHE_HMAC_KEY"
#: Keys of ``meta.json`` the cache owns; metadata returned by a ``save`` callable cannot override them.
RESERVED = ("key", "files", "hmac")
_CHUNK = 1 << 20


class CacheEntryError(RuntimeError):
    """A cache entry is unreadable or does not match what was built for its key (see :func:`entry_problems`)."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_digests(folder: Path) -> dict[str, str]:
    """``{relative posix path: sha256}`` of every file under ``folder`` except the manifest itself."""
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.relative_to(folder).as_posix() != MANIFEST}


def hmac_secret() -> bytes | None:
    """The secret in :data:`HMAC_KEY_ENV` that signs cache entries (targets and attack results), or None."""
    value = os.environ.get(HMAC_KEY_ENV, "")
    return value.encode("utf-8") if value else None


#: How a team sets the key, quoted by every message about unsigned entries.
SET_KEY_FIX = (f"set {HMAC_KEY_ENV} to a secret kept outside the cache (e.g. `export {HMAC_KEY_ENV}=$(openssl rand "
               f"-hex 32)` locally; in CI from a repository secret: `env: {HMAC_KEY_ENV}: "
               f"${{{{ secrets.{HMAC_KEY_ENV} }}}}`), then rerun once to re-sign the entries")


class UnsignedCacheWarning(UserWarning):
    """Cache entries were loaded without an HMAC key: whoever can write the cache can replace them unseen."""


_warned_unsigned = False


def warn_unsigned(what: str) -> bool:
    """Warn once per process that ``what`` (a loaded cache entry) is unsigned; True when a warning was given.

    Without :data:`HMAC_KEY_ENV` the digests in a manifest catch damage, not a
    writer who recomputes them (zeroed weights load silently), so a run that
    trusts such entries says so once, with the fix (issue 23 item 5).
    """
    global _warned_unsigned
    if _warned_unsigned or hmac_secret() is not None:
        return False
    _warned_unsigned = True
    warnings.warn(UnsignedCacheWarning(
        f"{what} was loaded from a cache whose entries are unsigned ({HMAC_KEY_ENV} is not set): anyone who can "
        "write the cache folder can replace a trained target or a result and recompute its digests, and it loads "
        f"as genuine; fix: {SET_KEY_FIX}"), stacklevel=3)
    return True


def signature(key: str, files: dict[str, str], secret: bytes) -> str:
    """HMAC-SHA256 over the entry's key and file digests (canonical JSON)."""
    text = json.dumps({"key": key, "files": files}, sort_keys=True, separators=(",", ":"))
    return hmac.new(secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


def build_manifest(folder: Path, key: str, meta: dict) -> dict:
    """The ``meta.json`` of a freshly written entry: ``meta``, then the key, digests and (optional) HMAC."""
    files = file_digests(folder)
    manifest = {**{k: v for k, v in meta.items() if k not in RESERVED}, "key": key, "files": files}
    secret = hmac_secret()
    if secret is not None:
        manifest["hmac"] = signature(key, files, secret)
    return manifest


def read_manifest(folder: Path) -> dict:
    """The entry's ``meta.json`` as a dict; :class:`CacheEntryError` when missing, not JSON or not an object."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CacheEntryError(f"{MANIFEST} is missing or unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise CacheEntryError(f"{MANIFEST} holds a {type(data).__name__}, not an object")
    return data


def entry_problems(folder: Path, key: str) -> list[str]:
    """Every way the entry at ``folder`` departs from what was built for ``key``; empty when it is genuine.

    Checked: the folder is named ``key``; the manifest records ``key``; the
    entry holds exactly the files the manifest lists, each with its recorded
    SHA-256; and, when :data:`HMAC_KEY_ENV` is set, the manifest's HMAC.
    """
    problems = []
    if folder.name != key:
        problems.append(f"the folder is named {folder.name!r} but the entry was asked for key {key!r}")
    try:
        manifest = read_manifest(folder)
    except CacheEntryError as exc:
        return problems + [str(exc)]
    if manifest.get("key") != key:
        problems.append(f"{MANIFEST} records key {manifest.get('key')!r}, not the key {key!r} computed for "
                        "this target (an entry copied or renamed from another target, or a forged content hash)")
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        return problems + [f"{MANIFEST} records no file digests (an entry written by an older pytest-privleak, "
                           "or its manifest was edited)"]
    try:
        actual = file_digests(folder)
    except OSError as exc:
        return problems + [f"its files cannot be read ({exc})"]
    for name in sorted(set(recorded) - set(actual)):
        problems.append(f"file {name} is missing")
    for name in sorted(set(actual) - set(recorded)):
        problems.append(f"file {name} was added after the entry was built")
    for name in sorted(set(recorded) & set(actual)):
        if recorded[name] != actual[name]:
            problems.append(f"file {name} has sha256 {actual[name][:16]}..., not the {recorded[name][:16]}... "
                            "recorded when it was built (edited or damaged)")
    secret = hmac_secret()
    if secret is not None:
        expected = signature(str(manifest.get("key")), recorded, secret)
        given = manifest.get("hmac")
        if not isinstance(given, str):
            problems.append(f"{MANIFEST} carries no HMAC although {HMAC_KEY_ENV} is set")
        elif not hmac.compare_digest(given, expected):
            problems.append(f"{MANIFEST}'s HMAC does not match the secret in {HMAC_KEY_ENV} (manifest rewritten, "
                            "or signed with another secret)")
    return problems
