"""Cache of attack results: an unchanged model re-runs no attack (issue 11 item 6).

The figures are deterministic (fixed seeds, CPU), so a measurement is a
function of what went into it. Each ``measure_*``/``assert_*`` helper asks
:func:`cached_results` for its *measured* results (``threshold=None``); the
helper then applies its limit, so the verdict, the figures and the evidence
are the same whether the results were computed now or loaded.

**Key.** SHA-256 of: the content hash of every model the attack reads (see
:func:`model_hash`), the attack's name, every argument of the call that can
change a figure or its label (canary, attack config, seed, confidence,
``name``, ...), :func:`code_fingerprint` (the package version, a digest of
the package's own source files, and the torch / numpy / scipy versions), so
editing any attack code or upgrading torch recomputes everything, and, for an
attack whose figures may depend on it, torch's thread count (an xdist worker runs
with its share of the cores; see :data:`THREAD_FREE_ATTACKS`).

**Which models.** Only a model that carries :data:`CONTENT_HASH_ATTR`, a
SHA-256 hex digest of everything that determines its outputs. ``train_target``
sets it on every built-in target it trains or loads through a target cache
(its target-cache key: data, config, seed, device type, code version), with
a digest of its weights as they were then: a target whose weights were
changed in place afterwards (pruned, fine-tuned further, damaged) no longer
counts and is attacked afresh. ``train_own_model`` does the same for a
team's own torch model (its key also covers the source of the model's
package), ``load_minilm`` for the real MiniLM (a digest of its files), and a
defence of :mod:`pytest_privleak.embeddings.defences` derives its hash from its
inner encoder's and its own inputs. Any other model has none and is always
attacked afresh; a team may call :func:`mark_content_hash` on its own model
only with a digest that covers everything its outputs depend on.

**Mechanisms (LDP).** A mechanism has no trained weights: an audit is keyed
by its class and parameters only for the built-in mechanisms of
:mod:`pytest_privleak.ldp.mechanisms` (their code is in the source digest).
A user's mechanism is always audited afresh, unless it carries
:data:`CONTENT_HASH_ATTR` (its code can change without the package knowing).
An audit with a ``time_budget`` is never cached: its figure depends on the
wall clock.

**Entries.** ``<cache>/results/<key>.json``: the results as JSON (never a
pickle), the key, the attack, when and by which version, and the SHA-256 of
the results' canonical JSON; written atomically (temporary file + rename).
Two workers computing the same key write the same bytes. An entry is used
only when it parses, names its own key and format, and its results match
their recorded digest and rebuild as measured :class:`LeakResult` s. Any
other entry is never trusted: by default it is deleted and the attack rerun,
with a :class:`ResultCacheWarning` (and a ``[privleak]`` line on stderr)
naming the file and what was wrong; ``on_mismatch="error"`` raises
:class:`ResultCacheError` instead. The digest guards against damage and hand
edits, not against someone who can write the cache folder and recompute it
(they could as well replace the trained weights): only the HMAC of
:data:`~pytest_privleak.cache.manifest.HMAC_KEY_ENV` does. Without it a run
that loads an entry warns once (:func:`~pytest_privleak.cache.manifest.warn_unsigned`),
and with a URL cache (shared: every job that reaches it writes it) result
entries are not trusted at all: every attack is recomputed and nothing is
stored, with one line saying why and how to set the key
(:func:`untrusted_reason`, issue 21 item 7).

``--privleak-rerun`` recomputes every result and overwrites its entry. Outside
a pytest run with the plugin (no active cache) nothing is cached.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import hmac
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from .manifest import HMAC_KEY_ENV, SET_KEY_FIX, hmac_secret, signature, warn_unsigned
from .url import is_url
from ..results import LeakResult

__all__ = ["CONTENT_HASH_ATTR", "FORMAT", "LOADED_EVIDENCE", "ResultCache", "ResultCacheError",
           "ResultCacheWarning", "activate", "active", "cached_results", "code_fingerprint", "mark_content_hash",
           "mechanism_identity", "model_hash", "result_key", "untrusted_reason"]

#: Attribute naming a model's content hash (a 64-hex SHA-256); only such models have cached results.
CONTENT_HASH_ATTR = "privleak_content_hash"
#: Version of the entry layout; part of every key.
FORMAT = 1
#: Evidence line added to a result loaded from the cache (the only difference from a computed one).
LOADED_EVIDENCE = "result cache"
RESULTS_FOLDER = "results"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ResultCacheError(ValueError):
    """A result-cache entry is not what was written for its key (raised with ``on_mismatch="error"``)."""


class ResultCacheWarning(UserWarning):
    """A result-cache entry was not what was written for its key; it was deleted and the attack rerun."""


# --------------------------------------------------------------------------- identities

_WEIGHTS_ATTR = "_privleak_weights_digest"


#: Optional method of a model: ``privleak_state() -> JSON-safe dict`` of the plain settings its outputs depend on
#: (a defence's parameters, an encoder's pooling and truncation), checked like its weights.
STATE_METHOD = "privleak_state"


def weights_digest(model: Any) -> str | None:
    """SHA-256 of what can change under a declared content hash: the weights of ``model`` when it is a torch
    module, else of every torch module it holds directly; the digest of every model it wraps that declares a
    content hash (a defence around an encoder); and its :data:`STATE_METHOD` settings. None: it has none."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(model, torch.nn.Module):
        held, wrapped = [("module", model)], []
    else:
        try:
            attributes = vars(model)
        except TypeError:
            return None
        held = sorted((k, v) for k, v in attributes.items() if isinstance(v, torch.nn.Module))
        wrapped = sorted((k, weights_digest(v)) for k, v in attributes.items()
                         if not isinstance(v, torch.nn.Module) and getattr(v, CONTENT_HASH_ATTR, None) is not None)
    state_of = getattr(model, STATE_METHOD, None)
    state = state_of() if callable(state_of) else None
    if not held and not any(d for _, d in wrapped) and state is None:
        return None
    digest = hashlib.sha256()
    if state is not None:
        digest.update(("state " + json.dumps(state, sort_keys=True, default=repr)).encode("utf-8"))
    for attribute, inner in wrapped:
        digest.update(f"wraps {attribute}:{inner}".encode("utf-8"))
    for attribute, module in held:
        for name, tensor in module.state_dict().items():
            data = tensor.detach().to("cpu").contiguous()
            if data.dtype == torch.bfloat16:
                data = data.float()
            digest.update(f"{attribute}.{name}:{data.dtype}:{tuple(data.shape)}".encode("utf-8"))
            digest.update(data.numpy().tobytes())
    return digest.hexdigest()


