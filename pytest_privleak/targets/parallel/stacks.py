"""A built-in target's seed stack split over xdist workers: half trained here, half posted for an idle one.

Under ``-n N`` a test's seeds train on the worker that runs it, in lanes of
that worker's share of the cores (:mod:`..stacked.loop`); on 2 cores and
``-n 2`` that is one core, while the other worker may have run out of tests.
:func:`spread_stack` cuts the seeds the cache lacks in two stacks, posts both
on the job board (:mod:`.board`) and trains the first; a worker out of tests
claims the second (it runs ``train_targets`` with the same kind, dataset,
seeds and config, so it keys and trains the same models) and publishes it to
the cache. A model's weights do not depend on what it was stacked with, so
the figures are the ones one stack gives. Unclaimed, the poster trains the
second stack itself after the first (on the CPU two stacks cost about what
one stack of all the seeds costs: a stack's arithmetic grows with k).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .jobs import NotPortable, _cache_spec, _dataset, _dataset_spec, _open_cache, in_part, torch_settings

__all__ = ["StackTraining", "to_stack_job", "from_stack_job", "is_stack_job"]

#: Each stacked kind's config class, to key its models without training them.
CONFIGS = {"joint-bilstm-crf": "pytest_privleak.targets.joint_nlu:JointNLUConfig",
           "lstm-lm": "pytest_privleak.targets.lstm_lm:LSTMLMConfig",
           "ner-bilstm-crf": "pytest_privleak.targets.ner_tagger:NERTaggerConfig"}

#: Options of ``train_target`` that are not fields of a kind's config (not part of its cache key).
NOT_CONFIG = ("progress", "threads")


@dataclass(frozen=True)
class StackTraining:
    """``train_targets(kind, [(dataset, s) for s in seeds], device=..., cache=..., **config)``."""

    kind: str
    dataset: Any
    seeds: tuple[int, ...]
    cache: Any
    device: str = "cpu"
    config: dict[str, Any] = field(default_factory=dict)
    part: str | None = None

    def run(self) -> list:
        from .. import train_targets

        with in_part(self.part):
            return train_targets(self.kind, [(self.dataset, s) for s in self.seeds], device=self.device,
                                 cache=self.cache, **self.config)

    @cached_property
    def model_keys(self) -> list[str]:
        """The cache key of each seed's model, as ``train_target`` gives it (computed once)."""
        import importlib

        from ..training import cache_key, make_config

        module, _, name = CONFIGS[self.kind].partition(":")
        cfg = make_config(getattr(importlib.import_module(module), name),
                          {k: v for k, v in self.config.items() if k not in NOT_CONFIG}, kind=self.kind)
        return [cache_key(self.kind, self.dataset, cfg, s, self.device) for s in self.seeds]

    def key(self) -> str:
        from ...cache.targets import content_hash

        return "stack-" + content_hash({"kind": self.kind, "models": self.model_keys})

    def published(self, key: str) -> bool:
        """Whether the cache holds every seed's model (``key``, the stack's, names the job only)."""
        return all(self.cache.has(k) for k in self.model_keys)

    @property
    def label(self) -> str:
        return f"{self.kind} seeds {self.seeds[0]}..{self.seeds[-1]}"


def is_stack_job(job: dict[str, Any]) -> bool:
    return job.get("type") == "stack"


def to_stack_job(training: StackTraining) -> dict[str, Any]:
    """``training`` as JSON another worker runs (:func:`from_stack_job`); :class:`NotPortable` if it cannot."""
    if training.cache is None:
        raise NotPortable("no cache to hand the trained models back through")
    if training.kind not in CONFIGS:
        raise NotPortable(f"{training.kind} does not train as a stack")
    try:
        json.dumps(training.config)
        key = training.key()
    except (TypeError, ValueError) as exc:
        raise NotPortable(f"its config {sorted(training.config)} is not plain config data") from exc
    return {"type": "stack", "kind": training.kind, "dataset": _dataset_spec(training.dataset),
            "cache": _cache_spec(training.cache), "device": training.device, "seeds": list(training.seeds),
            "config": training.config, "key": key, "torch": torch_settings(), "part": training.part,
            "name": training.label}


def from_stack_job(job: dict[str, Any], device: str | None = None) -> StackTraining:
    """The stack ``job`` describes, on ``device`` if given; :class:`NotPortable` when it would key differently
    here (its config did not survive JSON, or torch's global settings differ)."""
    if job.get("torch") != torch_settings():
        raise NotPortable(f"torch's global settings differ here ({torch_settings()}, not {job.get('torch')})")
    training = StackTraining(job["kind"], _dataset(job["dataset"]), tuple(int(s) for s in job["seeds"]),
                             _open_cache(job["cache"]), device or job["device"], dict(job["config"]), job.get("part"))
    if training.key() != job["key"]:
        raise NotPortable("it keys differently in another process")
    return training
