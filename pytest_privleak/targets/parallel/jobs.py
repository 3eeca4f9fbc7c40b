"""One own-model training as an object, and as JSON another process can run (issue 35 item 2).

:class:`OwnTraining` is one ``train_own_model`` call; :func:`to_job` writes it
as JSON (functions by module, name and file; the dataset's splits; the cache's
folder or URL) and :func:`from_job` makes it again in another process, which
must key it the same way, so it trains and publishes the same cache entry.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...progress import events as progress

__all__ = ["NotPortable", "OwnTraining", "note", "to_job", "from_job"]


def in_part(text: str | None):
    """``progress.part(text)`` where the progress wing has parts (issue 34), else nothing."""
    import contextlib

    part = getattr(progress, "part", None)
    return part(text) if part is not None and text else contextlib.nullcontext()


def note(line: str) -> None:
    """One ``[privleak]`` line about how trainings were spread."""
    progress.emit(progress.NOTE, line=f"[privleak] {line}")


class NotPortable(Exception):
    """A training that only this process can run; the message says why, in a few words."""


@dataclass(frozen=True)
class OwnTraining:
    """One ``train_own_model(train, dataset, build=..., wrap=..., cache=..., ...)`` call."""

    train: Callable[..., Any]
    dataset: Any
    build: Callable[[Any], Any]
    wrap: Callable[[Any], Any] | None = None
    cache: Any = None
    device: str = "cpu"
    seed: int = 0
    sources: Sequence[str] = ()
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    #: which of several it is (``"seed 3 of 7"``, ``"reference 2 of 4"``), said by its progress lines
    part: str | None = None

    def run(self) -> Any:
        from ..own_model import train_own_model

        with in_part(self.part):
            return train_own_model(self.train, self.dataset, build=self.build, wrap=self.wrap, cache=self.cache,
                                   device=self.device, seed=self.seed, sources=self.sources, name=self.name,
                                   **self.config)

    def check(self) -> None:
        """The errors ``train_own_model`` gives these arguments, raised before anything is spread."""
        from ..own_model import _check

        _check(self.train, self.build, self.wrap, self.dataset)

    def published(self, key: str) -> bool:
        """Whether the cache holds this training's model (``key``: its :meth:`key`, computed once by the caller)."""
        return self.cache.has(key)

    def key(self) -> str:
        from ..own_model import own_model_key

        return own_model_key(self.train, self.dataset, self.config, seed=self.seed, device=self.device,
                             sources=self.sources)

    @property
    def label(self) -> str:
        return self.name or f"{getattr(self.train, '__qualname__', 'model')} {self.key()[:8]}"


# --------------------------------------------------------------------------- a training as JSON