def mark_content_hash(model: Any, digest: str) -> Any:
    """Declare ``model``'s content hash (what :func:`model_hash` reads) and remember its weights as they are
    now (a later change to them voids the declaration); returns ``model``."""
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise ValueError(f"content hash must be a 64-character lowercase hex SHA-256 digest, got {digest!r}; "
                         "fix: pytest_privleak.cache.targets.content_hash(<everything that determines the model>)")
    setattr(model, CONTENT_HASH_ATTR, digest)
    setattr(model, _WEIGHTS_ATTR, weights_digest(model))
    return model


def model_hash(model: Any) -> str | None:
    """The declared content hash of ``model``, or None when it has none or its weights changed since it was
    declared (its results are then never cached)."""
    digest = getattr(model, CONTENT_HASH_ATTR, None)
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        return None
    recorded = getattr(model, _WEIGHTS_ATTR, None)
    if recorded is not None and weights_digest(model) != recorded:
        return None
    return digest


def mechanism_identity(mechanism: Any) -> dict | None:
    """What determines a built-in LDP mechanism's outputs (class and parameters), else None.

    A user's mechanism counts only when it declares :data:`CONTENT_HASH_ATTR`.
    """
    declared = model_hash(mechanism)
    if declared is not None:
        return {"content_hash": declared}
    cls = type(mechanism)
    if cls.__module__ != "pytest_privleak.ldp.mechanisms":
        return None
    try:
        params = dict(vars(mechanism))
    except TypeError:
        return None
    return {"class": cls.__qualname__, "parameters": params}


