"""Pattern reconstruction from sentence embeddings (privacy-risks-language-model-embeddings §V).

Pipeline (§IV-C): the attacker generates texts of the public format (stage 1,
Assumption 3a), queries the encoder for their embeddings (stage 2), trains one
MLP per sub-attack (stage 3, §V-B 2 divide and conquer) and reads the secret
of each victim embedding as ``argmax g(z)`` (stage 4).

* Citizen ID: year, month and day sub-attacks, three-layer MLPs with 400, 25
  and 200 sigmoid hidden units, mini-batches of 128 (§V-C).
* Genome: one four-layer MLP (400, 100 sigmoid units with batch
  normalisation) on ``z ⊕ p_i``, ``p_i`` the sinusoidal embedding of the
  target position ``i`` with the dimension of ``z``; each mini-batch of 128
  tuples draws its positions uniformly from ``1..20`` (§V-C, App. B).

Figures (Table II, Fig. 3): top-1 and top-5 accuracy of each sub-attack on
the victims (1000 generated IDs in §V-C) with Clopper-Pearson intervals, and
the chance of a guesser who knows the generator's prior (top-k chance = the k
most likely classes' share).

Budget (§V-D): the paper trains 100,000 iterations of 128 fresh samples, 12.8
million encoder queries. Here the attacker encodes ``n_train`` generated
samples once and trains ``steps`` iterations of 128 on them; encoding is
what costs (MiniLM on one loaded CPU thread: 50-160 IDs a second), and the
year sub-attack is what needs the data. Measured on all-MiniLM-L6-v2 (year
top-1 on 1000 victims, issue 21): 20,000 IDs plateau at 0.34 (train 0.98:
memorised), 40,000 at 0.41, 60,000 at 0.46-0.47 (15,000-24,000 steps),
80,000 reach 0.50 after 16,000 steps, 120,000 0.52 (one cached pool of
embeddings); end to end, the defaults read year 0.468 (CI 0.437..0.499),
month 0.480, day 0.310, whole date 0.065 (tests/test_embeddings_minilm.py).
On the tiny random BERT of the CI tests the same budgets read year 0.127
(20,000 IDs, 3000 steps), 0.274 (the defaults), 0.323 (120,000, 24,000).
The defaults, :data:`DEFAULT_N_TRAIN` IDs and :data:`DEFAULT_STEPS`
iterations, are the smallest of these that reach Table II's range
(0.45-0.74) on MiniLM (by a thin margin end to end: 120,000 IDs give more);
more of either only helps the attacker. The sub-attacks of one pattern are
trained together on the same mini-batches, each on its own loss and
parameters (Adam is per parameter, so this is three independent models, in
one pass over the batches).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..stats import clopper_pearson
from ..targets.training import torch_threads
from .patterns import CitizenIdPattern, GenomePattern, get_pattern
from .training import Standardiser, encode, mlp, predict

TRAINING_THREADS = 1   # torch threads of the sub-attacks' training, whatever the caller's count
BATCH = 128  # §V-C: "The training batch size is set as 128 for each sub-attack"
#: Generated samples the attacker encodes and iterations it trains (module docstring: the smallest budget
#: measured to reach Table II's range on all-MiniLM-L6-v2; the paper: 100,000 iterations of fresh samples).
DEFAULT_N_TRAIN = 80_000
DEFAULT_STEPS = 16_000


@dataclass(frozen=True)
class SubAttackFigure:
    """Top-1 / top-5 hits of one sub-attack over ``n`` victim predictions, with chance and intervals."""

    name: str
    hits1: int
    hits5: int
    n: int
    chance1: float
    chance5: float
    interval1: tuple[float, float]
    interval5: tuple[float, float]

    @property
    def top1(self) -> float:
        return self.hits1 / self.n

    @property
    def top5(self) -> float:
        return self.hits5 / self.n


@dataclass
class InversionMeasurement:
    """What :func:`invert_embeddings` measured: one figure per sub-attack and readable examples."""

    pattern: str
    figures: list[SubAttackFigure]
    examples: list[str]
    n_train: int
    n_victims: int
    steps: int
    confidence: float
    extra: dict[str, float] = field(default_factory=dict)
    per_position: dict[str, float] = field(default_factory=dict)


def positional_embedding(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal position embedding of App. B: ``p_{i,2k} = sin(i / 10000^{2k/d})``, ``p_{i,2k+1} = cos(i / 10000^{(2k+1)/d})``."""
    k = torch.arange(dim, dtype=torch.float32)
    angle = positions.float().unsqueeze(-1) / torch.pow(10000.0, k / dim)
    return torch.where(k.long() % 2 == 0, torch.sin(angle), torch.cos(angle))


def _topk_chance(prior: np.ndarray, k: int) -> float:
    return float(np.sort(prior)[::-1][:k].sum())


