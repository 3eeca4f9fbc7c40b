"""Pieces every target shares: config checking, a seeded training loop, cache entries.

* :func:`make_config` turns keyword arguments into a frozen config dataclass,
  naming any unknown key and the accepted ones.
* :func:`fit` is a seeded mini-batch loop with Adam (or SGD with momentum and
  the learning-rate decay ``lr / (1 + decay * epoch)`` of the d-exposure
  paper's tagger), optional early stopping on the validation loss that
  restores the best weights (canary-extraction-nlu §6: patience 20 epochs),
  weight snapshots at named epochs, and one progress event per epoch
  (:mod:`pytest_privleak.progress.events`: a line on stderr outside pytest, live
  progress under it). Same seed, same data -> bitwise-identical weights on CPU.
* :func:`cached` trains once per content hash (kind, dataset, config, seed,
  device type, :data:`CODE_VERSION`) through :class:`~pytest_privleak.cache.targets.TargetCache`:
  weights as safetensors, everything else as JSON, never a pickle. An entry
  is loaded only when its files match the digests recorded when it was built,
  its record names its key, and its weights are finite; any other entry is
  never attacked (the cache discards and retrains it, with a warning).
* :func:`train_or_load` with ``checkpoints`` trains once and caches the
  weights at each named epoch too, each under the key of a training that
  stops at that epoch (the same weights: nothing in the loop depends on the
  total number of epochs), so a figure per epoch (d-exposure-discriminative
  Table 3, the curve of its §4.3) needs one training.
* ``fit(..., dp=DPConfig)`` trains with DP-SGD through Opacus
  (:mod:`pytest_privleak.targets.dp_sgd.opacus`): Poisson batches, per-sample
  clipping, calibrated Gaussian noise; the DP facts (epsilon spent) go into the
  history. A config's ``dp`` is part of its cache key only when set
  (:func:`key_config`), so the keys of non-DP targets are those they had before.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import math
import numbers
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from ..progress import events as progress
from ..cache.manifest import CacheEntryError
from .dp_sgd.opacus import DPConfig, PrivateTraining

#: Bump whenever a change to target or training code changes trained weights;
#: it is part of every cache key, so stale entries are never reused.
CODE_VERSION = 5  # 2: reserved canary tokens in the vocabulary, word dropout to <unk>, CE letters (issue 12);
#                  3: without word dropout the <unk> row is the mean of the rare words' rows (issue 21; NER tagger too, 27)
#                  4: that row is also set before each validation pass, so early stopping sees it (issue 21)
#                  5: the recurrent targets train as stacks of models with their own noise generators (issue 35)

WEIGHTS_FILE = "model.safetensors"
TARGET_FILE = "target.json"

logger = logging.getLogger("pytest_privleak.targets")
C = TypeVar("C")
T = TypeVar("T")


# --------------------------------------------------------------------------- config

def make_config(cls: type[C], overrides: dict[str, Any], *, kind: str) -> C:
    """``cls(**overrides)`` with a clear error for keys ``cls`` does not accept."""
    accepted = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:
        raise TypeError(f"train_target({kind!r}, ...) got unknown config key(s) {unknown}; "
                        f"accepted keys: {', '.join(accepted)}")
    return cls(**overrides)


def check_positive(name: str, value: Any, *, integer: bool, allow_zero: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless it is a positive number (an int when ``integer``)."""
    kinds = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value) and (
        value >= 0 if allow_zero else value > 0)
    if not ok:
        what = "an integer" if integer else "a number"
        raise ValueError(f"config {name}={value!r} must be {what} {'>= 0' if allow_zero else '> 0'}")


def check_training_config(config: Any, integers: Sequence[str], *, flags: Sequence[str] = ("early_stopping",),
                          dropout_hint: str = "") -> None:
    """The checks every target config shares: positive sizes, lr, grad_clip, dropout in [0, 1), bool flags."""
    for name in integers:
        check_positive(name, getattr(config, name), integer=True)
    check_positive("lr", config.lr, integer=False)
    check_positive("grad_clip", config.grad_clip, integer=False, allow_zero=True)
    dropout = config.dropout
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"config dropout={dropout!r} must be a number in [0, 1){dropout_hint}")
    for name in flags:
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"config {name}={getattr(config, name)!r} must be True or False")
    normalise_floats(config)


