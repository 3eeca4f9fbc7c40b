"""The audit's hook into a DP-SGD training: white-box Dirac gradient canaries and the batches each step used.

``train(dataset, seed, ..., audit_hook=None)`` receives an
:class:`AuditHook` (a ``dict``: its JSON spec joins the training's cache key)
and calls it in one of two ways, both documented contracts:

- a loop of its own (plain torch, ``torch.func``, microbatches, any
  framework): ``audit = audit_hook.attach(model, sample_rate=q,
  max_grad_norm=C)`` once, then per step ``audit.before_clipping(grads)``,
  ``audit.before_noise(summed)``, ``audit.after_noise(update)``
  (:mod:`.white_box`);
- Opacus: ``audit_hook(optimizer, sample_rate=q)`` with the ``DPOptimizer``
  ``make_private`` returned, which goes through the same contract by the
  optimizer's public methods (:mod:`.opacus_hook`).

and, for the sampler audit (:mod:`.sampling`), tells which records each step
used: ``loader = audit_hook.watch_loader(loader)`` (any ``DataLoader``,
Opacus's Poisson one included) or ``audit_hook.record_batch(indices,
population=N)`` per step.

Beside the spec the hook keeps an :class:`InsertionTally` (JSON-safe, stored
with the cached training): calls, steps, in how many steps canaries went in,
each canary's score (:mod:`.white_box`: from the noisy update at its coordinate, step by step),
the first step at which a canary did not reach the clipped sum, each step's
rows, noise scale and normaliser estimate, and the recorded batches.  The
audit refuses a training whose canaries did not reach every step
(:func:`check_insertions`) rather than scoring it: a ``train`` that never
calls the hook, calls it twice, steps another optimizer, clips in a way that
skips the hook (Opacus ghost clipping) or drops the appended rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .white_box import NORM_FACTOR, WhiteBoxSession, per_step_cap

__all__ = ["AuditHook", "DiracCanaryHook", "InsertionTally", "check_insertions", "NORM_FACTOR"]

_JSON_FIELDS = ("calls", "steps", "insertion_steps", "sample_rate", "max_grad_norm", "count", "coordinates", "sums", "shapes",
                "names", "scores", "inserted", "failure", "min_share", "rows", "inverse_normaliser", "noise_rms",
                "batches", "population", "batch_calls")


@dataclass
class InsertionTally:
    """What an :class:`AuditHook` saw during one training (see the module docstring)."""

    calls: int = 0
    steps: int = 0
    insertion_steps: int = 0
    sample_rate: float = 0.0
    max_grad_norm: float = 0.0
    #: canaries used: the first ``count`` of the hook's (fewer when ``cap`` keeps them few per step)
    count: int = 0
    coordinates: list = field(default_factory=list)     # per canary: [parameter index, flat offset]
    shapes: list = field(default_factory=list)
    names: list = field(default_factory=list)           # per parameter: its name, or None
    scores: Any = field(default_factory=list)            # per canary: the audit's score (log-likelihood ratio)
    sums: Any = field(default_factory=list)              # per canary: the sum over steps of the update there
    inserted: Any = field(default_factory=list)          # per canary: the steps it went into (0 if out)
    failure: str | None = None
    min_share: float = float("inf")
    rows: list = field(default_factory=list)             # per step: the data rows before clipping
    inverse_normaliser: list = field(default_factory=list)
    noise_rms: list = field(default_factory=list)
    batches: list = field(default_factory=list)          # per recorded step: the record indices
    population: int = 0
    batch_calls: int = 0

    def to_json(self) -> dict:
        data = {name: getattr(self, name) for name in _JSON_FIELDS}
        data["scores"] = [float(s) for s in self.scores]
        data["sums"] = [float(s) for s in self.sums]
        data["inserted"] = [int(n) for n in self.inserted]
        data["min_share"] = None if not np.isfinite(self.min_share) else float(self.min_share)
        data["inverse_normaliser"] = [None if not np.isfinite(v) else float(v) for v in self.inverse_normaliser]
        data["batches"] = [[int(i) for i in b] for b in self.batches]
        return data

    @classmethod
    def from_json(cls, data: Any) -> "InsertionTally":
        """The tally stored with a cached training; ValueError when it is not one."""
        try:
            tally = cls(**{name: data[name] for name in _JSON_FIELDS})
            tally.scores = np.asarray(tally.scores, dtype=np.float64)
            tally.sums = np.asarray(tally.sums, dtype=np.float64)
            tally.inserted = np.asarray(tally.inserted, dtype=np.int64)
            tally.min_share = float("inf") if tally.min_share is None else float(tally.min_share)
            tally.inverse_normaliser = [float("nan") if v is None else float(v) for v in tally.inverse_normaliser]
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not an insertion tally: {str(data)[:200]} ({exc!r})") from exc
        return tally

    def describe(self) -> str:
        total = int(np.sum(self.inserted)) if len(self.inserted) else 0
        share = "" if not np.isfinite(self.min_share) else f"; smallest canary share of the clipped sum " \
                                                            f"{self.min_share:.3g}·C"
        return (f"audit_hook called {self.calls}x; canaries inserted in {self.insertion_steps} of {self.steps} "
                f"steps, {total} canary gradients in all ({self.count} canaries, sampling rate "
                f"{self.sample_rate:.4g}){share}")

    def name_parameters(self, module: torch.nn.Module, params: list) -> None:
        """Fill unnamed parameters' names from ``module``: the same tensor, else the one parameter of the same
        shape holding exactly the same values (``train_own_model`` hands back a copy of the trained module)."""
        named = list(module.named_parameters())
        by_id = {id(p): name for name, p in named}
        out = []
        for name, p in zip(self.names, params):
            if name is None:
                name = by_id.get(id(p))
            if name is None:
                same = [n for n, q in named if q.shape == p.shape and torch.equal(q.detach().cpu(), p.detach().cpu())]
                name = same[0] if len(same) == 1 else None
            out.append(name)
        self.names = out

    def coordinate_name(self, i: int) -> str:
        owner, offset = self.coordinates[i]
        index = np.unravel_index(int(offset), tuple(self.shapes[owner])) if self.shapes[owner] else ()
        name = self.names[owner] if owner < len(self.names) and self.names[owner] else f"parameter #{owner}"
        return f"{name}[{', '.join(map(str, index))}]"


def check_insertions(tally: InsertionTally, *, train: str, included: int) -> None:
    """Refuse a training whose gradient canaries did not reach every step's clipped sum (module docstring).

    Otherwise the scores are the data's and the noise's alone, the guesses are
    coin flips, and the audit would pass any claim.
    """
    protocol = ("call audit_hook(optimizer, sample_rate=q) once with the DPOptimizer make_private returned, or "
                "audit = audit_hook.attach(model, sample_rate=q, max_grad_norm=C) once and hand it every step's "
                "per-example gradients before clipping, clipped sum before noise and update after noise")
    if tally.calls == 0:
        raise ValueError(f"train={train} takes audit_hook but never called it, so no gradient canary reached "
                         f"training and the white-box audit would read the data's gradients alone (it would pass "
                         f"any claim); fix: {protocol} (see pytest_privleak.dp.white_box), or drop the audit_hook "
                         "parameter and audit threat_model='black-box'")
    if tally.calls > 1:
        raise ValueError(f"train={train} called audit_hook {tally.calls} times in one training: each call inserts "
                         f"every canary again, more often than its sampling rate says; fix: {protocol}")
    if tally.failure is not None:
        raise ValueError(f"train={train}: the gradient canaries did not reach the update at {tally.failure} "
                         f"({tally.describe()}); the white-box audit would score the data's gradients alone and "
                         f"pass any claim; fix: clip every per-example row that before_clipping returns, including "
                         f"the appended ones, and {protocol}")
    if tally.steps == 0 or tally.insertion_steps < tally.steps:
        raise ValueError(f"train={train}: the gradient canaries reached only {tally.insertion_steps} of the "
                         f"{tally.steps} steps ({tally.describe()}); the white-box audit needs them in every step "
                         f"(a step of another optimizer, or Opacus ghost clipping, is not seen); fix: {protocol}")
    if len(tally.inserted) != tally.count or tally.count > included:
        raise ValueError(f"train={train}: the insertion tally holds {len(tally.inserted)} canaries, not the "
                         f"{tally.count} used of {included}; fix: delete the cache entry and rerun")


class AuditHook(dict):
    """``audit_hook`` for a training function (see the module docstring for the two contracts).

    Keys: ``included`` (0/1 per canary; their count is the canary count),
    ``coordinate_seed`` (which coordinates), ``sampling_seed`` (the per-step
    draws), ``norm_factor``, ``records`` (the training split's size, for the
    per-step cap) and ``cap`` (use only the first
    :func:`.white_box.per_step_cap` canaries, few enough per step that a
    per-batch clipping bug cannot dilute them).  ``tally`` (an
    attribute, no part of the cache key) records what the hook saw.
    """

    def __init__(self, included=(), *, seed: int, sampling_seed: int | None = None, records: int | None = None,
                 cap: bool = False, norm_factor: float = NORM_FACTOR) -> None:
        super().__init__(included=[int(bool(i)) for i in included], coordinate_seed=int(seed),
                         sampling_seed=int(seed if sampling_seed is None else sampling_seed),
                         norm_factor=float(norm_factor), records=None if records is None else int(records),
                         cap=bool(cap))
        self.tally = InsertionTally()
        self._params: list = []

    def fresh(self) -> "AuditHook":
        """The same hook with an empty tally (one per training)."""
        return type(self)(self["included"], seed=self["coordinate_seed"], sampling_seed=self["sampling_seed"],
                          records=self["records"], cap=self["cap"], norm_factor=self["norm_factor"])

    # --- white-box ---------------------------------------------------------------------------------------------------
    def attach(self, params, *, sample_rate: float, max_grad_norm: float) -> WhiteBoxSession:
        """Start the white-box contract of :mod:`.white_box`: ``params`` an ``nn.Module`` (its trainable named
        parameters) or a list of parameters (or ``(name, parameter)`` pairs); ``sample_rate`` the Poisson rate the
        accountant was told; ``max_grad_norm`` the clipping norm C."""
        if isinstance(max_grad_norm, bool) or not isinstance(max_grad_norm, (int, float)) or \
                not float(max_grad_norm) > 0.0 or not np.isfinite(float(max_grad_norm)):
            raise ValueError(f"audit_hook: max_grad_norm must be the clipping norm C > 0, got {max_grad_norm!r}")
        if isinstance(params, torch.nn.Module):
            named = [(name, p) for name, p in params.named_parameters() if p.requires_grad]
        else:
            named = []
            for i, item in enumerate(params):
                name, p = item if isinstance(item, tuple) else (None, item)
                if not isinstance(p, torch.Tensor):
                    raise TypeError(f"audit_hook.attach: params[{i}] is a {type(p).__name__}, not a tensor; fix: "
                                    "pass the model, or its trainable parameters")
                named.append((name, p))
        if not named:
            raise ValueError("audit_hook.attach: no trainable parameters; fix: pass the model being trained")
        self._told_rate(sample_rate)
        tally = self.tally
        tally.calls += 1
        tally.max_grad_norm = float(max_grad_norm)
        count = len(self["included"])
        if self["cap"]:
            count = per_step_cap(count, float(sample_rate), self["records"], self["norm_factor"])
        tally.count = count
        self._params = [p for _, p in named]
        return WhiteBoxSession(named, sample_rate=float(sample_rate), max_grad_norm=float(max_grad_norm),
                               count=count, included=self["included"], coordinate_seed=self["coordinate_seed"],
                               sampling_seed=self["sampling_seed"], norm_factor=self["norm_factor"], tally=tally)

    def __call__(self, optimizer: Any, *, sample_rate: float) -> WhiteBoxSession:
        from .opacus_hook import attach_dp_optimizer

        return attach_dp_optimizer(self, optimizer, sample_rate)

    def finish(self, module: torch.nn.Module | None) -> None:
        """After training: name the parameters from the returned module, drop references to them."""
        if module is not None and self._params:
            self.tally.name_parameters(module, self._params)
        self._params = []

    # --- batches, for the sampler audit ----------------------------------------------------------------------------
    def _told_rate(self, sample_rate) -> None:
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)) or \
                not 0.0 < float(sample_rate) <= 1.0:
            raise ValueError(f"audit_hook: sample_rate must be the Poisson sampling rate in (0, 1] the accountant "
                             f"was told, got {sample_rate!r}")
        self.tally.sample_rate = float(sample_rate)

    def record_batch(self, indices, *, population: int, sample_rate: float | None = None) -> None:
        """One step used the records ``indices`` (positions in the training data, 0 .. population - 1);
        ``sample_rate``: the rate the accountant was told, when the loop does not tell it otherwise."""
        if sample_rate is not None:
            self._told_rate(sample_rate)
        rows = np.asarray(torch.as_tensor(indices).detach().cpu().reshape(-1).numpy() if isinstance(
            indices, torch.Tensor) else indices, dtype=np.int64).reshape(-1)
        if isinstance(population, bool) or not isinstance(population, (int, np.integer)) or population < 1:
            raise ValueError(f"audit_hook.record_batch: population must be the number of training records, got "
                             f"{population!r}")
        if len(rows) and (rows.min() < 0 or rows.max() >= population):
            raise ValueError(f"audit_hook.record_batch: index {int(rows.max() if rows.max() >= population else rows.min())}"
                             f" is outside 0 .. {population - 1}; fix: pass positions in the training data")
        tally = self.tally
        if tally.population and tally.population != int(population):
            raise ValueError(f"audit_hook.record_batch: population {population} differs from the {tally.population} "
                             "of earlier steps; fix: pass the training split's size every time")
        tally.population = int(population)
        tally.batches.append(rows.tolist())
        tally.batch_calls += 1

    def watch_loader(self, loader, *, sample_rate: float | None = None):
        """A ``DataLoader`` yielding what ``loader`` yields, recording each batch's record indices;
        ``sample_rate``: the rate the accountant was told, when the loop does not tell it otherwise."""
        from .sampling import watched_loader

        if sample_rate is not None:
            self._told_rate(sample_rate)
        return watched_loader(loader, self)


#: The name the white-box audit used before issue 32 (its hook only held Dirac canaries).
DiracCanaryHook = AuditHook
