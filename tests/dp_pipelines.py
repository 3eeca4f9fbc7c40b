"""DP-SGD training pipelines for the DP audit's tests and bench: one correct, the rest deliberately broken.

A tiny intent classifier (hashed token embeddings summed, then a linear
layer) trained with Opacus: Poisson sampling, per-sample clipping, noise from
the RDP accountant for the claimed (ε, δ). Tokens are hashed into a fixed
number of buckets, so the model's shape never depends on the (private)
training data: a vocabulary built from the data would itself leak which
canaries went in.

``train(dataset, seed=..., epsilon=..., delta=..., bug=...)`` follows the
``train_own_model`` contract and the white-box audit hook protocol of
:mod:`pytest_privleak.dp.gradient_canaries` (``audit_hook(optimizer,
sample_rate=q)`` once the DP optimizer exists). ``bug`` picks one of the
seeded bugs (:data:`BUGS`), each what a DP-SGD user actually gets wrong:

- ``noise-off``: noise multiplier 0, the ε claimed all the same;
- ``noise-div10``: a tenth of the accountant's noise multiplier;
- ``clip-off``: per-sample gradients summed unclipped (noise still σ·C);
- ``per-batch-clip``: the batch's mean gradient clipped to C instead of each
  sample's, noise σ·C / B on the mean (``clip_grad_norm_`` on the batch);
- ``rate-misreported``: the accountant is told a sampling rate 10× smaller
  than the loader's;
- ``weighted-sampler``: a class-balancing ``WeightedRandomSampler`` kept (no
  Poisson sampling; ``class_weights`` fixed in the config from the data's
  intent counts), the accountant told ``1 / len(loader)`` (opacus 813, 600):
  rare-class records are drawn far more often than the accountant knows,
  some twice in a batch;
- ``fixed-batches``: shuffled fixed-size batches where the accountant assumes
  Poisson sampling (opacus 80);
- ``loss-normalisation``: the noisy sum divided by the batch's actual size, a
  data-dependent normaliser the accountant does not model (opacus 819, 571).
"""
from __future__ import annotations

import functools
import zlib

import torch
from torch import nn

from pytest_privleak.data.types import NLUDataset

BUCKETS = 4096
DIM = 8
MAX_TOKENS = 12
BUGS = ("none", "noise-off", "noise-div10", "clip-off", "per-batch-clip", "rate-misreported", "weighted-sampler",
        "fixed-batches", "loss-normalisation")


def bucket(token: str) -> int:
    """Stable hash of a token into 1 .. BUCKETS - 1 (0 is padding)."""
    return 1 + zlib.crc32(token.encode("utf-8")) % (BUCKETS - 1)


def encode(utterances, intents) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token buckets ``[N, MAX_TOKENS]`` (0-padded), mask, and intent indices."""
    index = {intent: i for i, intent in enumerate(intents)}
    ids = torch.zeros(len(utterances), MAX_TOKENS, dtype=torch.long)
    for row, u in enumerate(utterances):
        tokens = [bucket(t) for t in u.tokens[:MAX_TOKENS]]
        ids[row, :len(tokens)] = torch.tensor(tokens)
    labels = torch.tensor([index[u.intent] for u in utterances], dtype=torch.long)
    return ids, (ids > 0).float(), labels


class HashedBagClassifier(nn.Module):
    """Sum of hashed token embeddings, then a linear layer over the intents."""

    def __init__(self, intents) -> None:
        super().__init__()
        self.intents = tuple(intents)
        n_intents = len(self.intents)
        self.embedding = nn.Embedding(BUCKETS, DIM)
        nn.init.normal_(self.embedding.weight, std=0.01)  # small: an unseen token reads as (almost) nothing
        self.output = nn.Linear(DIM, n_intents)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output((self.embedding(ids) * mask.unsqueeze(-1)).sum(1))


def build(dataset: NLUDataset) -> HashedBagClassifier:
    return HashedBagClassifier(dataset.intents)


class Scorer:
    """SequenceScorer: the training loss (cross-entropy of the utterance's own intent); lower = more likely."""

    def __init__(self, module: HashedBagClassifier) -> None:
        self.module = module
        self.intents = module.intents

    def score(self, utterances) -> "object":
        ids, mask, labels = encode(list(utterances), self.intents)
        with torch.no_grad():
            logits = self.module(ids, mask)
        return nn.functional.cross_entropy(logits, labels, reduction="none").numpy()


def imbalanced(dataset: NLUDataset, rare_share: float = 0.05) -> NLUDataset:
    """``dataset`` with its first intent kept at ``rare_share`` of its training utterances (for the sampler bug)."""
    rare = dataset.intents[0]
    kept, seen = [], 0
    for u in dataset.train:
        if u.intent == rare:
            seen += 1
            if seen % round(1 / rare_share):
                continue
        kept.append(u)
    return dataset.with_train(kept, name=f"{dataset.name} rare {rare}")


@functools.lru_cache(maxsize=None)
def class_weights(dataset: NLUDataset) -> dict[str, float]:
    """Class-balancing sampling weights (1 / training count per intent), fixed in the config before auditing."""
    counts = {intent: 0 for intent in dataset.intents}
    for u in dataset.train:
        counts[u.intent] += 1
    return {intent: 1.0 / max(count, 1) for intent, count in counts.items()}


@functools.lru_cache(maxsize=None)
def _noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate,
                                      steps=steps, accountant="rdp"))


