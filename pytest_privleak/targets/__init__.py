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

#: Kinds whose seeds (and reference models) train together, as one stacked training (:mod:`.stacked`):
#: ``train_many(runs, *, device, cache, **config)`` with ``runs`` a list of ``(dataset, seed)``.
STACKED: dict[str, str] = {
    "joint-bilstm-crf": "pytest_privleak.targets.joint_nlu:train_many",
    "lstm-lm": "pytest_privleak.targets.lstm_lm:train_many",
    "ner-bilstm-crf": "pytest_privleak.targets.ner_tagger:train_many",
}

__all__ = ["KINDS", "STACKED", "train_target", "train_targets"]


def _trainer(kind: str):
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}; fix: use one of "
                         "them, or train your own model with train_own_model(train, dataset, build=...)")
    module, _, function = KINDS[kind].partition(":")
    return getattr(import_module(module), function)


def _mark(target, cache):
    if cache is not None:
        from ..cache.results import mark_content_hash

        mark_content_hash(target, target.content_hash)
    return target


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
    return _mark(_trainer(kind)(dataset, device=device, cache=cache, seed=seed, **config), cache)


def _check_runs(runs) -> list[tuple[Any, int]]:
    """``runs`` as a list of ``(dataset, seed)`` pairs, else ``ValueError`` naming the entry and the fix."""
    fix = "fix: runs=[(dataset, 0), (dataset, 1)], a list of (dataset, integer training seed) pairs"
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise ValueError(f"runs={runs!r} must be a list of (dataset, seed) pairs; {fix}")
    out = []
    for index, run in enumerate(runs):
        if not isinstance(run, tuple) or len(run) != 2:
            raise ValueError(f"runs[{index}]={run!r} is not a (dataset, seed) pair; {fix}")
        dataset, seed = run
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"runs[{index}] has seed={seed!r}; a training seed is an integer; {fix}")
        if not callable(getattr(dataset, "replace", None)) or not hasattr(dataset, "train"):
            raise ValueError(f"runs[{index}] has a {type(dataset).__name__} where a dataset (NLUDataset) belongs; "
                             f"{fix}")
        out.append((dataset, seed))
    return out


def train_targets(kind: str, runs, *, device: str = "cpu", cache=None, **config: Any) -> list:
    """``[train_target(kind, dataset, seed=seed, ...) for dataset, seed in runs]``, trained together.

    For the kinds of :data:`STACKED` the runs not in ``cache`` train as one
    stacked training (their parameters on a model axis, one forward and
    backward for all; :mod:`pytest_privleak.targets.stacked`), each cached
    under the key ``train_target`` gives it; a model's weights are the same
    whichever runs it trained with. Other kinds train one run at a time.
    """
    _trainer(kind)
    runs = _check_runs(runs)
    if kind not in STACKED:
        return [train_target(kind, dataset, device=device, cache=cache, seed=seed, **config) for dataset, seed in runs]
    module, _, function = STACKED[kind].partition(":")
    trained = getattr(import_module(module), function)(runs, device=device, cache=cache, **config)
    return [_mark(target, cache) for target in trained]