def normalise_floats(config: Any) -> None:
    """Store every number of a ``float`` field of the frozen dataclass ``config`` as a Python float.

    The cache key hashes ``repr`` of floats, so ``unk_alpha=0`` and ``0.0``, or
    ``lr=np.float64(5e-3)`` and ``5e-3``, would key (and train) the same model twice.
    """
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if item.type in ("float", float) and isinstance(value, numbers.Real) and not isinstance(value, bool):
            object.__setattr__(config, item.name, float(value))


# --------------------------------------------------------------------------- seeding

@contextlib.contextmanager
def seeded(seed: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the block with torch's global RNG seeded by ``seed``, restoring it afterwards.

    Weight initialisation and dropout draw from the global RNG; forking it keeps
    training reproducible without disturbing the caller's random state.
    """
    device = torch.device(device)
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Limit torch's intra-op CPU threads to ``count`` inside the block (``None``: leave as is).

    The CI-sized targets are bound by per-operation overhead, not arithmetic,
    and the count is fixed whatever ``-n`` is, even for a process running
    alone, because it changes the weights: measured (issue 11 item 6) on the
    2-core CI machine shared with other jobs (load average 3.8-4.5), one epoch
    of the default ``joint-bilstm-crf`` took 5.2 and 9.3 s with one thread,
    39.7 and 46.0 s with two, and the weights after one epoch differed
    between one and two threads (largest difference 2.9e-6; each count gave
    bitwise-identical weights twice). A count that followed the free cores
    would make a ``-n 2`` run's figures differ from a ``-n 0`` run's.
    """
    if count is None:
        yield
        return
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"threads={count!r} must be an integer >= 1 or None; fix: threads=1 (the same "
                         "weights on any core count), or None to leave torch's setting")
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- loop

@dataclass
class TrainingHistory:
    """Per-epoch losses and where training stopped (epochs count from 1)."""

    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    stopped_epoch: int = 0
    stopped_early: bool = False
    seconds: float = 0.0
    #: DP-SGD facts (config, noise multiplier, epsilon spent) of a DP training; None without DP.
    dp: dict | None = None

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        if data["dp"] is None:
            del data["dp"]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "TrainingHistory":
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name != "dp"}, dp=data.get("dp"))


class _Progress:
    """Progress of :func:`fit`: one event per epoch (epoch x/y, ETA) through :mod:`pytest_privleak.progress.events`.

    Without a progress sink each epoch is one line on stderr (pytest captures it
    unless ``-s``); under pytest the plugin shows it live instead. The ETA
    assumes every remaining epoch runs: with early stopping it is an upper bound.
    """

    def __init__(self, name: str, epochs: int, enabled: bool, early_stopping: bool = False) -> None:
        self.name, self.epochs, self.enabled, self.early_stopping = name, epochs, enabled, early_stopping
        self.start = time.perf_counter()

    def epoch(self, row: dict, best: bool) -> None:
        part = progress.current_part()   # "seed 3 of 7" when trained over seeds (targets.seeds)
        line = (f"[privleak] {self.name}{f' ({part})' if part else ''} epoch {row['epoch']}/{self.epochs} "
                f"train {row['train_loss']:.4f}"
                + (f" valid {row['valid_loss']:.4f}" if row["valid_loss"] is not None else "")
                + (" *" if best else "") + f" ({row['seconds']:.1f}s)")
        logger.info(line)
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            eta = elapsed / row["epoch"] * (self.epochs - row["epoch"])
            progress.emit(progress.EPOCH, self.name, done=row["epoch"], total=self.epochs, eta=eta,
                          eta_at_most=self.early_stopping or None, seconds=elapsed, line=line)