#: The package's root folder: every ``.py`` file under it is in :func:`code_fingerprint` (this module lives in
#: the ``cache`` wing, one level down; before issue 24 the digest covered that wing only, so an edited attack
#: kept loading the results its old code had computed).
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def source_files() -> list[Path]:
    """Every ``.py`` file of the package, in a stable order: what the source digest covers."""
    return sorted(PACKAGE_ROOT.rglob("*.py"))


@lru_cache(maxsize=1)
def code_fingerprint() -> dict[str, str]:
    """Package version, SHA-256 of the package's ``.py`` sources, and the numeric libraries' versions."""
    from importlib import metadata

    digest = hashlib.sha256()
    for path in source_files():
        digest.update(path.relative_to(PACKAGE_ROOT).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    versions = {}
    for name in ("pytest-privleak", "torch", "numpy", "scipy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return {"source": digest.hexdigest(), **versions}


def _plain(obj: Any) -> Any:
    """``obj`` with datasets and models replaced by their content hash, ready for ``cache.content_hash``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and callable(getattr(obj, "content_hash", None)):
        return {"content_hash": obj.content_hash()}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


#: Attacks whose figures do not depend on torch's thread count: keyed without it, so a warm run under any
#: ``-n`` loads them (issue 24 item 6). Scoring attacks (ranks and rates of scores, nothing trained
#: inside): exposure and exhaustive CEA ranks and scores of a joint BiLSTM-CRF are bitwise equal with 1
#: and 2 threads (tests/test_result_cache_threads.py); Mix And Match only scores too. Keyword inference
#: trains its attack models with one thread whatever the caller's count
#: (:data:`pytest_privleak.embeddings.keywords.TRAINING_THREADS`) and encodes at the caller's: its
#: results and Mix And Match's were bitwise equal at 1, 2, 4 and 8 threads on the sample project's calls
#: (tests/test_thread_free_training_attacks.py checks 1 and 2). Embedding inversion trains its sub-attacks
#: with one thread the same way (:data:`pytest_privleak.embeddings.inversion.TRAINING_THREADS`; its figures
#: were bitwise equal at 1, 2 and 4 threads before the pin). CEA's gradient search trains at the caller's
#: count and keeps it in its key.
THREAD_FREE_ATTACKS = frozenset({"exposure", "d-exposure", "ldp", "membership", "keyword-inference",
                                 "mix-and-match", "embedding-inversion"})


def result_key(attack: str, models: Sequence[Any], inputs: dict[str, Any], *,
               threads_matter: bool | None = None) -> str | None:
    """The entry key of one measurement, or None when it must not be cached.

    None when a model has no declared content hash (:func:`model_hash`) or an
    input cannot be hashed (e.g. a callable). ``threads_matter`` (default: the
    attack is not in :data:`THREAD_FREE_ATTACKS`) puts torch's thread count in the key.
    """
    from .targets import content_hash

    hashes = [model_hash(m) for m in models]
    if not hashes or any(h is None for h in hashes):
        return None
    torch = sys.modules.get("torch")
    if threads_matter is None:
        threads_matter = attack not in THREAD_FREE_ATTACKS
    # an attack that trains or encodes with torch's own thread count may differ in the last bits between counts
    threads = torch.get_num_threads() if torch is not None and threads_matter else None
    try:
        return content_hash({"format": FORMAT, "attack": attack, "models": hashes, "inputs": _plain(inputs),
                             "code": code_fingerprint(), "torch_threads": threads})
    except (TypeError, ValueError, RecursionError):
        return None


# --------------------------------------------------------------------------- entries

def _signature_problems(key: str, digest: str, given: Any) -> list[str]:
    """With :data:`~pytest_privleak.cache.manifest.HMAC_KEY_ENV` set, the entry must carry its HMAC, as target
    cache entries must: the sha256 alone stops damage, not someone who can write the cache folder."""
    secret = hmac_secret()
    if secret is None:
        return []
    if not isinstance(given, str):
        return [f"it carries no HMAC although {HMAC_KEY_ENV} is set"]
    if not hmac.compare_digest(given, signature(key, {"results": digest}, secret)):
        return [f"its HMAC does not match the secret in {HMAC_KEY_ENV} (entry rewritten, or written with "
                "another secret)"]
    return []


def _canonical_results(results: list[dict]) -> str:
    return json.dumps(results, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _encoded(result: LeakResult) -> dict:
    from ..results import encode

    return encode(result.to_json())


def _decoded(data: dict) -> LeakResult:
    from ..results import decode_result

    return LeakResult.from_json(decode_result(data))


def untrusted_reason(location: Any) -> str | None:
    """Why the result entries of the cache at ``location`` are not trusted, or None (trusted).

    A URL cache (``s3://``, ``sftp://``, ...) is written by every job that can
    reach it; without :data:`HMAC_KEY_ENV` any of them could forge a result
    (a leaking model's exposure edited to 0.5 bits, its digest recomputed), so
    its results are recomputed. A local folder stays trusted (with a warning
    once per run when unsigned): only those who can write it can forge.
    """
    if hmac_secret() is not None or not (isinstance(location, str) and is_url(location.strip())):
        return None
    return (f"result cache not trusted: the cache is the shared URL {location} and {HMAC_KEY_ENV} is not set, so "
            f"any job that can write it could forge a result entry; every attack is recomputed and no result is "
            f"stored. Fix: {SET_KEY_FIX}")


class ResultCache:
    """Folder of measured results keyed by :func:`result_key`; see the module docstring.

    ``on_mismatch``: ``"recompute"`` (warn, delete the entry, rerun the
    attack) or ``"error"`` (raise :class:`ResultCacheError`). ``untrusted``:
    the reason its entries are not trusted (:func:`untrusted_reason`): then
    nothing is loaded or stored.
    """

    def __init__(self, root: str | os.PathLike, *, rerun: bool = False, on_mismatch: str = "recompute",
                 untrusted: str | None = None) -> None:
        if on_mismatch not in ("recompute", "error"):
            raise ValueError(f"ResultCache(on_mismatch={on_mismatch!r}) must be 'recompute' (warn, delete and "
                             "rerun the attack) or 'error' (raise ResultCacheError)")
        self.root = Path(root)
        self.rerun = bool(rerun)
        self.on_mismatch = on_mismatch
        self.untrusted = untrusted
        self.loaded: list[str] = []
        self.stored: list[str] = []

    def path(self, key: str) -> Path:
        if not isinstance(key, str) or not _HEX64.fullmatch(key):
            raise ValueError(f"result cache key {key!r} must be a 64-character hex SHA-256 digest")
        return self.root / f"{key}.json"

    def problems(self, key: str, entry: Any) -> list[str]:
        """Every way ``entry`` (parsed JSON) departs from what :meth:`store` writes for ``key``."""
        if not isinstance(entry, dict):
            return [f"it holds a {type(entry).__name__}, not an object"]
        found = []
        if entry.get("format") != FORMAT:
            found.append(f"format {entry.get('format')!r}, expected {FORMAT}")
        if entry.get("key") != key:
            found.append(f"it records key {entry.get('key')!r}, not its file name's {key!r}")
        results = entry.get("results")
        if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
            return found + ["'results' is not a non-empty list of result objects"]
        try:
            digest = hashlib.sha256(_canonical_results(results).encode("utf-8")).hexdigest()
        except ValueError as exc:
            return found + [f"its results are not strict JSON ({exc})"]
        if entry.get("sha256") != digest:
            found.append(f"its results' sha256 is {digest[:16]}..., the entry records "
                         f"{str(entry.get('sha256'))[:16]}... (edited or damaged after it was written)")
        found += _signature_problems(key, digest, entry.get("hmac"))
        for i, data in enumerate(results):
            try:
                result = _decoded(data)
            except (TypeError, ValueError, KeyError) as exc:
                found.append(f"result {i} does not rebuild as a LeakResult ({exc})")
                continue
            if result.threshold is not None:
                found.append(f"result {i} carries a threshold ({result.threshold}); entries hold measured results")
            elif _encoded(result) != data:
                found.append(f"result {i} holds fields a LeakResult does not rebuild identically")
        return found

    def load(self, key: str) -> list[LeakResult] | None:
        """The verified results of ``key``, or None (absent, ``rerun``, or refused and deleted)."""
        path = self.path(key)
        if self.rerun or self.untrusted or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems = [f"it cannot be read as JSON ({exc})"]
        else:
            problems = self.problems(key, entry)
        if problems:
            self._refuse(path, problems)
            return None
        self.loaded.append(key)
        warn_unsigned(f"result cache entry {path}")
        when = entry.get("created", "?")
        note = (f"loaded from the result cache (key {key[:16]}, computed {when} by pytest-privleak "
                f"{entry.get('package', '?')}); --privleak-rerun recomputes it")
        out = []
        for data in entry["results"]:
            result = _decoded(data)
            result.evidence[LOADED_EVIDENCE] = note
            out.append(result)
        return out

    def store(self, key: str, attack: str, results: Sequence[LeakResult]) -> list[LeakResult]:
        """Write ``results`` (measured, ``threshold=None``) as the entry of ``key``; return them as a load
        would (rebuilt from their JSON, so a computed result and a loaded one are identical)."""
        encoded = [_encoded(r) for r in results]
        for r in results:
            if r.threshold is not None:
                raise ValueError(f"{r.name}: only measured results (threshold=None) are cached")
        if self.untrusted:  # an entry no later run would trust is not written
            return [_decoded(e) for e in encoded]
        text = _canonical_results(encoded)
        fingerprint = code_fingerprint()
        entry = {"format": FORMAT, "key": key, "attack": attack,
                 "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "package": fingerprint["pytest-privleak"], "code": fingerprint,
                 "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "results": encoded}
        secret = hmac_secret()
        if secret is not None:  # the target cache's secret signs results too: a writer without it cannot forge
            entry["hmac"] = signature(key, {"results": entry["sha256"]}, secret)
        try:
            # Key order kept (not sorted): evidence and extra print in the order the attack gave them.
            write_text_atomic(self.path(key), json.dumps(entry, indent=1, allow_nan=False))
        except OSError as exc:  # a cache that cannot be written costs speed, never a verdict
            warnings.warn(f"could not write the result cache entry {self.path(key)} ({exc}); the result is used "
                          "but will be recomputed next run. Fix: make the cache folder writable "
                          "(--privleak-cache-dir)", ResultCacheWarning, stacklevel=3)
        else:
            self.stored.append(key)
        return [_decoded(e) for e in encoded]

    def _refuse(self, path: Path, problems: list[str]) -> None:
        what = (f"result cache entry {path} is not what was written for its key: {'; '.join(problems)}. "
                "pytest-privleak never uses such an entry")
        if self.on_mismatch == "error":
            raise ResultCacheError(f"{what}. Fix: delete it (rm '{path}') or run with --privleak-rerun to "
                                   "recompute the attack")
        message = f"{what}; it was deleted and the attack is being rerun"
        warnings.warn(message, ResultCacheWarning, stacklevel=4)
        print(f"[privleak] {message}", file=sys.stderr, flush=True)
        path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- the active cache

_active: ResultCache | None = None


def activate(cache: ResultCache | None) -> ResultCache | None:
    """Make ``cache`` the one the attacks use (None: cache nothing); returns the previous one."""
    global _active
    previous, _active = _active, cache
    return previous


def active() -> ResultCache | None:
    return _active


def cached_results(attack: str, models: Sequence[Any], inputs: dict[str, Any],
                   compute: Callable[[], Sequence[LeakResult]], *,
                   cache: ResultCache | None = None, threads_matter: bool | None = None) -> list[LeakResult]:
    """The measured results of one attack call: loaded when cached, else computed (and stored).

    ``models``: every model the figures depend on (all need a content hash);
    ``inputs``: every other argument that can change a figure or its label;
    ``compute()``: the measured results (``threshold=None``). Nothing is
    recorded here; the caller records what it returns.
    """
    cache = _active if cache is None else cache
    key = result_key(attack, models, inputs, threads_matter=threads_matter) if cache is not None else None
    if key is None:
        return list(compute())
    loaded = cache.load(key)
    if loaded is not None:
        return loaded
    return cache.store(key, attack, list(compute()))
