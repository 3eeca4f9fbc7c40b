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

from ...stats import clopper_pearson
from ...finite import NonFiniteError, require_finite
from ..redaction import redaction_note, shown_secret, shown_text
from ..candidates import (DEFAULT_BUDGET, canary_rows, discrete_loss, enumerate_space, loss_rows,
                         most_probable_secrets, rank_of, secret_index)

if TYPE_CHECKING:  # pragma: no cover
    from ...canaries import Canary
    from ...protocols import SoftInputModel

METHODS = ("auto", "gradient", "trivial", "exhaustive")
#: Secrets scored per gradient start under ``method="auto"``, most probable first (see :func:`extract`).
DEFAULT_RANKED = 256
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
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}; fix: e.g. {name}="
                                 f"{CEAConfig.__dataclass_fields__[name].default} (Appendix B: 250 epochs; "
                                 "starts: random restarts per trial)")
        for name in ("lr", "temperature0", "init_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not value > 0:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}; fix: e.g. {name}="
                                 f"{CEAConfig.__dataclass_fields__[name].default} (the default)")
        for name in ("lr_decay", "temperature_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name} must lie in (0, 1], got {value!r}; fix: e.g. {name}="
                                 f"{CEAConfig.__dataclass_fields__[name].default} (Appendix B)")
        if self.select not in SELECTS:
            raise ValueError(f"select must be one of {SELECTS}, got {self.select!r}; fix: 'best_loss' (keep the "
                             "start with the lowest loss) or 'single' (the paper's one start per trial)")
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


def relaxed_attack(model: "SoftInputModel", rows: _Rows, logits: torch.Tensor, config: CEAConfig, *,
                   whose: str = "the model") -> torch.Tensor:
    """Optimise the logits ``Z`` (eq. 3) from ``logits`` ``[B, n, |V0|]``; returns the final ``Z`` (CPU).

    ``a = softmax(Z / T_t)`` (eq. 1), ``e' = a W_V0`` (eq. 2), prefix rows
    exact; Adam on ``Z`` only, the model frozen (gradients go to ``Z`` alone).
    The guess is ``argmax Z``. A non-finite loss at any step raises
    :class:`NonFiniteError` naming ``whose`` (counted on the device, one check
    at the end, so the loop never waits on the device).
    """
    weights = model.input_embeddings().detach()
    device = weights.device
    v0_weights = weights[rows.v0_rows.to(device)]
    prefix = weights[rows.prefix_rows.to(device)]
    z = logits.to(device=device, dtype=weights.dtype).clone().requires_grad_(True)
    optimiser = torch.optim.Adam([z], lr=config.lr, fused=True)  # fused: one kernel per step
    temperatures = temperature_schedule(config.epochs, config.temperature0, config.temperature_decay)
    rates = lr_schedule(config.epochs, config.lr, config.lr_decay)
    nonfinite = torch.zeros((), dtype=torch.long, device=device)
    for temperature, rate in zip(temperatures, rates):
        optimiser.param_groups[0]["lr"] = rate
        soft = torch.softmax(z / temperature, dim=-1) @ v0_weights
        loss = loss_rows(model.loss_from_embeddings(torch.cat([prefix, soft], dim=1), rows.intents, rows.tags),
                         z.shape[0])
        nonfinite += (~torch.isfinite(loss.detach())).sum()
        (z.grad,) = torch.autograd.grad(loss.sum(), [z])
        optimiser.step()
    _refuse_nonfinite(int(nonfinite), config.epochs * z.shape[0],
                      f"the loss of {whose} at the soft inputs of the gradient attack (eq. 1-3)",
                      FIX_BROKEN + "; a model must give finite losses for any convex mix of its embedding rows "
                      "(method='exhaustive' feeds one-hot rows only)")
    require_finite(z.detach(), what=f"the attack's logits on {whose} (its loss gradient)", fix=FIX_BROKEN)
    return z.detach().cpu()