def fit(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    train_items: Sequence[Any],
    valid_items: Sequence[Any],
    collate: Callable[[Sequence[Any]], Any],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    early_stopping: bool = False,
    patience: int = 20,
    grad_clip: float | None = None,
    name: str = "target",
    progress: bool = True,
    eval_batch_size: int = 1024,
    on_epoch: Callable[[nn.Module, dict], None] | None = None,
    optimizer: str = "adam",
    momentum: float = 0.0,
    lr_decay: float = 0.0,
    dp: DPConfig | None = None,
) -> TrainingHistory:
    """Train ``model`` in place on per-example losses ``loss_fn(model, batch) -> [B]`` (their mean per batch).

    ``optimizer``: ``"adam"`` or ``"sgd"`` (with ``momentum``); epoch ``e``
    (from 1) trains at ``lr / (1 + lr_decay * e)``, Targer's schedule (the
    d-exposure paper's tagger, §4.1); ``lr_decay=0`` keeps ``lr``.

    Mini-batches are drawn from a ``torch.Generator`` seeded by ``seed``. The
    validation loss (mean per-example loss, evaluation mode) is recorded every
    epoch when ``valid_items`` is non-empty. With ``early_stopping`` training
    stops once it has not improved for ``patience`` epochs and the weights of
    the best epoch are restored (canary-extraction-nlu §6); without it the last
    weights are kept. ``on_epoch(model, row)`` is called after each epoch (model
    in evaluation mode), e.g. to measure memorisation as training goes.

    ``dp``: train with DP-SGD (:class:`~pytest_privleak.targets.dp_sgd.opacus.PrivateTraining`):
    each epoch is ``ceil(n / batch_size)`` Poisson batches, each utterance's
    gradient is clipped to ``dp.max_grad_norm`` and noise is added, which
    takes the place of ``grad_clip`` (not applied). The weights end in
    ``model`` as usual and ``history.dp`` holds the DP facts.
    """
    if early_stopping and not valid_items:
        raise ValueError("early_stopping=True needs a validation split; the dataset's valid split is empty")
    if not train_items:
        raise ValueError("cannot train on an empty training split")
    generator = torch.Generator().manual_seed(seed)
    private = None
    if dp is None:
        step = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad], lr=lr, momentum=momentum)
        trained = model
    else:
        private = PrivateTraining(model, lambda params: make_optimizer(optimizer, params, lr=lr, momentum=momentum),
                                  dp=dp, n=len(train_items), batch_size=batch_size, epochs=epochs, seed=seed, kind=name)
        step, trained = private.optimizer, private.module  # DPOptimizer: lr decay reaches the wrapped one
    valid_batches = [collate(valid_items[i:i + eval_batch_size])
                     for i in range(0, len(valid_items), eval_batch_size)]
    history = TrainingHistory()
    best_loss, best_state, stale = math.inf, None, 0
    report = _Progress(name, epochs, progress, early_stopping)
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        tick = time.perf_counter()
        for group in step.param_groups:
            group["lr"] = lr / (1.0 + lr_decay * epoch)
        trained.train()
        total, count = 0.0, 0
        for rows in _batch_rows(len(train_items), batch_size, generator, private):
            if not rows:  # an empty Poisson batch: DP-SGD still adds its noise and counts the step
                private.empty_step()
                continue
            batch = collate([train_items[j] for j in rows])
            losses = loss_fn(trained, batch)
            if private is not None:
                private.step(losses)
            else:
                step.zero_grad(set_to_none=True)
                losses.mean().backward()
                if grad_clip:
                    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                step.step()
            total += float(losses.detach().sum())
            count += losses.shape[0]
        valid_loss = _mean_loss(trained, loss_fn, valid_batches) if valid_batches else None
        row = {"epoch": epoch, "train_loss": total / max(count, 1), "valid_loss": valid_loss,
               "seconds": time.perf_counter() - tick}
        history.epochs.append(row)
        improved = valid_loss is not None and valid_loss < best_loss
        if improved:
            best_loss, stale, history.best_epoch = valid_loss, 0, epoch
            if early_stopping:
                best_state = copy.deepcopy(trained.state_dict())
        else:
            stale += 1
        report.epoch(row, improved)
        if on_epoch is not None:
            on_epoch(trained, row)
        history.stopped_epoch = epoch
        if early_stopping and stale >= patience:
            history.stopped_early = True
            break
    if early_stopping and best_state is not None:
        trained.load_state_dict(best_state)
    if private is not None:
        history.dp = private.finish(model)
    if not valid_batches:
        history.best_epoch = history.stopped_epoch
    model.eval()
    history.seconds = time.perf_counter() - start
    return history