def _broken_optimizer(optimizer, bug: str, expected_batch_size: int):
    """Swap the DPOptimizer's clipping / scaling for the bug's (a subclass chosen at run time)."""
    from opacus.optimizers import DPOptimizer
    from opacus.optimizers.optimizer import _mark_as_processed

    if bug == "clip-off":
        def clip_and_accumulate(self):
            for p in self.params:
                grad = self._get_flat_grad_sample(p).sum(0)
                p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad
                _mark_as_processed(p.grad_sample)
    elif bug == "per-batch-clip":
        def clip_and_accumulate(self):
            grads = [self._get_flat_grad_sample(p).sum(0) for p in self.params]
            norm = torch.sqrt(sum((g / expected_batch_size).pow(2).sum() for g in grads))
            factor = min(1.0, self.max_grad_norm / (float(norm) + 1e-6))
            for p, g in zip(self.params, grads):
                p.summed_grad = g * factor
                _mark_as_processed(p.grad_sample)
        # noise stays sigma*C on the sum (sigma*C/B on the mean), as the accountant assumed for per-sample clipping
    elif bug == "loss-normalisation":
        def scale_grad(self):
            actual = max(1, self._actual_batch_size)
            for p in self.params:
                p.grad /= actual
    else:
        return optimizer
    methods = {k: v for k, v in locals().items() if k in ("clip_and_accumulate", "scale_grad")}
    optimizer.__class__ = type(f"Broken{bug.title().replace('-', '')}", (DPOptimizer,), methods)
    return optimizer


