"""Built-in target models, trained once per content hash and loaded from the cache after that.

``KINDS`` maps a kind name to ``"module:function"``; the module is imported
only when that kind is trained, so importing this package stays cheap. Every
trainer has the signature ``train(dataset, *, device, cache, seed, **config)``.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

KINDS: dict[str, str] = {
    "causal-lm": "pytest_privleak.targets.causal_lm:train",
    "joint-bilstm-crf": "pytest_privleak.targets.joint_nlu:train",
    "lstm-lm": "pytest_privleak.targets.lstm_lm:train",
    "ner-bilstm-crf": "pytest_privleak.targets.ner_tagger:train",
    "transformer-classifier": "pytest_privleak.targets.transformer_classifier:train",
}

__all__ = ["KINDS", "train_target"]


def _trainer(kind: str):
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}; fix: use one of "
                         "them, or train your own model with train_own_model(train, dataset, build=...)")
    module, _, function = KINDS[kind].partition(":")
    return getattr(import_module(module), function)


def train_target(kind: str, dataset, *, device: str = "cpu", cache=None, seed: int = 0, **config: Any):
    """Train the target ``kind`` on ``dataset`` (or load it from ``cache``, a ``TargetCache`` or None).

    ``config`` holds the kind's hyper-parameters (for ``joint-bilstm-crf`` the
    fields of :class:`~pytest_privleak.targets.joint_nlu.JointNLUConfig`);
    an unknown key raises ``TypeError`` listing the accepted ones.

    With a ``cache``, the target carries its content hash (the cache key:
    kind, data, config, seed, device type, code version) as
    ``privleak_content_hash``, so the attack-result cache
    (:mod:`pytest_privleak.cache.results`) can reuse its figures while its
    weights stay as trained; ``cache=None`` opts out of both caches.
    """
    target = _trainer(kind)(dataset, device=device, cache=cache, seed=seed, **config)
    if cache is not None:
        from ..cache.results import mark_content_hash

        mark_content_hash(target, target.content_hash)
    return target
