"""DP-SGD loops written apart from tests/dp_pipelines.py (issue 32), from the DP-SGD recipe and Opacus's docs.

A linear intent classifier over hashed words (a bag of ``WIDTH`` hashed
buckets, then ``nn.Linear``): its shape never depends on the data.  Two
loops, each with the bugs issue 32 lists (``bug=``):

- :func:`train_plain`: plain torch.  Poisson sampling at ``q = batch_size / N``
  (each record kept when its uniform draw is below q), per-example gradients
  by ``torch.func`` (``vmap`` of ``grad``), each clipped to C, summed, Gaussian
  noise of std ``σ·C`` from Opacus's RDP accountant, divided by the expected
  batch size.  It follows the framework-neutral white-box contract of
  :mod:`pytest_privleak.dp.white_box` and reports its batches with
  ``audit_hook.record_batch``.
- :func:`train_opacus`: Opacus ``make_private`` (Poisson ``DPDataLoader``),
  audited through ``audit_hook(optimizer, sample_rate=q)``; its loader goes
  through ``audit_hook.watch_loader``.  ``groups="bias-first"`` builds the
  optimizer as ``SGD([{"params": [bias]}, {"params": [weight]}])`` (a common
  way to keep weight decay off biases).

Bugs (:data:`PLAIN_BUGS`, :data:`OPACUS_BUGS`):

- ``noise-off`` (σ = 0), ``noise-div10`` (σ / 10), claim kept;
- ``per-batch-clip``: the mean batch gradient (``mean(0)`` over the rows given)
  clipped to C, noise σ·C / B on it; ``per-batch-clip-expected``: the same with
  the sum divided by the expected batch size B;
- ``drop-rows``: the clip step keeps only the real batch's per-example rows;
- ``fixed-batches``: shuffled fixed-size batches (each epoch a permutation cut
  in chunks of B), accounted as Poisson at q = B / N (opacus 80);
- ``weighted-sampler``: a class-balancing ``WeightedRandomSampler`` (with
  replacement, N draws per epoch, batches of B) accounted as Poisson at B / N
  (opacus 813, 600);
- ``normalise-actual``: the noisy sum divided by the batch's actual size
  (opacus 571);
- ``normalise-floor``: the noisy sum divided by ``int(N * q)`` with
  ``q = 1 / ceil(N / B)``, as Opacus 1.0-1.6 do (opacus 819): the normaliser
  moves with the dataset size.  In :func:`train_opacus` that is Opacus's own
  default; every other Opacus variant sets ``optimizer.expected_batch_size``
  to the batch size, a constant.
"""
from __future__ import annotations

import functools
import hashlib
import math

import torch
from torch import nn

from pytest_privleak.data.types import NLUDataset

WIDTH = 1024
PLAIN_BUGS = ("none", "noise-off", "noise-div10", "per-batch-clip", "per-batch-clip-expected", "drop-rows",
              "microbatch-clip", "microbatch-clip-noise-off", "per-layer-clip-noise-off", "fixed-batches",
              "weighted-sampler", "normalise-actual", "normalise-floor")
OPACUS_BUGS = ("none", "noise-off", "drop-rows", "fixed-batches", "weighted-sampler", "normalise-floor")


def hashed(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest(), "little") % WIDTH


def featurise(utterances, intents) -> tuple[torch.Tensor, torch.Tensor]:
    """Bag of hashed words ``[N, WIDTH]`` and intent indices ``[N]``."""
    label = {intent: i for i, intent in enumerate(intents)}
    x = torch.zeros(len(utterances), WIDTH)
    for row, u in enumerate(utterances):
        for word in u.tokens:
            x[row, hashed(word)] += 1.0
    return x, torch.tensor([label[u.intent] for u in utterances], dtype=torch.long)


class BagOfHashedWords(nn.Module):
    def __init__(self, intents) -> None:
        super().__init__()
        self.intents = tuple(intents)
        self.linear = nn.Linear(WIDTH, len(self.intents))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def build(dataset: NLUDataset) -> BagOfHashedWords:
    return BagOfHashedWords(dataset.intents)