def continuous_attack(model: "SoftInputModel", rows: _Rows, start: torch.Tensor, config: CEAConfig, *,
                      whose: str = "the model") -> torch.Tensor:
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
    nonfinite = torch.zeros((), dtype=torch.long, device=device)
    for rate in lr_schedule(config.epochs, config.lr, config.lr_decay):
        optimiser.param_groups[0]["lr"] = rate
        loss = loss_rows(model.loss_from_embeddings(torch.cat([prefix, e], dim=1), rows.intents, rows.tags),
                         e.shape[0])
        nonfinite += (~torch.isfinite(loss.detach())).sum()
        (e.grad,) = torch.autograd.grad(loss.sum(), [e])
        optimiser.step()
    _refuse_nonfinite(int(nonfinite), config.epochs * e.shape[0],
                      f"the loss of {whose} at the inputs of the trivial attack (§3.1)", FIX_BROKEN)
    require_finite(e.detach(), what=f"the trivial attack's embeddings on {whose}", fix=FIX_BROKEN)
    distances = torch.cdist(e.detach().reshape(-1, e.shape[-1]), v0_weights)
    return distances.argmin(dim=-1).reshape(e.shape[0], e.shape[1]).cpu()


#: What to do about a model that returns NaN or infinite values (every CEA path refuses them).
FIX_BROKEN = ("the model's weights or its loss_from_embeddings give NaN or infinite values (diverged training, "
              "a bad checkpoint or cache entry): retrain the model or reload a sound checkpoint (clear its cache "
              "entry), then attack it again; a privacy gate cannot judge a broken model")


def _refuse_nonfinite(bad: int, total: int, what: str, fix: str) -> None:
    if bad:
        raise NonFiniteError(f"{what}: {bad} of {total} value(s) are NaN or infinite, so no privacy figure can be "
                             f"computed from them (a gate must not pass on a broken model). Fix: {fix}")


def describe_model(index: int, model: Any, canaries: Sequence["Canary"]) -> str:
    """Who a finite-check or shape error is about: target number, class, content hash and canaries."""
    content_hash = getattr(model, "content_hash", None)
    tag = f", content hash {content_hash[:12]}" if isinstance(content_hash, str) else ""
    texts = ", ".join(repr(shown_text(c)) for c in canaries[:3]) + (", ..." if len(canaries) > 3 else "")
    return f"target {index} ({type(model).__name__}{tag}) attacked for canary {texts}"


def checked_embeddings(model: Any, whose: str) -> torch.Tensor:
    """``model.input_embeddings()`` detached, after checking its shape against the vocabulary and its values."""
    weights = model.input_embeddings()
    size = len(model.vocabulary)
    if not isinstance(weights, torch.Tensor) or weights.dim() != 2 or weights.shape[0] != size \
            or not weights.is_floating_point():
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise TypeError(f"input_embeddings() of {whose} returned {shape}; the SoftInputModel protocol needs a "
                        f"float tensor [{size}, dim], one row per vocabulary token in order; fix: return the "
                        "embedding matrix the model's first layer uses")
    require_finite(weights.detach(), what=f"the input embeddings of {whose}", fix=FIX_BROKEN)
    return weights.detach()