def _batch_rows(n: int, batch_size: int, generator: torch.Generator, private: PrivateTraining | None):
    """One epoch's batches as lists of row indices: a seeded shuffle cut in ``batch_size`` chunks, or with DP
    the Poisson batches of ``private`` (each row in with probability ``q``; a batch may be empty)."""
    if private is not None:
        yield from (rows.tolist() for rows in private.batches())
        return
    order = torch.randperm(n, generator=generator).tolist()
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


OPTIMIZERS = ("adam", "sgd")


def make_optimizer(name: str, parameters: list, *, lr: float, momentum: float = 0.0) -> torch.optim.Optimizer:
    """Adam, or SGD with ``momentum`` (Targer's default for the d-exposure tagger: lr 0.01, momentum 0.9)."""
    if name == "adam":
        return torch.optim.Adam(parameters, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=lr, momentum=momentum)
    raise ValueError(f"optimizer={name!r} is not one of {OPTIMIZERS}; fix: optimizer='sgd' (the d-exposure "
                     "paper's tagger) or 'adam'")


@torch.no_grad()
def _mean_loss(model: nn.Module, loss_fn, batches: list) -> float:
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        losses = loss_fn(model, batch)
        total += float(losses.sum())
        count += losses.shape[0]
    return total / count


# --------------------------------------------------------------------------- cache

class CorruptEntryError(CacheEntryError):
    """A cache entry exists but cannot be loaded: a missing or damaged file, a record for another key, or
    weights that are NaN or infinite. The cache discards it and retrains (or raises, per ``on_mismatch``)."""


def cache_key(kind: str, dataset, config, seed: int, device: str) -> str:
    """Content hash of everything that determines the trained weights.

    The device *type* is part of it (CPU and CUDA kernels differ in the last
    bits); the GPU index is not, so xdist workers on different GPUs share entries.
    """
    from ..cache.targets import content_hash

    return content_hash({"kind": kind, "dataset": dataset.content_hash(), "config": key_config(config), "seed": seed,
                         "device_type": torch.device(device).type, "code_version": CODE_VERSION})


def key_config(config: Any) -> Any:
    """What of ``config`` goes into a cache key: every field, but ``dp`` only when set.

    A DP model and a non-DP model are cached apart (``dp`` is in the key),
    while a non-DP config hashes exactly as it did before ``dp`` existed (the
    canonical form of a dataclass is the dict of its fields), so existing
    non-DP cache entries stay valid.
    """
    if not dataclasses.is_dataclass(config) or getattr(config, "dp", None) is not None:
        return config
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "dp"}