def train(dataset: NLUDataset, seed: int, epsilon: float = 2.0, delta: float = 1e-5, bug: str = "none",
          epochs: int = 4, batch_size: int = 64, lr: float = 8.0, max_grad_norm: float = 1.0,
          class_weights: dict | None = None, audit_hook=None) -> HashedBagClassifier:
    """Train the classifier with (possibly broken) DP-SGD claiming (``epsilon``, ``delta``); see the module doc."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

    if bug not in BUGS:
        raise ValueError(f"bug must be one of {BUGS}, got {bug!r}")
    torch.manual_seed(seed)
    ids, mask, labels = encode(dataset.train, dataset.intents)
    n = len(labels)
    data = TensorDataset(ids, mask, labels)
    model = build(dataset)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    sample_rate = batch_size / n
    steps = max(1, round(epochs / sample_rate))
    told_rate = sample_rate / 10 if bug == "rate-misreported" else sample_rate
    sigma = _noise_multiplier(epsilon, delta, told_rate, steps)
    sigma = 0.0 if bug == "noise-off" else sigma / 10 if bug == "noise-div10" else sigma
    poisson = bug not in ("weighted-sampler", "fixed-batches")
    if bug == "weighted-sampler":
        if class_weights is None:
            raise ValueError("bug='weighted-sampler' needs class_weights= (intent -> weight)")
        weight = torch.tensor([float(class_weights[intent]) for intent in dataset.intents])
        sampler = WeightedRandomSampler(weight[labels], num_samples=n, replacement=True)
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    else:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=not poisson)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=sigma, max_grad_norm=max_grad_norm,
                                                   poisson_sampling=poisson)
    optimizer = _broken_optimizer(optimizer, bug, batch_size)
    if audit_hook is not None:
        audit_hook(optimizer, sample_rate=sample_rate)
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    while done < steps:
        for x, m, y in loader:
            optimizer.zero_grad()
            optimizer._actual_batch_size = len(y)
            loss_fn(model(x, m), y).backward()
            optimizer.step()
            done += 1
            if done >= steps:
                break
    return model._module


def train_ignoring_seed(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """A broken train function for the bad-input tests: it reseeds with a constant, whatever ``seed`` says."""
    return train(dataset, seed=0, **config)


def train_nan(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """A broken train function for the bad-input tests: its weights come back NaN (a diverged run)."""
    model = train(dataset, seed=seed, **config)
    with torch.no_grad():
        model.output.weight.fill_(float("nan"))
    return model


# --- train functions the audit must refuse rather than pass (tests/test_dp_audit_silent_passes.py) ---------------

def train_forgetting_hook(dataset: NLUDataset, seed: int, audit_hook=None, **config) -> HashedBagClassifier:
    """Takes ``audit_hook`` but never calls it (a forgotten branch): white-box scores would be initial weights."""
    return train(dataset, seed=seed, **config)


class BypassingDPOptimizer:
    """Mixin for a DPOptimizer whose step clips and accumulates without calling ``clip_and_accumulate`` through
    the instance (as Opacus ghost clipping's step does), so a hook that wraps that method never runs."""

    def pre_step(self, closure=None):
        type(self).clip_and_accumulate(self)
        if self._check_skip_next_step():
            self._is_last_step_skipped = True
            return False
        self.add_noise()
        self.scale_grad()
        self._is_last_step_skipped = False
        return True


def train_bypassing_hook(dataset: NLUDataset, seed: int, audit_hook=None, **config) -> HashedBagClassifier:
    """Calls ``audit_hook`` correctly, but its optimizer's step bypasses the wrapped ``clip_and_accumulate``."""
    from opacus.optimizers import DPOptimizer

    def bypassing(optimizer, sample_rate):
        audit_hook(optimizer, sample_rate=sample_rate)
        optimizer.__class__ = type("BypassingDP", (BypassingDPOptimizer, DPOptimizer), {})

    return train(dataset, seed=seed, audit_hook=None if audit_hook is None else bypassing, **config)


def train_ghost_clipping(dataset: NLUDataset, seed: int, epochs: int = 4, batch_size: int = 64, lr: float = 8.0,
                         noise_multiplier: float = 0.0, audit_hook=None) -> HashedBagClassifier:
    """Opacus ghost clipping (``grad_sample_mode="ghost"``), noise off; calls ``audit_hook`` as the protocol says."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    ids, mask, labels = encode(dataset.train, dataset.intents)
    model = build(dataset)
    loader = DataLoader(TensorDataset(ids, mask, labels), batch_size=batch_size, shuffle=True)
    model, optimizer, criterion, loader = PrivacyEngine(accountant="rdp").make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=lr), data_loader=loader,
        criterion=nn.CrossEntropyLoss(), noise_multiplier=noise_multiplier, max_grad_norm=1.0,
        poisson_sampling=True, grad_sample_mode="ghost")
    if audit_hook is not None:
        audit_hook(optimizer, sample_rate=batch_size / len(labels))
    for x, m, y in loader:
        optimizer.zero_grad()
        criterion(model(x, m), y).backward()
        optimizer.step()
    return model._module


@functools.lru_cache(maxsize=None)
def _data_on_disk() -> NLUDataset:
    from pytest_privleak.data.synthetic import generate_snips_like

    return generate_snips_like(n_train=300, n_valid=0, n_test=0)


def train_own_data(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """Trains on its own copy of the data (a loader reading from disk), never on the dataset it is given."""
    return train(_data_on_disk(), seed=seed, **config)


def train_logging_then_own_data(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """Reads one record of the dataset it is given (a log line), then trains on its own copy of the data."""
    print(f"first record: {dataset.train[0]}")
    return train(_data_on_disk(), seed=seed, **config)


def train_capped(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """Trains on the first 300 records of the split only: the audit's canaries, appended after them, are cut."""
    return train(NLUDataset(tuple(dataset.train[:300]), (), (), name=dataset.name), seed=seed, **config)


def train_virtual_steps(dataset: NLUDataset, seed: int, epsilon: float = 2.0, delta: float = 1e-5, epochs: int = 4,
                        batch_size: int = 64, lr: float = 8.0, max_grad_norm: float = 1.0, physical: int = 8,
                        audit_hook=None) -> HashedBagClassifier:
    """A correct pipeline as Opacus's tutorials write it for large batches: BatchMemoryManager splits each Poisson
    batch into physical batches of at most ``physical``, with one noisy step per logical batch."""
    from opacus import PrivacyEngine
    from opacus.utils.batch_memory_manager import BatchMemoryManager
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    ids, mask, labels = encode(dataset.train, dataset.intents)
    model = build(dataset)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    sample_rate = batch_size / len(labels)
    steps = max(1, round(epochs / sample_rate))
    loader = DataLoader(TensorDataset(ids, mask, labels), batch_size=batch_size, shuffle=True)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=max_grad_norm, poisson_sampling=True,
        noise_multiplier=_noise_multiplier(epsilon, delta, sample_rate, steps))
    if audit_hook is not None:
        audit_hook(optimizer, sample_rate=sample_rate)
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    while done < steps:
        with BatchMemoryManager(data_loader=loader, max_physical_batch_size=physical, optimizer=optimizer) as batches:
            for x, m, y in batches:
                optimizer.zero_grad()
                loss_fn(model(x, m), y).backward()
                optimizer.step()
                done += not optimizer._is_last_step_skipped
                if done >= steps:
                    break
    return model._module


def train_reading_unseen(dataset: NLUDataset, seed: int, **config) -> HashedBagClassifier:
    """Trains on the dataset it is given, but reads its records in a way the audit's read check cannot see
    (``tuple.__getitem__``, as code in another process would): the audit must fall back to comparing weights."""
    split = dataset.train
    records = [tuple.__getitem__(split, i) for i in range(len(split))]
    return train(NLUDataset(tuple(records), (), (), name=dataset.name), seed=seed, **config)


def train_calling_hook_twice(dataset: NLUDataset, seed: int, audit_hook=None, **config) -> HashedBagClassifier:
    """Calls ``audit_hook`` twice on the same optimizer: every canary would go in twice as often as sampled."""
    def twice(optimizer, sample_rate):
        audit_hook(optimizer, sample_rate=sample_rate)
        audit_hook(optimizer, sample_rate=sample_rate)

    return train(dataset, seed=seed, audit_hook=None if audit_hook is None else twice, **config)