@dataclass(frozen=True)
class ExtractionReport:
    """Per-trial truth and reconstruction of a CEA run, with the §4.3 metrics and their chance baselines.

    A trial is one independent attack on one canary: a gradient run (its own
    random start, or best of ``starts`` restarts, optionally followed by scoring
    its ``ranked`` most probable secrets), or the one deterministic exhaustive
    scoring. Trials are ordered canary by canary; ``canary_index`` says whose.
    Per canary: ``attacks`` (what ran), ``ranks`` of the true secret with
    ``ranks_exact`` (exact among all secrets for the exhaustive attack; else a
    lower bound, 1 + the distinct scored candidates at or below the truth's
    loss), ``scored`` (distinct secrets scored) and ``space_sizes`` (|V0|^n).
    """

    method: str
    canaries: tuple[str, ...]                 # canary texts as shown (a team's secret redacted), by canary index
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
    ranks: tuple[int, ...] | None = None      # per canary, rank of the true secret (ties against it)
    space_sizes: tuple[int, ...] | None = None
    seconds: float = 0.0
    attacks: tuple[str, ...] = ()             # per canary: "exhaustive", "gradient", "gradient+ranked", "trivial"
    ranks_exact: tuple[bool, ...] = ()        # per canary: exact rank (exhaustive) or a lower bound
    scored: tuple[int, ...] = ()              # per canary: distinct secrets whose loss was computed
    ranked: int = 1                           # secrets scored per gradient start, most probable first
    budget: int | None = None                 # auto: largest space scored exhaustively
    shown_guesses: tuple[str, ...] = ()       # per trial, the reconstruction as shown (a team's secret redacted)
    redaction: dict[str, str] = field(default_factory=dict)   # the evidence line saying what was redacted

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

    def describe_attack(self) -> str:
        """Which attack ran on which canaries, for messages (auto may run both)."""
        parts = []
        for attack in dict.fromkeys(self.attacks):
            count = self.attacks.count(attack)
            which = f"{count} canary(ies)" if count != len(self.attacks) else (
                "the canary" if count == 1 else f"all {count} canaries")
            if attack == "exhaustive":
                how = ("exhaustive: scored every secret of V0^n with the model's loss (deterministic; the "
                       "guess is the lowest loss, ties to the first in V0 order; `trials` does not apply)")
            elif attack == "gradient+ranked":
                how = (f"gradient (canary-extraction-nlu §3.1) then ranked scoring: each trial scores the "
                       f"{self.ranked} most probable secrets of each of its {self.starts} start(s)' final "
                       "logits and keeps the lowest loss")
            elif attack == "gradient":
                how = ("gradient (canary-extraction-nlu §3.1, App. B): " +
                       ("the paper's single start" if self.select == "single"
                        else f"best-by-loss of {self.starts} random starts"))
            else:
                how = "trivial continuous attack (§3.1), nearest V0 embedding"
            parts.append(f"{how} on {which}")
        prefix = "auto (exhaustive when |V0|^n <= %s, else gradient then ranked scoring): " % self.budget \
            if self.method == "auto" else ""
        return prefix + "; ".join(parts)

    def describe_trials(self) -> str:
        """What one trial was, for messages."""
        per_canary = [self.canary_index.count(i) for i in range(len(self.canaries))]
        if all(a == "exhaustive" for a in self.attacks):
            return f"{self.n_trials} trial(s) = {len(self.canaries)} canary(ies), one exhaustive scoring each"
        if self.select == "single":
            how = "single random start"
        else:
            how = f"best-by-loss of {self.starts} random starts"
        if "gradient+ranked" in self.attacks:
            how += f" and of the {self.ranked} most probable secrets of each"
        runs = f"{self.trials_per_canary}" if len(set(per_canary)) == 1 else "/".join(map(str, per_canary))
        return (f"{self.n_trials} trial(s) = {len(self.canaries)} canary(ies) x {runs} "
                f"independent attack run(s), each the {how}")

    def describe_ranks(self) -> list[str]:
        """Per canary: the rank of the true secret and what it means (ties counted against the truth)."""
        out = []
        for rank, exact, size, scored, attack in zip(self.ranks or (), self.ranks_exact, self.space_sizes or (),
                                                     self.scored, self.attacks):
            if exact:
                out.append(f"{rank} of {size} (exact; ties counted against the truth: rank 1 = the true secret "
                           "is the single most likely one)")
            else:
                out.append(f">= {rank} of {size} (lower bound: {rank - 1} of the {scored} distinct secrets "
                           f"scored have a loss at or below the truth's; {self.why_not_exhaustive(attack, size)})")
        return out

    def why_not_exhaustive(self, attack: str, size: int) -> str:
        """Why a canary's secrets were not all scored: the budget (auto) or the method the caller named."""
        if attack == "gradient+ranked":
            return f"the space, {size} secrets, is over the exhaustive budget of {self.budget}"
        if self.budget is None or size <= self.budget:
            return (f"method={self.method!r} was asked for, which scores only its own guesses; method='auto' or "
                    "'exhaustive' scores every secret of this space (it fits the budget) and gives the exact rank")
        return (f"method={self.method!r} was asked for, which scores only its own guesses (the space, {size} "
                f"secrets, is also over the exhaustive budget of {self.budget})")

    def reconstructed_texts(self) -> list[str]:
        """Each trial's reconstruction as messages show it (a guess of a team's secret redacted like the secret)."""
        return list(self.shown_guesses) if self.shown_guesses else [" ".join(r) for r in self.reconstructed]