def save_entry(folder: Path, state_dict: dict[str, torch.Tensor], record: dict) -> None:
    """Write ``model.safetensors`` (weights) and ``target.json`` (everything needed to rebuild).

    Refuses weights holding NaN or inf (:class:`~pytest_privleak.finite.NonFiniteError`):
    a diverged training must fail where it happened, not be cached and attacked.
    """
    from safetensors.torch import save_file

    from ..finite import require_finite

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state_dict.items()}
    for name, tensor in tensors.items():
        require_finite(tensor, what=f"the trained weights {name!r} of {record.get('kind', 'the target')} "
                                    f"{str(record.get('content_hash', ''))[:12]}",
                       fix="training diverged; lower lr, set grad_clip, or check the data for extreme values")
    save_file(tensors, str(folder / WEIGHTS_FILE))
    (folder / TARGET_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")


def save_target(folder: Path, kind: str, target, history: "TrainingHistory", *, facts: dict | None = None,
                **meta) -> dict:
    """Save a trained target (``net``, ``vocab``, ``config``, ``seed``, ``content_hash``) as a cache entry.

    ``facts``: JSON-safe figures measured at training time (e.g. the tagger's
    entity F1), stored in the record under ``"facts"``. Returns the entry's
    metadata: kind, seed, config, plus ``meta``.
    """
    record = {"kind": kind, "code_version": CODE_VERSION, "seed": target.seed,
              "content_hash": target.content_hash, "config": target.config.to_json(),
              "vocab": target.vocab.to_json(), "history": history.to_json()}
    if facts is not None:
        record["facts"] = facts
    save_entry(folder, target.net.state_dict(), record)
    return {"kind": kind, "seed": target.seed, "config": target.config.to_json(), **meta}


def load_entry(folder: Path, device: str) -> tuple[dict[str, torch.Tensor], dict]:
    """Read an entry written by :func:`save_entry`; :class:`CorruptEntryError` if it cannot be trusted.

    The cache has already checked every file's sha256 against the manifest
    (:mod:`pytest_privleak.cache.manifest`); this checks what the files say:
    the record is for this entry's key (the folder name) and code version,
    and no weight is NaN or infinite.
    """
    from safetensors.torch import load_file

    from ..finite import NonFiniteError, require_finite

    try:
        record = json.loads((folder / TARGET_FILE).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / WEIGHTS_FILE), device=str(torch.device(device)))
    except Exception as exc:  # missing file, bad JSON, truncated safetensors header ...
        raise CorruptEntryError(f"cache entry {folder} is unreadable: {exc}") from exc
    if not isinstance(record, dict):
        raise CorruptEntryError(f"cache entry {folder}: {TARGET_FILE} holds a {type(record).__name__}, not an object")
    if record.get("content_hash") != folder.name:
        raise CorruptEntryError(f"cache entry {folder}: {TARGET_FILE} records content hash "
                                f"{record.get('content_hash')!r}, not the entry's key {folder.name!r}")
    if record.get("code_version") != CODE_VERSION:
        raise CorruptEntryError(f"cache entry {folder}: {TARGET_FILE} records code version "
                                f"{record.get('code_version')!r}, not {CODE_VERSION}")
    try:
        for name, tensor in tensors.items():
            require_finite(tensor, what=f"cache entry {folder}: weight {name!r}",
                           fix="the entry was damaged or edited after it was written; it is discarded and retrained")
    except NonFiniteError as exc:
        raise CorruptEntryError(str(exc)) from exc
    return tensors, record


def cached(cache, key: str, build: Callable[[], T], save: Callable[[T, Path], dict],
           load: Callable[[Path], T], *, name: str | None = None, progress_events: bool = True) -> tuple[T, bool]:
    """``cache.get_or_build``, or just ``build()`` when ``cache`` is None.

    The cache verifies an entry before ``load`` runs and treats a
    :class:`CorruptEntryError` from ``load`` like a digest mismatch: the entry
    is never used; it is discarded with a warning and retrained (or an error is
    raised, per ``TargetCache(on_mismatch=...)``).

    With ``progress_events`` the start and end of a training and a load from the
    cache are reported (:mod:`pytest_privleak.progress.events`) as the target ``name``
    (default: the key's first 8 characters), which is also the target of any
    lock wait on the way.
    """
    label = name or key[:8]

    def timed_build() -> T:
        if not progress_events:
            return build()
        progress.emit(progress.START, label)
        start = time.perf_counter()
        try:
            obj = build()
        except BaseException:
            progress.emit(progress.DONE, label, source=progress.FAILED, seconds=time.perf_counter() - start)
            raise
        progress.emit(progress.DONE, label, source=progress.TRAINED, seconds=time.perf_counter() - start)
        return obj

    with progress.target(label):
        if cache is None:
            return timed_build(), False
        obj, loaded = cache.get_or_build(key, timed_build, save, load)
    if loaded and progress_events:
        progress.emit(progress.DONE, label, source=progress.LOADED)
    return obj, loaded


