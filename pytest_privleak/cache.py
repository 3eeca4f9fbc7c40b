"""Content-addressed cache of trained targets, shared by tests and xdist workers.

An entry is a folder named by the SHA-256 of everything that determines the
trained weights (data, config, seed, code version). It is built in a staging
folder and published with one rename, under a cross-process file lock, so two
workers asking for the same target train it once. Weights are stored with
safetensors and metadata as JSON: nothing is ever unpickled.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable, TypeVar

from filelock import FileLock

from .atomic import publish_dir_atomic, write_text_atomic

T = TypeVar("T")
DEFAULT_CACHE_DIR = ".privleak-cache"


def _canonical(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return _canonical(obj.tolist())
    if hasattr(obj, "content_hash"):
        return {"content_hash": obj.content_hash()}
    raise TypeError(f"cannot hash a {type(obj).__name__} for the target cache; pass plain data "
                    "(str, numbers, lists, dicts, dataclasses)")


def content_hash(obj: Any) -> str:
    """SHA-256 hex digest of the canonical JSON form of ``obj`` (stable across processes)."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TargetCache:
    """Folder of trained targets keyed by content hash; see the module docstring."""

    def __init__(self, root: str | os.PathLike = DEFAULT_CACHE_DIR) -> None:
        self.root = Path(root)

    def entry(self, key: str) -> Path:
        return self.root / key

    def has(self, key: str) -> bool:
        return (self.entry(key) / "meta.json").is_file()

    def get_or_build(
        self,
        key: str,
        build: Callable[[], T],
        save: Callable[[T, Path], dict],
        load: Callable[[Path], T],
    ) -> tuple[T, bool]:
        """Return ``(object, loaded_from_cache)``; build and publish it under a lock when absent.

        ``save(obj, folder)`` writes the object's files and returns JSON-safe metadata.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / f"{key}.lock")):
            if self.has(key):
                return load(self.entry(key)), True
            obj = build()
            staging = self.root / f".staging-{key[:16]}-{uuid.uuid4().hex}"
            staging.mkdir()
            try:
                meta = save(obj, staging)
                write_text_atomic(staging / "meta.json", json.dumps({"key": key, **meta}, indent=2))
                publish_dir_atomic(staging, self.entry(key))
            except BaseException:
                import shutil

                shutil.rmtree(staging, ignore_errors=True)
                raise
            return obj, False

    def read_meta(self, key: str) -> dict:
        path = self.entry(key) / "meta.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RuntimeError(f"cache entry {path} is unreadable ({exc}); delete the folder "
                               f"{self.entry(key)} and rerun to retrain it") from exc