def _function(function: Any, argument: str) -> dict[str, str]:
    """Where another process finds ``function``: its module (importable from ``sys.path``), name and file."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    name = getattr(function, "__qualname__", "")
    where = f"{argument}={getattr(function, '__module__', '?')}:{name}"
    if "<lambda>" in name or "<locals>" in name:
        raise NotPortable(f"{where} is a lambda or a function defined inside another, which a new process cannot "
                          "import by its name")
    if module is None or module.__name__ == "__main__" or not getattr(module, "__file__", None):
        raise NotPortable(f"{where} is in __main__ or in no file, which a new process cannot import")
    file = Path(module.__file__).resolve()
    if not _findable(module.__name__, file):
        raise NotPortable(f"{where}: a new process would not find {file} as module {module.__name__!r} on sys.path "
                          "(e.g. a test module under pytest's --import-mode=importlib)")
    return {"module": module.__name__, "name": name, "file": str(file)}


def _findable(name: str, file: Path) -> bool:
    """Whether importing ``name`` from ``sys.path`` in a new process would load ``file``."""
    import importlib.machinery

    top = name.split(".")[0]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if "." not in name:
        return spec.origin is not None and Path(spec.origin).resolve() == file
    roots = [Path(p).resolve() for p in (spec.submodule_search_locations or [])]
    return any(root in file.parents for root in roots)


def _resolve(spec: dict[str, str], argument: str) -> Any:
    """The function ``spec`` names, from the same file; :class:`NotPortable` when this process cannot import it."""
    import importlib

    where = f"{argument}={spec['module']}:{spec['name']}"
    module = sys.modules.get(spec["module"])
    if module is None:
        try:
            module = importlib.import_module(spec["module"])
        except Exception as exc:  # noqa: BLE001 - any failure to import means: train it where it was asked for
            raise NotPortable(f"{where}: a new process cannot import {spec['module']!r} "
                              f"({type(exc).__name__}: {exc})") from exc
    if str(Path(getattr(module, "__file__", "") or "").resolve()) != spec["file"]:
        raise NotPortable(f"{where}: module {spec['module']!r} is another file in a new process "
                          f"({getattr(module, '__file__', None)}, not {spec['file']})")
    target: Any = module
    for part in spec["name"].split("."):
        target = getattr(target, part, None)
    if target is None:
        raise NotPortable(f"{where}: not found in {spec['file']}")
    return target


def _cache_spec(cache: Any) -> dict[str, Any]:
    from ...cache.remote import RemoteTargetCache
    from ...cache.targets import TargetCache

    if isinstance(cache, RemoteTargetCache) and not cache.storage_options:
        return {"url": cache.url, "mirror": str(cache.local.root), "lease_ttl": cache.lease_ttl,
                "on_mismatch": cache.on_mismatch}
    if type(cache) is TargetCache:
        return {"folder": str(Path(cache.root).resolve()), "on_mismatch": cache.on_mismatch}
    raise NotPortable(f"the cache {type(cache).__name__} cannot be opened by another process")


def _open_cache(spec: dict[str, Any]) -> Any:
    from ...cache.remote import RemoteTargetCache
    from ...cache.targets import TargetCache

    if "url" in spec:
        return RemoteTargetCache(spec["url"], mirror_dir=spec["mirror"], lease_ttl=spec["lease_ttl"],
                                 on_mismatch=spec["on_mismatch"])
    return TargetCache(spec["folder"], on_mismatch=spec["on_mismatch"])


def _dataset_spec(dataset: Any) -> dict[str, Any]:
    """An :class:`~pytest_privleak.data.types.NLUDataset` (or a dataset class of this package built on it, e.g.
    the ``InjectedDataset`` of ``inject_canaries``) as JSON: its class, splits, name and other fields."""
    import dataclasses

    from ...data.types import NLUDataset

    kind = type(dataset)
    if not (isinstance(dataset, NLUDataset) and kind.__module__.startswith("pytest_privleak.")):
        raise NotPortable(f"the dataset is a {kind.__name__}, not a pytest_privleak NLUDataset")
    extra = {f.name: getattr(dataset, f.name) for f in dataclasses.fields(dataset)
             if f.name not in ("train", "valid", "test", "name")}
    try:
        json.dumps(extra)
    except (TypeError, ValueError) as exc:
        raise NotPortable(f"the dataset's fields {sorted(extra)} are not plain data") from exc
    return {"class": f"{kind.__module__}:{kind.__qualname__}", "splits": dataset.to_json(), "name": dataset.name,
            "extra": extra}


def _dataset(spec: dict[str, Any]) -> Any:
    import importlib

    from ...data.types import Utterance

    module, _, name = spec["class"].partition(":")
    if not module.startswith("pytest_privleak."):
        raise NotPortable(f"dataset class {spec['class']} is not one of pytest_privleak's")
    kind = getattr(importlib.import_module(module), name)
    splits = {split: tuple(Utterance(**u) for u in spec["splits"][split]) for split in ("train", "valid", "test")}
    extra = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["extra"].items()}
    return kind(**splits, name=spec["name"], **extra)


def torch_settings() -> dict[str, Any]:
    """The global torch settings that change what a training computes (a conftest may set them)."""
    import torch

    return {"default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "matmul_precision": torch.get_float32_matmul_precision()}


def apply_torch_settings(settings: dict[str, Any]) -> None:
    """Make this process's global torch settings ``settings`` (a child process, before a job)."""
    import torch

    torch.set_default_dtype(getattr(torch, settings["default_dtype"]))
    torch.use_deterministic_algorithms(bool(settings["deterministic"]))
    torch.set_float32_matmul_precision(settings["matmul_precision"])


def to_job(training: OwnTraining) -> dict[str, Any]:
    """``training`` as JSON-safe data another process can run (:func:`from_job`); :class:`NotPortable` if not."""
    if training.cache is None:
        raise NotPortable("no cache to hand the trained model back through")
    return {"train": _function(training.train, "train"), "build": _function(training.build, "build"),
            "dataset": _dataset_spec(training.dataset), "cache": _cache_spec(training.cache),
            "device": training.device, "seed": training.seed,
            "sources": [str(Path(s).resolve()) for s in training.sources], "name": training.label,
            "config": training.config, "key": training.key(), "torch": torch_settings(), "part": training.part}


def from_job(job: dict[str, Any], device: str | None = None) -> OwnTraining:
    """The training ``job`` describes (``device``: run it there instead, e.g. a helper worker's own GPU).

    :class:`NotPortable` when this process's global torch settings (default dtype, deterministic algorithms,
    float32 matmul precision) are not the poster's: the weights could differ (a child process applies the
    poster's first).
    """
    if job.get("torch", torch_settings()) != torch_settings():
        raise NotPortable(f"torch's global settings differ here ({torch_settings()}, not {job['torch']})")
    training = OwnTraining(_resolve(job["train"], "train"), _dataset(job["dataset"]),
                           _resolve(job["build"], "build"), None, _open_cache(job["cache"]),
                           device or job["device"], int(job["seed"]), tuple(job["sources"]), job["name"],
                           dict(job["config"]), job.get("part"))
    if training.key() != job["key"]:
        raise NotPortable("it keys differently in another process (its source or torch differs)")
    return training