def train_or_load(kind: str, config_cls: type, config: dict, dataset, *, device: str, cache, seed: int,
                  build: Callable[..., Any], save: Callable[..., dict], load: Callable[..., Any],
                  progress: bool = True) -> Any:
    """The shared ``train`` of every target: validate the config, key it, then load or build and cache.

    ``build(cfg, torch_device, key)`` trains a fresh target; ``load(folder, torch_device)`` rebuilds one.
    ``progress``: report the training's start and end, or the load from the cache, as ``"<kind> <key[:8]>"``.
    """
    cfg = make_config(config_cls, config, kind=kind)
    torch_device = torch.device(device)
    key = cache_key(kind, dataset, cfg, seed, str(torch_device))
    target, _ = cached(cache, key, build=lambda: build(cfg, torch_device, key), save=save,
                       load=lambda folder: load(folder, torch_device), name=f"{kind} {key[:8]}",
                       progress_events=progress)
    return target



def cached_many(cache, keys: Sequence[str], build_missing: Callable[[list[str]], list[T]],
                save: Callable[[T, Path], dict], load: Callable[[Path], T], *, names: Sequence[str],
                progress_events: bool = True) -> list[T]:
    """The objects of ``keys`` (distinct), loaded from ``cache`` or built together by one ``build_missing`` call.

    Each key goes through :func:`cached` (the cache's verification, lock and
    atomic publish, progress events), in sorted order: an entry present is
    loaded and its lock released; for an absent one the lock is kept while
    the next keys are visited, and once all are visited
    ``build_missing(absent keys)`` trains them at once (a stack of models),
    after which each is published under its own key as its lock is released.
    Locks are taken in sorted key order, so two processes asking for
    overlapping sets never wait on each other in a cycle, and a process that
    needs a key another is training waits for it and loads it.
    """
    if len(set(keys)) != len(keys):
        raise ValueError("cached_many needs distinct keys")
    label = dict(zip(keys, names))
    ordered = sorted(keys)
    results: dict[str, T] = {}
    pending: list[str] = []

    def visit(i: int) -> None:
        if i == len(ordered):
            if pending:
                results.update(zip(pending, build_missing(list(pending))))
            return
        key = ordered[i]
        descended = False

        def build() -> T:
            nonlocal descended
            descended = True
            pending.append(key)
            visit(i + 1)
            return results[key]

        obj, _ = cached(cache, key, build=build, save=save, load=load, name=label[key],
                        progress_events=progress_events)
        results[key] = obj
        if not descended:
            visit(i + 1)

    visit(0)   # without a cache, cached() builds: the first key's build trains them all
    return [results[key] for key in keys]


def train_or_load_many(kind: str, config_cls: type, config: dict, runs: Sequence[tuple[Any, int]], *, device: str,
                       cache, build_many: Callable[..., list[Any]], save: Callable[..., dict],
                       load: Callable[..., Any], progress: bool = True) -> list[Any]:
    """:func:`train_or_load` for several ``(dataset, seed)`` runs of one config: those missing train together.

    ``build_many(cfg, torch_device, [(dataset, seed, key), ...])`` trains
    fresh targets (one stack); each is cached under its own key, exactly the
    key :func:`train_or_load` gives it, so a target trained here is the one a
    single ``train_target`` call loads, and the reverse. Runs repeating a
    ``(dataset, seed)`` share one target.
    """
    cfg = make_config(config_cls, config, kind=kind)
    torch_device = torch.device(device)
    keys = [cache_key(kind, dataset, cfg, seed, str(torch_device)) for dataset, seed in runs]
    run_of = {}
    for key, (dataset, seed) in zip(keys, runs):
        run_of.setdefault(key, (dataset, seed, key))
    distinct = list(run_of)
    targets = cached_many(cache, distinct, lambda missing: build_many(cfg, torch_device, [run_of[k] for k in missing]),
                          save=save, load=lambda folder: load(folder, torch_device),
                          names=[f"{kind} {key[:8]}" for key in distinct], progress_events=progress)
    by_key = dict(zip(distinct, targets))
    return [by_key[key] for key in keys]


