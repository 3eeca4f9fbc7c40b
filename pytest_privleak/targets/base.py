"""What every built-in target shares: a frozen network and the facts of how it was trained.

A target is attacked, never trained further, so its network stays in evaluation
mode with gradients off for its weights (the attacks take gradients with
respect to inputs only). :meth:`TrainedTarget.describe` gives the JSON-safe
facts a ``LeakResult.target`` records.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .training import TrainingHistory


class TrainedTarget:
    """Base of the built-in targets: ``net`` (frozen, eval mode), ``vocab``, ``config`` and training facts."""

    kind = ""
    #: Parameter of ``net`` whose device is the target's device.
    device_parameter = "embedding.weight"
    #: Epoch facts (properties below) added to :meth:`describe` and to ``repr``.
    described_epochs: tuple[str, ...] = ("stopped_epoch",)
    repr_epochs: tuple[str, ...] = ()

    def __init__(self, net: nn.Module, vocab: Any, config: Any, *, seed: int, history: TrainingHistory,
                 content_hash: str, loaded_from_cache: bool = False) -> None:
        self.net = net.eval()
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.vocab = vocab
        self.config = config
        self.seed = seed
        self.training_history = history
        self.content_hash = content_hash
        self.loaded_from_cache = loaded_from_cache

    @property
    def device(self) -> torch.device:
        return self.net.get_parameter(self.device_parameter).device

    @property
    def best_epoch(self) -> int:
        return self.training_history.best_epoch

    @property
    def stopped_epoch(self) -> int:
        return self.training_history.stopped_epoch

    @property
    def stopped_early(self) -> bool:
        return self.training_history.stopped_early

    def describe(self) -> dict:
        """JSON-safe facts for a ``LeakResult.target``."""
        return {"kind": self.kind, "content_hash": self.content_hash, "device": str(self.device),
                "seed": self.seed, "config": self.config.to_json(), "loaded_from_cache": self.loaded_from_cache,
                **{name: getattr(self, name) for name in self.described_epochs}}

    def __repr__(self) -> str:
        epochs = "".join(f"{name}={getattr(self, name)}, " for name in self.repr_epochs)
        return (f"{type(self).__name__}({self.content_hash[:12]}, device={self.device}, "
                f"{epochs}cached={self.loaded_from_cache})")