class Scorer:
    """SequenceScorer: cross-entropy of the utterance's own intent (lower = more likely)."""

    def __init__(self, module: BagOfHashedWords) -> None:
        self.module = module

    def score(self, utterances):
        x, y = featurise(list(utterances), self.module.intents)
        with torch.no_grad():
            return nn.functional.cross_entropy(self.module(x), y, reduction="none").numpy()


@functools.lru_cache(maxsize=None)
def sigma_for(epsilon: float, delta: float, q: float, steps: int) -> float:
    """Opacus's RDP accountant's noise multiplier for (ε, δ) over ``steps`` at rate q (cached: it takes seconds)."""
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps,
                                      accountant="rdp"))


def _class_weights(y: torch.Tensor) -> torch.Tensor:
    counts = torch.bincount(y).double()
    return (1.0 / counts.clamp(min=1))[y]


def _batches(bug: str, n: int, q: float, batch_size: int, steps: int, generator: torch.Generator, y: torch.Tensor):
    """Row indices of each step: Poisson by default, else the bug's sampler."""
    if bug == "fixed-batches":
        out = []
        while len(out) < steps:
            order = torch.randperm(n, generator=generator)
            out.extend(order[i:i + batch_size] for i in range(0, n - batch_size + 1, batch_size))
        return out[:steps]
    if bug == "weighted-sampler":
        weights = _class_weights(y)
        draws = torch.multinomial(weights, steps * batch_size, replacement=True, generator=generator)
        return [draws[t * batch_size:(t + 1) * batch_size] for t in range(steps)]
    return [torch.nonzero(torch.rand(n, generator=generator) < q).flatten() for _ in range(steps)]


def _per_example_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    from torch.func import functional_call, grad, vmap

    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(p, xi, yi):
        return nn.functional.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def _clip_and_sum(grads: dict[str, torch.Tensor], c: float, bug: str, real_rows: int, expected: int):
    if bug == "drop-rows":   # the clip step keeps the rows of the batch it sampled, and so drops appended ones
        grads = {k: g[:real_rows] for k, g in grads.items()}
    if bug in ("per-batch-clip", "per-batch-clip-expected"):
        # the batch's mean gradient (over the rows given, or over the expected batch size) clipped to C
        mean = {k: g.mean(0) if bug == "per-batch-clip" else g.sum(0) / expected for k, g in grads.items()}
        norm = torch.sqrt(sum(v.pow(2).sum() for v in mean.values()))
        factor = min(1.0, c / (float(norm) + 1e-6))
        return {k: v * factor * expected for k, v in mean.items()}   # noise σ·C on this = σ·C / B on the mean
    rows = next(iter(grads.values())).shape[0]
    if bug.startswith("microbatch-clip"):
        # TF-Privacy's num_microbatches: each micro-batch of 16 rows summed, and that sum clipped to C as one unit
        # (a record moves it by up to 2C; held-out probe, session 7)
        out = {k: torch.zeros_like(g[0]) for k, g in grads.items()}
        for start in range(0, rows, 16):
            part = {k: g[start:start + 16].sum(0) for k, g in grads.items()}
            norm = torch.sqrt(sum(v.pow(2).sum() for v in part.values()))
            factor = min(1.0, c / (float(norm) + 1e-6))
            for k in out:
                out[k] += part[k] * factor
        return out
    if bug.startswith("per-layer-clip"):
        # each tensor's row clipped to C / sqrt(#tensors) on its own: sound DP at C, but a canary in one tensor
        # moves the sum by C / sqrt(#tensors) only, less than the white-box bound models
        each = c / math.sqrt(len(grads))
        return {k: torch.einsum("i,i...->...", (each / (g.reshape(rows, -1).norm(dim=1) + 1e-6)).clamp(max=1.0), g)
                for k, g in grads.items()}
    norms = torch.sqrt(sum(g.reshape(rows, -1).pow(2).sum(1) for g in grads.values()))
    factor = (c / (norms + 1e-6)).clamp(max=1.0)
    return {k: torch.einsum("i,i...->...", factor, g) for k, g in grads.items()}