def checkpoint_epochs(checkpoints: Any, config: Any, *, kind: str) -> tuple[int, ...]:
    """The named epochs, checked: integers in ``[1, config.epochs]``, and a training without early stopping.

    A checkpoint is cached as the training that stops at that epoch, which
    holds only when nothing restores earlier weights at the end.
    """
    if isinstance(checkpoints, (str, bytes)) or not hasattr(checkpoints, "__iter__"):
        raise TypeError(f"checkpoints={checkpoints!r} must be a list of epochs; fix: e.g. checkpoints=[25, 50]")
    epochs = tuple(checkpoints)
    bad = [e for e in epochs if not isinstance(e, int) or isinstance(e, bool) or not 1 <= e <= config.epochs]
    if bad:
        raise ValueError(f"checkpoints {bad} of train_target({kind!r}, ...) are not epochs of this training "
                         f"(1 .. epochs={config.epochs}); fix: name epochs between 1 and {config.epochs}, or "
                         "raise epochs")
    if getattr(config, "early_stopping", False):
        raise ValueError(f"checkpoints need early_stopping=False (train_target({kind!r}, ...)): early stopping "
                         "restores the best weights at the end, so the weights at an epoch would not be those of "
                         "a training stopped there; fix: early_stopping=False")
    return tuple(sorted(set(epochs)))


def train_or_load_epochs(kind: str, config_cls: type, config: dict, dataset, *, device: str, cache, seed: int,
                         checkpoints: Sequence[int], build_epochs: Callable[..., dict[int, Any]],
                         save: Callable[..., dict], load: Callable[..., Any], progress: bool = True) -> dict[int, Any]:
    """``{epoch: target}`` for each of ``checkpoints`` and the final epoch, from one training.

    Each epoch's target is the cache entry of the same training with
    ``epochs`` set to that epoch (its own content hash), so it is shared with
    a plain ``train_target(..., epochs=e)``. Entries already cached are
    loaded; the first missing one runs ``build_epochs(cfg, torch_device,
    {epoch: key})``, which trains once to ``cfg.epochs`` and returns every
    epoch's target, and the rest are published from that training.
    """
    cfg = make_config(config_cls, config, kind=kind)
    epochs = checkpoint_epochs(checkpoints, cfg, kind=kind)
    torch_device = torch.device(device)
    keys = {e: cache_key(kind, dataset, dataclasses.replace(cfg, epochs=e), seed, str(torch_device))
            for e in (*epochs, cfg.epochs)}
    built: dict[int, Any] = {}

    def one(epoch: int) -> Any:
        if not built:
            built.update(build_epochs(cfg, torch_device, keys))
        return built[epoch]

    out = {}
    for epoch, key in sorted(keys.items()):
        out[epoch], _ = cached(cache, key, build=lambda epoch=epoch: one(epoch), save=save,
                               load=lambda folder: load(folder, torch_device), name=f"{kind} {key[:8]}",
                               progress_events=progress)
    return out


def history_until(history: TrainingHistory, epoch: int) -> TrainingHistory:
    """The history of the same training stopped after ``epoch`` (no early stopping)."""
    rows = [dict(r) for r in history.epochs[:epoch]]
    losses = [(r["valid_loss"], r["epoch"]) for r in rows if r["valid_loss"] is not None]
    best = min(losses, key=lambda x: x[0])[1] if losses else epoch
    return TrainingHistory(epochs=rows, best_epoch=best, stopped_epoch=epoch, stopped_early=False,
                           seconds=sum(r["seconds"] for r in rows))
