"""Canary extraction attack (CEA), canary-extraction-nlu §3.1 and Appendix B.

The attacker knows the canary's prefix, its intent and its tags, and the model
(open box: embedding matrix ``W`` and training loss). For each unknown position
``i`` it learns a logit vector ``z_i`` over the reduced vocabulary V0, feeds
the soft embedding ``e'_i = W_V0^T softmax(z_i / T_t)`` (eq. 1-2) and
minimises the model's loss for the known labels with the weights frozen
(eq. 3); the guess is ``argmax z_i``. Appendix B: ``T_t = 0.1 * 0.997^t``,
Adam with learning rate 6.5e-3 decayed by 0.995 per iteration, 250 iterations.

Not given by the paper and measured here (see the issue notes): the scale of
the random initial logits. ``z ~ init_scale * N(0, 1)``; with the temperature
starting at 0.1, a scale of 1.0 makes ``softmax(z/T)`` nearly one-hot from the
first step and the attack stays near chance, 0.1 (the default) starts it near
uniform and it works.

Strength: ``starts`` random restarts per trial run in the same batch; with
``select="best_loss"`` the trial's guess is the restart whose *discrete*
reconstruction has the lowest model loss, which the attacker computes without
the secret. ``starts=1`` is the paper's single-start attack.

Everything is one batched optimisation: rows are canaries x trials x starts,
grouped by model and by shape (prefix length, n, V0). Each row's loss is
summed, so a row's gradient, and with Adam's element-wise state its whole
trajectory, does not depend on the other rows: a batched run matches a loop
of single runs with the same seeds.

Also here: the paper's "trivial" continuous attack (optimise ``e'`` directly,
then the nearest embedding; §3.1, expected near chance, §5) and the
exhaustive attack (score every secret, :mod:`.candidates`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..stats import clopper_pearson
from .candidates import DEFAULT_BUDGET, canary_rows, discrete_loss, enumerate_space, rank_of, secret_index

if TYPE_CHECKING:  # pragma: no cover
    from ..canaries import Canary
    from ..protocols import SoftInputModel

METHODS = ("gradient", "trivial", "exhaustive")
SELECTS = ("best_loss", "single")


@dataclass(frozen=True)
class CEAConfig:
    """Attack hyper-parameters; defaults are Appendix B's where the paper gives them."""

    epochs: int = 250                 # App. B: 250 epochs (one step per epoch: the batch is the canary)
    lr: float = 6.5e-3                # App. B: initial Adam learning rate
    lr_decay: float = 0.995           # App. B: decay rate, applied per iteration
    temperature0: float = 0.1         # App. B: T_t = 0.997^t * 1e-1
    temperature_decay: float = 0.997
    init_scale: float = 0.1           # not in the paper; measured (module docstring)
    starts: int = 1                   # random restarts per trial, batched
    select: str = "best_loss"         # how a trial picks among its starts

    def __post_init__(self) -> None:
        for name in ("epochs", "starts"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("lr", "temperature0", "init_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("lr_decay", "temperature_decay"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in (0, 1], got {getattr(self, name)!r}")
        if self.select not in SELECTS:
            raise ValueError(f"select must be one of {SELECTS}, got {self.select!r}")
        if self.select == "single" and self.starts != 1:
            raise ValueError(f"select='single' is the paper's one-start attack but starts={self.starts}; "
                             "fix: starts=1, or select='best_loss' to choose among several starts")


def temperature_schedule(epochs: int, temperature0: float = 0.1, decay: float = 0.997) -> list[float]:
    """``T_t = temperature0 * decay^t`` for ``t = 0..epochs-1`` (Appendix B)."""
    return [temperature0 * decay ** t for t in range(epochs)]


def lr_schedule(epochs: int, lr: float = 6.5e-3, decay: float = 0.995) -> list[float]:
    """Learning rate of step ``t``: ``lr * decay^t`` (Appendix B, exponential decay)."""
    return [lr * decay ** t for t in range(epochs)]


def hamming_per_token(true: torch.Tensor, guess: torch.Tensor) -> torch.Tensor:
    """HDT of each row: positions that differ divided by n (§4.3)."""
    if true.shape != guess.shape:
        raise ValueError(f"shapes differ: {tuple(true.shape)} vs {tuple(guess.shape)}")
    return (true != guess).double().mean(dim=-1)


def row_seed(seed: int, canary_index: int, trial: int) -> int:
    """Seed of one trial's random initialisation, independent of how trials are batched."""
    return int(np.random.SeedSequence([int(seed), int(canary_index), int(trial)]).generate_state(1)[0])


def initial_logits(seeds: Sequence[int], starts: int, n: int, vocab_size: int, init_scale: float) -> torch.Tensor:
    """``[len(seeds) * starts, n, |V0|]`` logits ``init_scale * N(0, 1)``, each trial from its own seed."""
    blocks = [torch.randn(starts, n, vocab_size, generator=torch.Generator().manual_seed(s), dtype=torch.float32)
              for s in seeds]
    return torch.cat(blocks) * init_scale


def initial_embeddings(seeds: Sequence[int], starts: int, n: int, v0_weights: torch.Tensor) -> torch.Tensor:
    """Random ``e'`` for the trivial attack: per-dimension mean and std of the V0 rows plus Gaussian noise."""
    w = v0_weights.detach().float().cpu()
    mean, std = w.mean(0), w.std(0, unbiased=False)
    noise = torch.cat([torch.randn(starts, n, w.shape[1], generator=torch.Generator().manual_seed(s)) for s in seeds])
    return mean + std * noise


@dataclass(frozen=True)
class _Rows:
    """One optimisation group: rows sharing a model and a shape."""

    prefix_rows: torch.Tensor     # [B, m] rows of W
    v0_rows: torch.Tensor         # [|V0|] rows of W
    intents: list[str]
    tags: list[tuple[str, ...]]


def relaxed_attack(model: "SoftInputModel", rows: _Rows, logits: torch.Tensor, config: CEAConfig) -> torch.Tensor:
    """Optimise the logits ``Z`` (eq. 3) from ``logits`` ``[B, n, |V0|]``; returns ``argmax`` guesses ``[B, n]``.

    ``a = softmax(Z / T_t)`` (eq. 1), ``e' = a W_V0`` (eq. 2), prefix rows
    exact; Adam on ``Z`` only, the model frozen (gradients go to ``Z`` alone).
    """
    weights = model.input_embeddings().detach()
    device = weights.device
    v0_weights = weights[rows.v0_rows.to(device)]
    prefix = weights[rows.prefix_rows.to(device)]
    z = logits.to(device=device, dtype=weights.dtype).clone().requires_grad_(True)
    optimiser = torch.optim.Adam([z], lr=config.lr, fused=True)  # fused: one kernel per step
    temperatures = temperature_schedule(config.epochs, config.temperature0, config.temperature_decay)
    rates = lr_schedule(config.epochs, config.lr, config.lr_decay)
    for temperature, rate in zip(temperatures, rates):
        optimiser.param_groups[0]["lr"] = rate
        soft = torch.softmax(z / temperature, dim=-1) @ v0_weights
        loss = model.loss_from_embeddings(torch.cat([prefix, soft], dim=1), rows.intents, rows.tags).sum()
        (z.grad,) = torch.autograd.grad(loss, [z])
        optimiser.step()
    return z.detach().argmax(dim=-1).cpu()


def continuous_attack(model: "SoftInputModel", rows: _Rows, start: torch.Tensor, config: CEAConfig) -> torch.Tensor:
    """The paper's trivial attack (§3.1): optimise ``e'`` itself, then the nearest V0 embedding (Euclidean).

    The paper searches all of ``W``; searching only V0 can only help the
    attacker, so a near-chance result here is the stronger statement (§5).
    Same optimiser and schedule as :func:`relaxed_attack`; no temperature.
    """
    weights = model.input_embeddings().detach()
    device = weights.device
    v0_weights = weights[rows.v0_rows.to(device)]
    prefix = weights[rows.prefix_rows.to(device)]
    e = start.to(device=device, dtype=weights.dtype).clone().requires_grad_(True)
    optimiser = torch.optim.Adam([e], lr=config.lr, fused=True)
    for rate in lr_schedule(config.epochs, config.lr, config.lr_decay):
        optimiser.param_groups[0]["lr"] = rate
        loss = model.loss_from_embeddings(torch.cat([prefix, e], dim=1), rows.intents, rows.tags).sum()
        (e.grad,) = torch.autograd.grad(loss, [e])
        optimiser.step()
    distances = torch.cdist(e.detach().reshape(-1, e.shape[-1]), v0_weights)
    return distances.argmin(dim=-1).reshape(e.shape[0], e.shape[1]).cpu()


@dataclass(frozen=True)
class ExtractionReport:
    """Per-trial truth and reconstruction of a CEA run, with the §4.3 metrics and their chance baselines.

    A trial is one independent attack on one canary (its own random start, or
    best of ``starts`` restarts); trials are ordered canary by canary.
    """

    method: str
    canaries: tuple[str, ...]                 # canary texts, by canary index
    canary_index: tuple[int, ...]             # per trial
    true: tuple[tuple[str, ...], ...]         # per trial, the secret tokens
    reconstructed: tuple[tuple[str, ...], ...]
    losses: tuple[float, ...]                 # model loss of each reconstruction (discrete)
    chance_accuracies: tuple[float, ...]      # per trial, (1/|V0|)^n
    chance_hdts: tuple[float, ...]            # per trial, 1 - 1/|V0|
    trials_per_canary: int
    starts: int
    select: str
    config: dict[str, Any] = field(default_factory=dict)
    ranks: tuple[int, ...] | None = None      # exhaustive: rank of the true secret per canary (ties against it)
    space_sizes: tuple[int, ...] | None = None
    seconds: float = 0.0

    @property
    def n_trials(self) -> int:
        return len(self.true)

    @property
    def correct(self) -> int:
        return sum(t == r for t, r in zip(self.true, self.reconstructed))

    @property
    def accuracy(self) -> float:
        """Fraction of trials whose whole secret is right, in order (§4.3 "Acc")."""
        return self.correct / self.n_trials

    @property
    def hdts(self) -> tuple[float, ...]:
        return tuple(sum(a != b for a, b in zip(t, r)) / len(t) for t, r in zip(self.true, self.reconstructed))

    @property
    def hdt(self) -> float:
        """Mean Hamming distance per token over trials (§4.3 "HDT")."""
        return float(np.mean(self.hdts))

    @property
    def chance_accuracy(self) -> float:
        """Expected accuracy of guessing uniformly from V0, averaged over trials."""
        return float(np.mean(self.chance_accuracies))

    @property
    def chance_hdt(self) -> float:
        return float(np.mean(self.chance_hdts))

    def accuracy_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided Clopper-Pearson interval of the accuracy over the trials."""
        return clopper_pearson(self.correct, self.n_trials, confidence)

    def describe_trials(self) -> str:
        """What one trial was, for messages."""
        if self.method == "exhaustive":
            return f"{self.n_trials} trial(s) = {len(self.canaries)} canary(ies), one exhaustive scoring each"
        how = "single random start" if self.select == "single" else f"best-by-loss of {self.starts} random starts"
        return (f"{self.n_trials} trial(s) = {len(self.canaries)} canary(ies) x {self.trials_per_canary} "
                f"independent attack run(s), each the {how}")

    def reconstructed_texts(self) -> list[str]:
        return [" ".join(r) for r in self.reconstructed]


def _as_targets(targets: Any, count: int) -> list[Any]:
    if isinstance(targets, (list, tuple)):
        if len(targets) != count:
            raise ValueError(f"got {len(targets)} targets for {count} canaries; fix: pass one model, or one "
                             "model per canary in the same order")
        items = list(targets)
    else:
        items = [targets] * count
    for i, model in enumerate(items):
        if not all(hasattr(model, attr) for attr in ("vocabulary", "input_embeddings", "loss_from_embeddings")):
            raise TypeError(f"target {i} ({type(model).__name__}) does not implement the SoftInputModel protocol "
                            "(vocabulary, input_embeddings(), loss_from_embeddings(embeddings, intents, tags)); "
                            "see pytest_privleak.protocols.SoftInputModel")
    return items


def extract(targets: "SoftInputModel | Sequence[SoftInputModel]", canaries: "Canary | Sequence[Canary]", *,
            method: str = "gradient", trials: int = 1, starts: int = 1, select: str = "best_loss",
            epochs: int = 250, lr: float = 6.5e-3, lr_decay: float = 0.995, temperature0: float = 0.1,
            temperature_decay: float = 0.997, init_scale: float = 0.1, seed: int = 0, first_trial: int = 0,
            budget: int | None = DEFAULT_BUDGET, batch_size: int = 1024) -> ExtractionReport:
    """Run the CEA on each canary and return the per-trial :class:`ExtractionReport`.

    ``targets``: one model for all canaries, or one per canary. ``trials``:
    independent attack runs per canary, each from its own random start (or
    best of ``starts``), seeded by ``(seed, canary index, trial)`` with trial
    numbers ``first_trial .. first_trial + trials - 1`` (so a loop of
    one-trial calls reproduces one batched call exactly).
    ``method``: "gradient" (§3.1 discrete relaxation), "trivial" (§3.1
    continuous, nearest embedding) or "exhaustive" (score all ``|V0|^n``
    secrets within ``budget``; deterministic, so one trial per canary and
    ``trials``/``starts`` do not apply).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
    config = CEAConfig(epochs=epochs, lr=lr, lr_decay=lr_decay, temperature0=temperature0,
                       temperature_decay=temperature_decay, init_scale=init_scale, starts=starts, select=select)
    from ..canaries import as_canary_list

    items = as_canary_list(canaries)
    models = _as_targets(targets, len(items))
    began = time.perf_counter()
    if method == "exhaustive":
        guesses, losses, ranks, sizes = _exhaustive(models, items, budget, batch_size)
        per_canary = 1
    else:
        guesses, losses = _optimise(models, items, trials, config, seed, first_trial, method, batch_size)
        ranks = sizes = None
        per_canary = trials
    canary_index = tuple(i for i in range(len(items)) for _ in range(per_canary))
    vocab = [c.pattern.vocabulary for c in items]
    return ExtractionReport(
        method=method,
        canaries=tuple(c.text for c in items),
        canary_index=canary_index,
        true=tuple(items[i].secret for i in canary_index),
        reconstructed=tuple(tuple(vocab[i][k] for k in guess) for i, guess in zip(canary_index, guesses)),
        losses=tuple(float(x) for x in losses),
        chance_accuracies=tuple(items[i].pattern.chance_accuracy for i in canary_index),
        chance_hdts=tuple(items[i].pattern.chance_hdt for i in canary_index),
        trials_per_canary=per_canary,
        starts=1 if method == "exhaustive" else config.starts,
        select="exhaustive" if method == "exhaustive" else config.select,
        config={} if method == "exhaustive" else {k: getattr(config, k) for k in config.__dataclass_fields__},
        ranks=ranks, space_sizes=sizes, seconds=time.perf_counter() - began)


def _optimise(models: list[Any], items: list["Canary"], trials: int, config: CEAConfig, seed: int, first_trial: int,
              method: str, batch_size: int) -> tuple[list[list[int]], list[float]]:
    """Gradient or trivial attack on every (canary, trial, start), one optimisation per (model, shape) group."""
    guesses: list[list[int] | None] = [None] * (len(items) * trials)
    losses: list[float] = [math.nan] * (len(items) * trials)
    groups: dict[tuple, list[int]] = {}
    for i, (model, item) in enumerate(zip(models, items)):
        p = item.pattern
        groups.setdefault((id(model), len(p.prefix), p.length, p.vocabulary), []).append(i)
    for (_, _, n, vocabulary), members in groups.items():
        model = models[members[0]]
        k = config.starts
        row_prefix, row_intents, row_tags, seeds = [], [], [], []
        v0 = None
        for i in members:
            prefix, v0 = canary_rows(model, items[i])
            for t in range(trials):
                seeds.append(row_seed(seed, i, first_trial + t))
                row_prefix.extend([prefix] * k)
                row_intents.extend([items[i].intent] * k)
                row_tags.extend([items[i].tags] * k)
        rows = _Rows(torch.stack(row_prefix), v0, row_intents, row_tags)
        if method == "gradient":
            start = initial_logits(seeds, k, n, len(vocabulary), config.init_scale)
            found = relaxed_attack(model, rows, start, config)
        else:
            weights = model.input_embeddings().detach()
            start = initial_embeddings(seeds, k, n, weights[v0.to(weights.device)])
            found = continuous_attack(model, rows, start, config)
        weights = model.input_embeddings().detach()
        scored = discrete_loss(model, weights, rows.prefix_rows, v0, found, rows.intents, rows.tags, batch_size)
        best = scored.view(-1, k).argmin(dim=1) if config.select == "best_loss" else torch.zeros(len(seeds), dtype=torch.long)
        chosen = torch.arange(len(seeds)) * k + best
        for slot, (i, t) in enumerate((i, t) for i in members for t in range(trials)):
            guesses[i * trials + t] = found[chosen[slot]].tolist()
            losses[i * trials + t] = float(scored[chosen[slot]])
    return guesses, losses  # type: ignore[return-value]


def _exhaustive(models: list[Any], items: list["Canary"], budget: int | None, batch_size: int):
    """Score every secret of each canary's pattern; guess = lowest loss; rank of the truth (§4.3 metrics)."""
    guesses, losses, ranks, sizes = [], [], [], []
    for model, item in zip(models, items):
        p = item.pattern
        space = enumerate_space(len(p.vocabulary), p.length, budget=budget)
        prefix, v0 = canary_rows(model, item)
        scores = discrete_loss(model, model.input_embeddings().detach(), prefix, v0, space, [p.intent], [p.tags],
                               batch_size)
        best = int(scores.argmin())
        guesses.append(space[best].tolist())
        losses.append(float(scores[best]))
        truth = secret_index(item.secret_indices, len(p.vocabulary))
        # ties against the truth, as exposure counts them: rank 1 only when the truth is the unique
        # lowest loss, i.e. exactly when the exhaustive guess is certain to be the truth
        ranks.append(rank_of(scores[truth], torch.cat([scores[:truth], scores[truth + 1:]]), ties="against"))
        sizes.append(int(space.shape[0]))
    return guesses, losses, tuple(ranks), tuple(sizes)