def train_plain(dataset: NLUDataset, seed: int, epsilon: float = 2.0, delta: float = 1e-5, bug: str = "none",
                epochs: int = 4, batch_size: int = 64, lr: float = 2.0, max_grad_norm: float = 1.0,
                audit_hook=None) -> BagOfHashedWords:
    """Plain-torch DP-SGD (see the module docstring) claiming (``epsilon``, ``delta``)."""
    if bug not in PLAIN_BUGS:
        raise ValueError(f"bug must be one of {PLAIN_BUGS}, got {bug!r}")
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x, y = featurise(dataset.train, dataset.intents)
    n = len(y)
    q = batch_size / n
    steps = max(1, round(epochs / q))
    sigma = sigma_for(epsilon, delta, q, steps)
    sigma = 0.0 if bug.endswith("noise-off") else sigma / 10 if bug == "noise-div10" else sigma
    model = build(dataset)
    white = None if audit_hook is None else audit_hook.attach(model, sample_rate=q, max_grad_norm=max_grad_norm)
    for rows in _batches(bug, n, q, batch_size, steps, generator, y):
        if audit_hook is not None:
            audit_hook.record_batch(rows, population=n)
        grads = _per_example_grads(model, x[rows], y[rows])
        if white is not None:
            grads = white.before_clipping(grads)
        summed = _clip_and_sum(grads, max_grad_norm, bug, len(rows), batch_size)
        if white is not None:
            white.before_noise(summed)
        normaliser = (max(1, len(rows)) if bug == "normalise-actual"
                      else int(n * (1 / math.ceil(n / batch_size))) if bug == "normalise-floor" else batch_size)
        update = {k: (v + sigma * max_grad_norm * torch.randn(v.shape, generator=generator)) / normaliser
                  for k, v in summed.items()}
        if white is not None:
            white.after_noise(update)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p -= lr * update[name]
    return model


def train_opacus(dataset: NLUDataset, seed: int, epsilon: float = 2.0, delta: float = 1e-5, bug: str = "none",
                 epochs: int = 4, batch_size: int = 64, lr: float = 2.0, max_grad_norm: float = 1.0,
                 groups: str = "model", audit_hook=None) -> BagOfHashedWords:
    """Opacus DP-SGD: ``make_private`` with the noise multiplier ``make_private_with_epsilon`` would pick (σ = 0 for
    ``noise-off``)."""
    from opacus import PrivacyEngine
    from opacus.optimizers import DPOptimizer
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

    if bug not in OPACUS_BUGS:
        raise ValueError(f"bug must be one of {OPACUS_BUGS}, got {bug!r}")
    torch.manual_seed(seed)
    x, y = featurise(dataset.train, dataset.intents)
    model = build(dataset)
    if groups == "bias-first":
        optimizer = torch.optim.SGD([{"params": [model.linear.bias]}, {"params": [model.linear.weight]}], lr=lr)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    data = TensorDataset(x, y)
    poisson = bug not in ("fixed-batches", "weighted-sampler")
    if bug == "weighted-sampler":
        sampler = WeightedRandomSampler(_class_weights(y), num_samples=len(y), replacement=True)
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
    else:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=not poisson)
    engine = PrivacyEngine(accountant="rdp")
    common = dict(module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=max_grad_norm,
                  poisson_sampling=poisson)
    # what make_private_with_epsilon does (the accountant's noise multiplier at q = 1 / len(loader) over epochs),
    # with the accountant's answer cached
    q = 1 / len(loader)
    sigma = 0.0 if bug == "noise-off" else sigma_for(epsilon, delta, q, epochs * len(loader))
    model, optimizer, loader = engine.make_private(noise_multiplier=sigma, **common)
    if bug != "normalise-floor":
        # Opacus 1.0-1.6 divide the noisy sum by int(N * q), which moves with N (opacus 819): keep it constant
        optimizer.expected_batch_size = batch_size
    if bug == "drop-rows":
        class KeepRealRows(DPOptimizer):
            def clip_and_accumulate(self):
                for p in self.params:
                    p.grad_sample = self._get_flat_grad_sample(p)[:self.real_rows]
                super().clip_and_accumulate()
        optimizer.__class__ = KeepRealRows
    if audit_hook is not None:
        audit_hook(optimizer, sample_rate=q)
        loader = audit_hook.watch_loader(loader)
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            optimizer.real_rows = len(yb)
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return model._module