def _figure(name: str, logits: torch.Tensor, truth: np.ndarray, prior: np.ndarray, confidence: float) -> SubAttackFigure:
    truth_t = torch.as_tensor(truth, dtype=torch.long)
    top = logits.topk(min(5, logits.shape[1]), dim=1).indices
    hits1 = int((top[:, 0] == truth_t).sum())
    hits5 = int((top == truth_t.unsqueeze(1)).any(dim=1).sum())
    n = len(truth)
    return SubAttackFigure(name, hits1, hits5, n, _topk_chance(prior, 1), _topk_chance(prior, 5),
                           clopper_pearson(hits1, n, confidence), clopper_pearson(hits5, n, confidence))


def _check_budget(n_train: Any, n_victims: Any, steps: Any, confidence: Any) -> None:
    for name, value, low in (("n_train", n_train, 2), ("n_victims", n_victims, 1), ("steps", steps, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}; fix: e.g. "
                             f"n_train={DEFAULT_N_TRAIN}, n_victims=1000, steps={DEFAULT_STEPS}")
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a float in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")


def invert_embeddings(encoder: Any, pattern: Any = "citizen-id", *, n_train: int = DEFAULT_N_TRAIN,
                      n_victims: int = 1000, steps: int = DEFAULT_STEPS, seed: int = 0, confidence: float = 0.95,
                      sub_attacks: Any = None) -> InversionMeasurement:
    """Run the §V attack on ``encoder`` for ``pattern`` (``"citizen-id"`` or ``"genome"``) and measure it.

    The attacker's training set (``n_train`` texts) and the victims
    (``n_victims`` texts) are drawn from the pattern's generator with
    independent streams of ``seed``; the victims' texts are used only to
    score the reconstruction. ``sub_attacks``: for Citizen ID, a subset of
    ``("year", "month", "day")`` to run (default all three).
    """
    pattern = get_pattern(pattern)
    _check_budget(n_train, n_victims, steps, confidence)
    subs = check_sub_attacks(pattern, sub_attacks)
    rng_train, rng_victims = (np.random.default_rng([seed, stream]) for stream in (1, 2))
    train, victims = pattern.sample(n_train, rng_train), pattern.sample(n_victims, rng_victims)
    z_train = encode(encoder, train.texts, what="the embeddings of the attacker's generated texts")
    z_victims = encode(encoder, victims.texts, what="the embeddings of the victims' texts", dim=z_train.shape[1])
    scale = Standardiser(z_train)
    x_train, x_victims = scale(z_train), scale(z_victims)
    # the sub-attacks train with one torch thread whatever the caller's count, so the figures do not depend on
    # the cores an xdist worker gets and the result cache keys them without the count (issue 24 item 6)
    with torch_threads(TRAINING_THREADS):
        if isinstance(pattern, GenomePattern):
            return _genome(pattern, x_train, x_victims, train.labels, victims.labels, n_train, steps, seed,
                           confidence)
        return _citizen(pattern, subs, x_train, x_victims, train.labels, victims.labels, n_train, steps, seed,
                        confidence)


def check_sub_attacks(pattern: Any, sub_attacks: Any) -> tuple[str, ...]:
    """The sub-attacks to run: all of the pattern's by default, or a checked subset (Citizen ID only)."""
    if sub_attacks is None:
        return tuple(pattern.sub_attacks) if isinstance(pattern, CitizenIdPattern) else ()
    if not isinstance(pattern, CitizenIdPattern):
        raise ValueError(f"sub_attacks= applies to the citizen-id pattern only (the genome attack is one model for "
                         f"every position, App. B); fix: drop sub_attacks for {pattern.name!r}")
    if isinstance(sub_attacks, str):
        sub_attacks = (sub_attacks,)
    chosen = tuple(sub_attacks)
    unknown = [s for s in chosen if s not in pattern.sub_attacks]
    if not chosen or unknown:
        raise ValueError(f"sub_attacks={sub_attacks!r} holds no or unknown sub-attacks {unknown}; fix: a non-empty "
                         f"subset of {pattern.sub_attacks}")
    return chosen


def train_sub_attacks(nets: list[torch.nn.Module], x: torch.Tensor, labels: list[torch.Tensor], *, steps: int,
                      seed: int) -> None:
    """``steps`` Adam steps (lr 1e-3) of every sub-attack model on the same random mini-batches of :data:`BATCH`.

    The loss is the sum of each model's cross-entropy on its own labels; the
    models share no parameter and Adam updates each parameter from its own
    gradient, so each model learns exactly what it would learn alone on these
    batches (§V-B 2: the sub-attacks are independent), in one pass.
    """
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam([p for net in nets for p in net.parameters()], lr=1e-3)
    for net in nets:
        net.train()
    n = x.shape[0]
    for _ in range(steps):
        rows = torch.randint(0, n, (min(BATCH, n),), generator=generator)
        batch = x[rows]
        loss = sum(torch.nn.functional.cross_entropy(net(batch), y[rows]) for net, y in zip(nets, labels))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    for net in nets:
        net.eval()