def _as_targets(targets: Any, count: int) -> list[Any]:
    if isinstance(targets, (list, tuple)):
        if len(targets) != count:
            raise ValueError(f"targets: got a list of {len(targets)} model(s) for {count} canary(ies); fix: pass "
                             "one model for all canaries, or one model per canary, a list of models aligned with "
                             "the list of canaries (model i was trained with canary i: the paper's protocol)")
        items = list(targets)
    else:
        items = [targets] * count
    for i, model in enumerate(items):
        if not all(hasattr(model, attr) for attr in ("vocabulary", "input_embeddings", "loss_from_embeddings")):
            raise TypeError(f"targets: target {i} ({type(model).__name__}) does not implement the SoftInputModel "
                            "protocol (vocabulary, input_embeddings(), loss_from_embeddings(embeddings, intents, "
                            "tags)); fix: pass a built-in target (train_target), an adapter from "
                            "pytest_privleak.adapters, or wrap your model as pytest_privleak.protocols."
                            "SoftInputModel describes")
    return items


def _positive_int(name: str, value: Any, *, none_ok: bool = False, fix: str = "") -> None:
    if none_ok and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1{' or None' if none_ok else ''}, got {value!r}"
                         f"{fix or f'; fix: e.g. {name}=1'}")


def extract(targets: "SoftInputModel | Sequence[SoftInputModel]", canaries: "Canary | Sequence[Canary]", *,
            method: str = "auto", trials: int = 1, starts: int = 1, select: str = "best_loss",
            epochs: int = 250, lr: float = 6.5e-3, lr_decay: float = 0.995, temperature0: float = 0.1,
            temperature_decay: float = 0.997, init_scale: float = 0.1, seed: int = 0, first_trial: int = 0,
            budget: int | None = DEFAULT_BUDGET, ranked: int = DEFAULT_RANKED,
            batch_size: int = 1024) -> ExtractionReport:
    """Run the CEA on each canary and return the per-trial :class:`ExtractionReport`.

    ``targets``: one model for all canaries, or a list aligned with the list of
    canaries (model ``i`` was trained with canary ``i``). ``trials``:
    independent attack runs per canary, each from its own random start (or
    best of ``starts``), seeded by ``(seed, canary index, trial)`` with trial
    numbers ``first_trial .. first_trial + trials - 1`` (so a loop of
    one-trial calls reproduces one batched call exactly).

    ``method``: "auto" (the default: the strongest attack that fits the
    budget; score every secret of a canary whose space ``|V0|^n`` is at most
    ``budget``, otherwise run the gradient attack, then, per start, score the
    ``ranked`` secrets most probable under its final logits and keep the
    lowest loss), "gradient" (the paper's attack, §3.1 discrete relaxation,
    App. B; guess = argmax of the logits; ``select="single"``, ``starts=1``
    for the paper's one start per trial), "trivial" (§3.1 continuous, nearest
    embedding) or "exhaustive" (every secret, within ``budget``). Exhaustive
    scoring is deterministic: one trial per canary, ``trials``/``starts`` do
    not apply. Every path refuses NaN or infinite
    embeddings and losses (:class:`~pytest_privleak.finite.NonFiniteError`).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}; fix: 'auto' (the strongest that "
                         "fits the budget), or name the attack")
    if method == "auto" and select == "single":
        raise ValueError("select='single' is the paper's single-start gradient attack, but method='auto' scores "
                         "every secret when the space fits the budget (no start is run); fix: pass "
                         "method='gradient', select='single' for the paper's attack, or drop select")
    _positive_int("trials", trials, fix="; fix: the number of independent attack runs per canary, e.g. "
                  "trials=10 (the paper's §4.3 protocol)")
    _positive_int("ranked", ranked, fix="; fix: the number of most probable secrets scored per gradient start")
    _positive_int("batch_size", batch_size)
    _positive_int("budget", budget, none_ok=True, fix="; fix: the largest secret space scored exhaustively "
                  "(None: no limit)")
    if not isinstance(seed, int) or isinstance(seed, bool) or not isinstance(first_trial, int) or first_trial < 0:
        raise ValueError(f"seed must be an integer and first_trial an integer >= 0, got seed={seed!r}, "
                         f"first_trial={first_trial!r}")
    config = CEAConfig(epochs=epochs, lr=lr, lr_decay=lr_decay, temperature0=temperature0,
                       temperature_decay=temperature_decay, init_scale=init_scale, starts=starts, select=select)
    from ...canaries import CanarySet, as_canary_list

    items = as_canary_list(canaries)
    # a canary set's members are all training data: each is attacked among the secrets that are not members
    members = torch.tensor(canaries.secret_numbers, dtype=torch.long) if isinstance(canaries, CanarySet) else None
    models = _as_targets(targets, len(items))
    sizes = [c.pattern.space_size for c in items]
    if method == "auto":
        attacks = ["exhaustive" if budget is None or size <= budget else "gradient+ranked" for size in sizes]
    else:
        attacks = [method] * len(items)
    began = time.perf_counter()
    whose = {id(m): describe_model(i, m, [c for c, o in zip(items, models) if o is m])
             for i, m in reversed(list(enumerate(models)))}
    weights = {id(m): checked_embeddings(m, whose[id(m)]) for m in models}
    outcome: dict[int, _Outcome] = {}
    exhaustive = [i for i, a in enumerate(attacks) if a == "exhaustive"]
    space_scores: dict[tuple, torch.Tensor] = {}   # one scoring per (model, pattern) for a set's members
    for i in exhaustive:
        outcome[i] = _exhaustive(models[i], weights[id(models[i])], items[i], budget, batch_size, whose[id(models[i])],
                                 members=members, shared=space_scores)
    searched = [i for i, a in enumerate(attacks) if a != "exhaustive"]
    if searched:
        outcome.update(_optimise(models, weights, items, searched, trials, config, seed, first_trial,
                                 "trivial" if method == "trivial" else "gradient",
                                 ranked if method == "auto" else 1, batch_size, whose, members))
    canary_index = tuple(i for i in range(len(items)) for _ in outcome[i].guesses)
    vocab = [c.pattern.vocabulary for c in items]
    reconstructed = tuple(tuple(vocab[i][k] for k in g) for i in range(len(items)) for g in outcome[i].guesses)
    return ExtractionReport(
        method=method,
        canaries=tuple(shown_text(c) for c in items),
        canary_index=canary_index,
        true=tuple(items[i].secret for i in canary_index),
        reconstructed=reconstructed,
        losses=tuple(float(x) for i in range(len(items)) for x in outcome[i].losses),
        chance_accuracies=tuple(items[i].pattern.chance_accuracy for i in canary_index),
        chance_hdts=tuple(items[i].pattern.chance_hdt for i in canary_index),
        trials_per_canary=1 if not searched else trials,
        starts=1 if not searched else config.starts,
        select="exhaustive" if not searched else config.select,
        config={} if not searched else {k: getattr(config, k) for k in config.__dataclass_fields__},
        ranks=tuple(outcome[i].rank for i in range(len(items))), space_sizes=tuple(sizes),
        seconds=time.perf_counter() - began, attacks=tuple(attacks),
        ranks_exact=tuple(attacks[i] == "exhaustive" for i in range(len(items))),
        scored=tuple(outcome[i].scored for i in range(len(items))),
        ranked=ranked if method == "auto" else 1, budget=budget,
        shown_guesses=tuple(shown_secret(items[i], r) for i, r in zip(canary_index, reconstructed)),
        redaction=redaction_note(items))


@dataclass(frozen=True)
class _Outcome:
    """One canary's result: a guess (V0 indices) and its loss per trial, the truth's rank, secrets scored."""

    guesses: list[list[int]]
    losses: list[float]
    rank: int
    scored: int


def _optimise(models: list[Any], weights: dict[int, torch.Tensor], items: list["Canary"], indices: list[int],
              trials: int, config: CEAConfig, seed: int, first_trial: int, method: str, ranked: int,
              batch_size: int, whose: dict[int, str], set_members: torch.Tensor | None = None) -> dict[int, _Outcome]:
    """Gradient or trivial attack on every (canary, trial, start), one optimisation per (model, shape) group.

    Each start proposes its argmax (``ranked=1``) or its ``ranked`` most
    probable secrets under ``softmax(Z / T_final)``; the distinct (canary,
    secret) proposals are scored once with the model's loss, and each trial
    keeps its lowest-loss proposal (``select="best_loss"``) or its first
    start's argmax (``select="single"``). ``set_members``: the secret numbers of a canary set, never a guess
    for another member (each is attacked among the non-members).
    """
    groups: dict[tuple, list[int]] = {}
    for i in indices:
        p = items[i].pattern
        groups.setdefault((id(models[i]), len(p.prefix), p.length, p.vocabulary), []).append(i)
    out: dict[int, _Outcome] = {}
    k = config.starts
    for (model_id, _, n, vocabulary), members in groups.items():
        model, w = models[members[0]], weights[model_id]
        rows_of = {i: canary_rows(model, items[i]) for i in members}
        v0 = rows_of[members[0]][1]
        seeds = [row_seed(seed, i, first_trial + t) for i in members for t in range(trials)]
        per_row = [i for i in members for _ in range(trials * k)]          # canary of each optimised row
        rows = _Rows(torch.stack([rows_of[i][0] for i in per_row]), v0, [items[i].intent for i in per_row],
                     [items[i].tags for i in per_row])
        if method == "gradient":
            logits = relaxed_attack(model, rows, initial_logits(seeds, k, n, len(vocabulary), config.init_scale),
                                    config, whose=whose[model_id])
            final = config.temperature0 * config.temperature_decay ** (config.epochs - 1)
            proposals = most_probable_secrets(torch.log_softmax(logits.double() / final, dim=-1), ranked)
        else:
            start = initial_embeddings(seeds, k, n, w[v0.to(w.device)])
            proposals = continuous_attack(model, rows, start, config, whose=whose[model_id]).unsqueeze(1)
        out.update(_score_proposals(model, w, items, members, rows_of, proposals, trials, k, config.select,
                                    batch_size, whose[model_id], set_members))
    return out


def _score_proposals(model: Any, weights: torch.Tensor, items: list["Canary"], members: list[int],
                     rows_of: dict[int, tuple[torch.Tensor, torch.Tensor]], proposals: torch.Tensor, trials: int,
                     starts: int, select: str, batch_size: int, whose: str,
                     set_members: torch.Tensor | None = None) -> dict[int, _Outcome]:
    """Score the distinct (canary, secret) proposals ``[rows, C, n]`` and the truths; pick each trial's guess.

    A proposal that is another member of a canary set (``set_members``) is never picked nor counted above
    the truth: it is training data, not a guess."""
    count, n = proposals.shape[1], proposals.shape[2]
    slot = torch.arange(len(members)).repeat_interleave(trials * starts * count)      # member slot of each proposal
    flat = proposals.reshape(-1, n)
    truths = torch.tensor([items[i].secret_indices for i in members], dtype=torch.long)
    keyed = torch.cat([torch.cat([slot.unsqueeze(1), flat], 1),
                       torch.cat([torch.arange(len(members)).unsqueeze(1), truths], 1)])
    unique, inverse = torch.unique(keyed, dim=0, return_inverse=True)
    canary_of = [members[int(s)] for s in unique[:, 0]]
    prefix = torch.stack([rows_of[i][0] for i in canary_of])
    losses = discrete_loss(model, weights, prefix, rows_of[members[0]][1], unique[:, 1:],
                           [items[i].intent for i in canary_of], [items[i].tags for i in canary_of], batch_size)
    require_finite(losses, what=f"the loss of {whose} on {len(unique)} one-hot canaries (the attack's candidates)",
                   fix=FIX_BROKEN)
    is_truth = (unique[:, 1:] == truths[unique[:, 0]]).all(dim=1)
    if set_members is not None:
        powers = len(rows_of[members[0]][1]) ** torch.arange(n - 1, -1, -1, dtype=torch.long)
        other = torch.isin((unique[:, 1:] * powers).sum(dim=1), set_members) & ~is_truth
        losses = torch.where(other, torch.full_like(losses, math.inf), losses)
    per_trial = losses[inverse[:flat.shape[0]]].view(len(members) * trials, starts * count)
    pick = per_trial.argmin(dim=1) if select == "best_loss" else torch.zeros(per_trial.shape[0], dtype=torch.long)
    guesses = flat.view(len(members) * trials, starts * count, n)[torch.arange(per_trial.shape[0]), pick]
    chosen = per_trial[torch.arange(per_trial.shape[0]), pick]
    truth_loss = losses[inverse[flat.shape[0]:]]                                       # [members]
    at_or_below = (losses <= truth_loss[unique[:, 0]]) & ~is_truth
    beaten = torch.bincount(unique[:, 0][at_or_below], minlength=len(members))
    proposed = torch.bincount(unique[:, 0], minlength=len(members))
    out = {}
    for slot_i, i in enumerate(members):
        span = slice(slot_i * trials, (slot_i + 1) * trials)
        out[i] = _Outcome(guesses[span].tolist(), chosen[span].tolist(), 1 + int(beaten[slot_i]),
                          int(proposed[slot_i]))
    return out


def _exhaustive(model: Any, weights: torch.Tensor, item: "Canary", budget: int | None, batch_size: int,
                whose: str, *, members: torch.Tensor | None = None,
                shared: dict[tuple, torch.Tensor] | None = None) -> _Outcome:
    """Score every secret of the canary's pattern; guess = lowest loss; exact rank of the truth (§4.3).

    ``members``: the secret numbers of the canary set ``item`` belongs to; the other members are left out
    of the guess and the rank (they are training data, not candidates), and ``shared`` keeps the space's
    scores so the set's members score it once."""
    p = item.pattern
    space = enumerate_space(len(p.vocabulary), p.length, budget=budget)
    key = (id(model), p)
    if shared is not None and key in shared:
        scores = shared[key]
    else:
        prefix, v0 = canary_rows(model, item)
        scores = discrete_loss(model, weights, prefix, v0, space, [p.intent], [p.tags], batch_size,
                               label=f"canary extraction of {shown_text(item)}")
        require_finite(scores, what=f"the loss of {whose} on the {len(scores)} secrets of the exhaustive attack",
                       fix=FIX_BROKEN)
        if shared is not None:
            shared[key] = scores
    truth = secret_index(item.secret_indices, len(p.vocabulary))
    keep = torch.ones(scores.shape[0], dtype=torch.bool)
    if members is not None:
        keep[members] = False
        keep[truth] = True
    candidates = torch.nonzero(keep).squeeze(1)
    best = int(candidates[scores[candidates].argmin()])  # ties: the first lowest loss in V0 order
    keep[truth] = False
    # ties against the truth, as exposure counts them: rank 1 only when the truth is the unique
    # lowest loss, i.e. exactly when the exhaustive guess is certain to be the truth
    rank = rank_of(scores[truth], scores[keep], ties="against")
    return _Outcome([space[best].tolist()], [float(scores[best])], rank, int(keep.sum()) + 1)
