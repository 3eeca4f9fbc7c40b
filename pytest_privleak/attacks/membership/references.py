"""Reference models for LiRA and RMIA: the target's own recipe, retrained on random halves of a population.

A :class:`TargetRecipe` says how the target was trained: a built-in kind of
:func:`~pytest_privleak.targets.train_target` with its config, or a team's
training function for :func:`~pytest_privleak.targets.own_model.train_own_model`.
:func:`train_references` calls that same public function once per reference
with the target's dataset whose ``train`` split is replaced by a random half
of the pool, and a seed of its own, so each reference is an ordinary cached
target: trained once per content hash, loaded afterwards, and trained by one
xdist worker while the others wait on the cache lock. Without a time budget,
the references of a built-in recurrent kind that are not in the cache train
together as one stacked training (:func:`~pytest_privleak.targets.train_targets`;
references stack when their vocabulary sizes round up alike), each the model it
would be trained alone.

The pool (Carlini et al. 2022 §IV-B, Zarifzadeh et al. 2024 §3):

- offline (the default, the low-cost setting of RMIA): the population
  records only; no reference is trained on a candidate (member or non-member);
- online: candidates plus population; halves come in complementary pairs,
  so each record is in exactly half of the references (k even).

``time_budget_s`` (as the DP-SGD audit's): references are trained (or loaded
from the cache, which costs about nothing) in order ``j = 0 .. k-1``, and
training stops before a reference whose estimated time, the slowest one so
far in this call, would pass what is left of the budget; at least one
reference (online: one complementary pair) always trains. Reference ``j`` is
the same model whatever the budget (same half, same seed), so a budgeted run
uses the first references of the unbudgeted one, and a later run loads them
from the cache and trains the rest. The figure is then a measurement with
that many references, and the set's ``note`` says how many ran and why.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...data.types import Utterance
from ...progress import events as progress
from .records import training_form


@dataclass(frozen=True)
class TargetRecipe:
    """How the target was trained, so that references can be trained the same way.

    ``kind`` + ``config``: ``train_target(kind, dataset, cache=cache, seed=..., **config)``;
    ``train`` (+ ``build``, ``wrap``, ``sources``) + ``config``: ``train_own_model``.
    ``dataset`` is the target's dataset; a reference keeps its valid split,
    gets its own ``train`` split, and the target's training records not in
    it join its test split (never trained on), so that its label sets are the target's.
    """

    dataset: Any
    kind: str | None = None
    train: Callable[..., Any] | None = None
    build: Callable[[Any], Any] | None = None
    wrap: Callable[[Any], Any] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    cache: Any = None
    device: str = "cpu"
    sources: Sequence[str] = ()

    def __post_init__(self) -> None:
        if (self.kind is None) == (self.train is None):
            raise ValueError("TargetRecipe needs exactly one of kind= (a train_target kind, e.g. 'lstm-lm') or "
                             "train= (your training function, as for train_own_model)")
        if self.train is not None and self.build is None:
            raise ValueError("TargetRecipe(train=...) needs build= (the untrained architecture), as train_own_model")
        if not callable(getattr(self.dataset, "with_train", None)):
            raise TypeError(f"TargetRecipe.dataset must be the target's NLUDataset (it has with_train), got "
                            f"{type(self.dataset).__name__}")

    def fit(self, train_split: Sequence[Utterance], seed: int, label: str) -> Any:
        """Train (or load from the cache) this recipe on ``train_split`` with ``seed``."""
        from ...targets import train_target
        from ...targets.own_model import train_own_model

        dataset = self.reference_dataset(train_split, label)
        if self.kind is not None:
            return train_target(self.kind, dataset, device=self.device, cache=self.cache, seed=seed,
                                **dict(self.config))
        return train_own_model(self.train, dataset, build=self.build, wrap=self.wrap, cache=self.cache,
                               device=self.device, seed=seed, sources=self.sources, name=label, **dict(self.config))

    def fit_many(self, splits: Sequence[Sequence[Utterance]], seeds: Sequence[int], labels: Sequence[str]) -> list:
        """:meth:`fit` for each ``(split, seed, label)``. A built-in kind that stacks its trainings
        (``targets.STACKED``) trains the references missing from the cache together, each cached as :meth:`fit`
        caches it (a model's weights do not depend on its stack); an own model's trainings missing from the cache
        are first spread over processes (:func:`~pytest_privleak.targets.parallel.prefetch`: this process's cores,
        or the xdist workers that have run out of tests), each the model :meth:`fit` trains."""
        if type(self).fit is not TargetRecipe.fit:                          # a recipe that fits its own way
            return [self.fit(split, seed=seed, label=label) for split, seed, label in zip(splits, seeds, labels)]
        if self.train is None:
            from ...targets import STACKED, train_targets

            if self.kind not in STACKED:
                return [self.fit(split, seed=seed, label=label) for split, seed, label in zip(splits, seeds, labels)]
            runs = [(self.reference_dataset(split, label), seed) for split, seed, label in zip(splits, seeds, labels)]
            return train_targets(self.kind, runs, device=self.device, cache=self.cache, **dict(self.config))
        from ...targets.parallel import OwnTraining, prefetch

        made = prefetch([OwnTraining(self.train, self.reference_dataset(split, label), self.build, self.wrap,
                                     self.cache, self.device, seed, tuple(self.sources), label, dict(self.config),
                                     part=f"reference {i + 1} of {len(splits)}")
                         for i, (split, seed, label) in enumerate(zip(splits, seeds, labels))],
                        what=f"the {len(splits)} reference models of {getattr(self.train, '__qualname__', 'train')}")
        return [made[i] if i in made else self.fit(split, seed=seed, label=label)
                for i, (split, seed, label) in enumerate(zip(splits, seeds, labels))]

    def reference_dataset(self, train_split: Sequence[Utterance], label: str) -> Any:
        """The target's dataset with ``train_split`` as its train split (see the class docstring)."""
        # the target's training records move to test, never trained on: the label sets (intents, tags), which the
        # built-in targets read from all splits, stay the target's; words come from the train split only
        split = tuple(train_split)
        inside = set(split)
        return self.dataset.replace(train=split, test=self.dataset.test + tuple(
            u for u in dict.fromkeys(self.dataset.train) if u not in inside), name=f"{self.dataset.name}+{label}")


@dataclass(frozen=True)
class ReferenceSet:
    """Trained references and what each was trained on (rows: references, columns: ``pool`` records)."""

    models: tuple[Any, ...]
    pool: tuple[Utterance, ...]
    in_pool: np.ndarray          # [k, len(pool)] bool: reference j trained on pool record i
    population: tuple[Utterance, ...]
    online: bool
    seed: int
    requested: int = 0           # the k asked for (0: as many as trained); fewer trained when time_budget_s ran out
    note: str = ""               # how many references ran and why, when a time budget was given

    @property
    def k(self) -> int:
        return len(self.models)

    @property
    def k_requested(self) -> int:
        return self.requested or self.k

    def trained_on(self, records: Sequence[Utterance]) -> np.ndarray:
        """``[k, len(records)]`` bool: which reference trained on each record (False for records not in the pool)."""
        index = {u: i for i, u in enumerate(self.pool)}
        columns = np.array([index.get(training_form(u), -1) for u in records], dtype=np.int64)
        inside = columns >= 0
        out = np.zeros((self.k, len(records)), dtype=bool)
        out[:, inside] = self.in_pool[:, columns[inside]]
        return out


def distinct_halves(n: int) -> int:
    """How many different halves (``floor(n / 2)`` of ``n`` records) there are: ``C(n, floor(n / 2))``."""
    return math.comb(n, n // 2)


def half_masks(n: int, k: int, rng: np.random.Generator, complementary: bool) -> np.ndarray:
    """``[k, n]`` bool masks of random halves; with ``complementary`` they come in (half, rest) pairs."""
    masks = np.zeros((k, n), dtype=bool)
    for j in range(0, k, 2 if complementary else 1):
        half = np.zeros(n, dtype=bool)
        half[rng.permutation(n)[: n // 2]] = True
        masks[j] = half
        if complementary and j + 1 < k:
            masks[j + 1] = ~half
    return masks


def _online_pool(candidates: tuple, population: tuple, n_target: int) -> tuple:
    """The online pool: the candidates, topped up from the population to ``2 * n_target`` records, so that each
    reference (a half) trains on as many records as the target (Carlini et al. 2022 §IV-B, Zarifzadeh et al.
    2024 §5: target and references are halves of one pool). Trained for the same epochs, references on 950
    records against the target's 300 fitted even unseen records (loss 0.05 vs the target's 2-3 nats), and RMIA
    fell to the loss attack (TPR at 1 % FPR 0.033); on halves of 600 it found 0.109 against LiRA's 0.036 and the
    loss attack's 0.033 (joint BiLSTM-CRF, k = 4, 6 shuffles: .notes/issue18_rmia_audit.md)."""
    if n_target and len(candidates) > 2 * n_target:
        raise ValueError(f"online references train on halves of twice the target's training set ({2 * n_target} "
                         f"records), but {len(candidates)} members + non-members were given; fix: pass at most "
                         f"{2 * n_target} (the members and as many non-members), or online=False (offline "
                         "references, any number of candidates)")
    return candidates + population[: max(2 * n_target - len(candidates), 0)] if n_target else candidates + population


def _check_reference_size(n_reference: int, n_target: int, online: bool) -> None:
    """Refuse references trained on fewer than half as many records as the target.

    A reference stands for "a model trained like the target without this record"
    (Carlini et al. 2022 §IV-B); one trained on a much smaller set fits every
    record worse, so each candidate looks like a member of the target and the
    calibration is lost (the sample project's control, 300 target records, with
    a population left of a few records: its references trained on 0-5 records).
    """
    if n_target and n_reference * 2 < n_target:
        where = "the candidates and population" if online else "population"
        raise ValueError(f"each reference would train on {n_reference} record(s) (half of {where}), the target on "
                         f"{n_target}: references must be trained like the target, on at least half as many "
                         f"records; fix: pass population= with at least {n_target} held-out records that are "
                         "neither members nor non-members (by default it is the recipe's valid split minus both)")


def _check_k(k: Any, n_pool: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k (the number of reference models) must be an integer >= 1, e.g. 4, got {k!r}")
    if n_pool < 2:
        raise ValueError(f"the references' pool has {n_pool} record(s); a reference trains on a half of it, which "
                         "needs at least 2; fix: pass population= with held-out records (hundreds)")
    if k > distinct_halves(n_pool):
        raise ValueError(f"k={k} references need {k} different halves of the pool, but {n_pool} records have only "
                         f"{distinct_halves(n_pool)}; fix: lower k or pass a larger population=")
    return k


def check_time_budget_s(time_budget_s: Any) -> float | None:
    """``None`` (train all ``k``) or a positive finite number of seconds; anything else is refused with the fix."""
    if time_budget_s is None:
        return None
    if isinstance(time_budget_s, bool) or not isinstance(time_budget_s, (int, float)) or not (
            math.isfinite(time_budget_s) and time_budget_s > 0):
        raise ValueError(f"time_budget_s (seconds the reference models may take to train) must be a positive number "
                         f"or None (no limit: all k references train), got {time_budget_s!r}; fix: e.g. "
                         "time_budget_s=600, or time_budget_s=None to train all k")
    return float(time_budget_s)


def _budget_note(trained: int, k: int, online: bool, budget: float, spent: float, slowest: float) -> str:
    """How many of ``k`` references ran within ``budget`` seconds and why (the evidence's ``references`` line)."""
    unit = "pair" if online else "reference"
    over = f"{spent:.3g} s, over time_budget_s={budget:g}"
    if trained == k:
        if spent <= budget:
            return f"all k={k} references within time_budget_s={budget:g} ({spent:.3g} s)"
        return (f"all k={k} references in {over} (each was estimated by the slowest before it, and one loaded from "
                "the cache takes about no time)")
    head = f"{trained} of k={k} references"
    first = 2 if online else 1
    if trained == first and spent > budget:
        why = (f"the first {unit} alone took {over}; at least one {unit} always trains, so the figure is a "
               f"measurement with {trained} reference(s)")
    else:
        pair = online and trained + 2 <= k
        nxt = f"references {trained + 1}-{trained + 2} (a complementary pair)" if pair else f"reference {trained + 1}"
        why = (f"{nxt} would pass time_budget_s={budget:g} (each took up to {slowest:.3g} s; {spent:.3g} s spent), "
               f"so the figure is a measurement with {trained} reference(s)")
    need = math.ceil(1.2 * max(slowest, 1e-3) * k)
    return (f"{head}: {why}; for all {k}: time_budget_s={need:g} or more, or time_budget_s=None (trained "
            f"references are cached: a later run loads these at about no cost and goes on from reference "
            f"{trained + 1})")


def train_references(recipe: TargetRecipe, candidates: Sequence[Utterance], population: Sequence[Utterance], *,
                     k: int = 4, online: bool = False, seed: int = 0,
                     time_budget_s: float | None = None) -> ReferenceSet:
    """Train ``k`` references with ``recipe`` on random halves of the pool (see the module docstring).

    ``candidates`` are the records under test (members and non-members);
    ``population`` records from the same distribution that are neither (the
    RMIA ``z`` records, and the offline pool). Deterministic: the halves come
    from ``seed`` and reference ``j`` trains with seed ``seed * 1000 + j + 1``
    (never the target's default 0). ``time_budget_s``: seconds the references
    may take to train; fewer than ``k`` may then train (see the module
    docstring), the first ones of the unbudgeted run, and ``note`` says so.
    """
    budget = check_time_budget_s(time_budget_s)
    if not isinstance(recipe, TargetRecipe):
        raise TypeError(f"recipe must be a TargetRecipe (how the target was trained), got {type(recipe).__name__}; "
                        "fix: TargetRecipe(dataset, kind='lstm-lm', config={...}, cache=cache) or "
                        "TargetRecipe(dataset, train=my_train, build=my_build, wrap=MyAdapter, cache=cache)")
    population = tuple(dict.fromkeys(training_form(u) for u in population))
    candidates = tuple(dict.fromkeys(training_form(u) for u in candidates))
    shared = set(population) & set(candidates)
    if shared:
        sample = next(iter(shared)).text
        raise ValueError(f"population shares {len(shared)} record(s) with the members / non-members, e.g. "
                         f"{sample!r}; population records are RMIA's reference records z and must be neither; fix: "
                         "drop the candidates from population= (e.g. use dataset.valid when members are "
                         "dataset.train and non-members dataset.test)")
    pool = _online_pool(candidates, population, len(dict.fromkeys(recipe.dataset.train))) if online else population
    k = _check_k(k, len(pool))
    _check_reference_size(len(pool) // 2, len(recipe.dataset.train), online)
    rng = np.random.default_rng(seed)
    masks = half_masks(len(pool), k, rng, complementary=online)   # all k drawn: reference j is the same whatever ran
    models: list[Any] = []
    step = 2 if online else 1                                     # online halves come in complementary pairs
    start = time.perf_counter()
    slowest = 0.0
    def fit(todo: Sequence[int]) -> list:
        return recipe.fit_many([tuple(u for u, inside in zip(pool, masks[j]) if inside) for j in todo],
                               [seed * 1000 + j + 1 for j in todo],
                               [f"reference {j + 1}/{k} ({'online' if online else 'offline'})" for j in todo])

    if budget is None:             # all k at once: a built-in kind trains them as one stack
        models = fit(range(k))
    while len(models) < k:
        size = min(step, k - len(models))
        if models and slowest * size > budget - (time.perf_counter() - start):
            break
        for j in range(len(models), len(models) + size):
            began = time.perf_counter()
            with progress.part(f"reference {j + 1} of {k}"):   # each training line says which reference
                models += fit([j])
            slowest = max(slowest, time.perf_counter() - began)
    trained = len(models)
    note = "" if budget is None else _budget_note(trained, k, online, budget, time.perf_counter() - start, slowest)
    return ReferenceSet(tuple(models), pool, masks[:trained], population, online, seed, k, note)