def _citizen(pattern: CitizenIdPattern, subs: tuple[str, ...], x_train: torch.Tensor, x_victims: torch.Tensor, y_train: dict,
             y_victims: dict, n_train: int, steps: int, seed: int, confidence: float) -> InversionMeasurement:
    """Year, month and day sub-attacks (§V-B 2), then the whole birth date as all three right (Table II)."""
    classes, prior = pattern.classes, pattern.class_probabilities()
    chosen = [(i, sub) for i, sub in enumerate(pattern.sub_attacks) if sub in subs]
    nets = [mlp(x_train.shape[1], pattern.hidden[sub], len(classes[sub]), seed=seed * 7919 + i) for i, sub in chosen]
    train_sub_attacks(nets, x_train, [torch.as_tensor(y_train[sub], dtype=torch.long) for _, sub in chosen],
                      steps=steps, seed=seed * 7919)
    figures, guesses = [], {}
    for net, (_, sub) in zip(nets, chosen):
        logits = predict(net, x_victims, what=f"the {sub} attack model's outputs")
        figures.append(_figure(sub, logits, y_victims[sub], prior[sub], confidence))
        guesses[sub] = logits.argmax(dim=1).numpy()
    n = x_victims.shape[0]
    examples = []
    for v in range(min(3, n)):
        truth = {s: int(y_victims[s][v]) for s in pattern.sub_attacks}
        guess = {s: int(guesses[s][v]) if s in subs else None for s in pattern.sub_attacks}
        shown = {s: guess[s] if guess[s] is not None else truth[s] for s in pattern.sub_attacks}
        marks = " ".join(f"{s} {'right' if truth[s] == guess[s] else 'wrong'}" for s in subs)
        examples.append(f"born {pattern.describe_secret(truth)} -> read {pattern.describe_secret(shown)} ({marks})")
    extra = {}
    if len(subs) == len(pattern.sub_attacks):
        whole = np.all([guesses[s] == y_victims[s] for s in subs], axis=0)
        extra = {"whole_date_top1": float(whole.mean()),
                 "whole_date_chance": float(np.prod([_topk_chance(prior[s], 1) for s in subs]))}
    return InversionMeasurement(pattern.name, figures, examples, n_train, n, steps, confidence, extra=extra)


def _genome(pattern: GenomePattern, x_train: torch.Tensor, x_victims: torch.Tensor, y_train: dict, y_victims: dict,
            n_train: int, steps: int, seed: int, confidence: float) -> InversionMeasurement:
    """One model on ``z ⊕ p_i`` for every position (App. B); figure pooled over positions, each position reported."""
    d, length = x_train.shape[1], pattern.length
    codes_train = torch.as_tensor(np.stack([y_train[s] for s in pattern.sub_attacks], axis=1), dtype=torch.long)
    net = mlp(2 * d, pattern.hidden["nucleotide"], 4, batch_norm=True, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    for _ in range(steps):
        rows = torch.randint(0, x_train.shape[0], (BATCH,), generator=generator)
        pos = torch.randint(0, length, (BATCH,), generator=generator)
        inputs = torch.cat([x_train[rows], positional_embedding(pos + 1, d)], dim=1)
        loss = torch.nn.functional.cross_entropy(net(inputs), codes_train[rows, pos])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    net.eval()
    n = x_victims.shape[0]
    pos = torch.arange(length).repeat_interleave(n)
    inputs = torch.cat([x_victims.repeat(length, 1), positional_embedding(pos + 1, d)], dim=1)
    logits = predict(net, inputs, what="the nucleotide attack model's outputs")
    truth = np.concatenate([y_victims[s] for s in pattern.sub_attacks])
    prior = pattern.class_probabilities()[pattern.sub_attacks[0]]
    figure = _figure("nucleotide", logits, truth, prior, confidence)
    right = (logits.argmax(dim=1).numpy() == truth).reshape(length, n)
    per_position = {s: float(right[i].mean()) for i, s in enumerate(pattern.sub_attacks)}
    guess = logits.argmax(dim=1).numpy().reshape(length, n)
    examples = []
    for v in range(min(3, n)):
        t = pattern.describe_secret({s: int(y_victims[s][v]) for s in pattern.sub_attacks})
        g = pattern.describe_secret({s: int(guess[i, v]) for i, s in enumerate(pattern.sub_attacks)})
        marks = "".join("^" if a == b else "." for a, b in zip(t, g))
        examples.append(f"{t} -> read {g} (^ = right: {marks})")
    return InversionMeasurement(pattern.name, [figure], examples, n_train, n, steps, confidence,
                                per_position=per_position)