class StandInDPOptimizer:
    """A DP optimizer of one's own with only the public methods the audit's Opacus path uses (``params``,
    ``max_grad_norm``, ``clip_and_accumulate``, ``add_noise``, ``scale_grad``): nothing private of Opacus."""

    def __init__(self, params, *, lr: float, noise_multiplier: float, max_grad_norm: float, expected_batch_size: int,
                 generator: torch.Generator) -> None:
        self.params = list(params)
        self.lr, self.noise_multiplier, self.max_grad_norm = lr, noise_multiplier, max_grad_norm
        self.expected_batch_size, self.generator = expected_batch_size, generator

    def clip_and_accumulate(self) -> None:
        rows = self.params[0].grad_sample.shape[0]
        norms = torch.sqrt(sum(p.grad_sample.reshape(rows, -1).pow(2).sum(1) for p in self.params))
        factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        for p in self.params:
            p.summed_grad = torch.einsum("i,i...->...", factor, p.grad_sample)

    def add_noise(self) -> None:
        for p in self.params:
            p.grad = p.summed_grad + self.noise_multiplier * self.max_grad_norm * torch.randn(
                p.shape, generator=self.generator)

    def scale_grad(self) -> None:
        for p in self.params:
            p.grad = p.grad / self.expected_batch_size

    def step(self) -> None:
        self.clip_and_accumulate()
        self.add_noise()
        self.scale_grad()
        with torch.no_grad():
            for p in self.params:
                p -= self.lr * p.grad


def train_stand_in(dataset: NLUDataset, seed: int, epsilon: float = 2.0, delta: float = 1e-5, epochs: int = 4,
                   batch_size: int = 64, lr: float = 2.0, max_grad_norm: float = 1.0, audit_hook=None):
    """Poisson DP-SGD through :class:`StandInDPOptimizer`, audited with ``audit_hook(optimizer, sample_rate=q)``."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x, y = featurise(dataset.train, dataset.intents)
    n = len(y)
    q = batch_size / n
    steps = max(1, round(epochs / q))
    model = build(dataset)
    optimizer = StandInDPOptimizer(model.parameters(), lr=lr, noise_multiplier=sigma_for(epsilon, delta, q, steps),
                                   max_grad_norm=max_grad_norm, expected_batch_size=batch_size, generator=generator)
    if audit_hook is not None:
        audit_hook(optimizer, sample_rate=q)
    names = [name for name, _ in model.named_parameters()]
    for rows in _batches("none", n, q, batch_size, steps, generator, y):
        grads = _per_example_grads(model, x[rows], y[rows])
        for name, p in zip(names, model.parameters()):
            p.grad_sample = grads[name]
        optimizer.step()
    return model


def train_batches_without_rate(dataset: NLUDataset, seed: int, audit_hook=None) -> BagOfHashedWords:
    """For the bad-input tests: reports its batches but never the rate its accountant was told."""
    generator = torch.Generator().manual_seed(seed)
    n = len(dataset.train)
    for _ in range(3):
        rows = torch.nonzero(torch.rand(n, generator=generator) < 0.2).flatten()
        if audit_hook is not None:
            audit_hook.record_batch(rows, population=n)
    torch.manual_seed(seed)
    return build(dataset)
