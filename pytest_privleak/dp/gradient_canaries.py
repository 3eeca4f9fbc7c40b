"""White-box Dirac gradient canaries (Nasr et al. 2023 §3; Steinke, Nasr and Jagielski 2023 §5, white-box).

In the white-box threat model the auditor may add arbitrary gradients to
training, as a worst-case training example could.  A Dirac canary is a
gradient that is zero except in one coordinate of one parameter; the auditor
scores it by how far the final model moved along that coordinate.  Canaries
are included with probability 1/2 (as in the one-run audit) and, once
included, sampled into each step with the loader's sampling rate, exactly as
a training record would be.

The hook protocol (what a training function must do to be audited white-box):

    def train(dataset, seed, ..., audit_hook=None):
        ...                                    # build model, optimizer, DP engine
        if audit_hook is not None:
            audit_hook(optimizer, sample_rate=q)   # q: the Poisson sampling rate
        ...                                    # train as usual

``optimizer`` is the Opacus ``DPOptimizer`` (per-sample gradients in
``p.grad_sample``, then ``clip_and_accumulate``, ``add_noise``,
``scale_grad``).  The hook zeroes each canary's coordinate (a worst-case
initial value the auditor knows) and, at every step, appends one per-sample
gradient row per sampled canary before clipping: the row has
``norm_factor * max_grad_norm`` in the canary's coordinate, so correct
clipping cuts it to C and broken clipping does not.  Parameters are the
optimizer's ``params`` in order (those of ``module.parameters()`` that require
gradients); the score is ``-θ_final[coordinate]`` (gradient descent moves it
down).

The hook is a ``dict`` (its JSON spec is part of the target cache key) that
can be called.  Beside the spec it keeps an :class:`InsertionTally`: how many
times it was called, how many optimizer steps ran and in how many of them its
wrapped ``clip_and_accumulate`` really inserted canary rows, and how often each
canary went in.  The audit stores the tally with the cached training and
refuses (:func:`check_insertions`) a training in which the canaries never
reached an optimizer step: a ``train`` that takes ``audit_hook`` but never
calls it, a hook given an optimizer that training does not step, or an
optimizer whose step skips ``clip_and_accumulate`` (Opacus ghost clipping,
``DPOptimizerFastGradientClipping``, refused by name as well).  Otherwise the
scores would be the untouched initial weights, and an audit of them passes any
claim.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["DiracCanaryHook", "InsertionTally", "check_insertions", "dirac_scores", "NORM_FACTOR"]

#: A canary's gradient norm over the clipping norm: > 1, so that clipping binds (and its absence shows).
NORM_FACTOR = 10.0


@dataclass
class InsertionTally:
    """What a :class:`DiracCanaryHook` did during one training (JSON-safe; stored with the cached training).

    ``calls``: times the hook was called; ``steps``: optimizer steps taken
    through the hooked optimizer; ``insertion_steps``: steps in which the
    wrapped ``clip_and_accumulate`` ran (and could insert canaries);
    ``inserted``: per included canary (in canary order), the steps it was
    inserted in; ``sample_rate``: the rate it was sampled at.
    """

    calls: int = 0
    steps: int = 0
    insertion_steps: int = 0
    inserted: Any = field(default_factory=list)
    sample_rate: float = 0.0

    def to_json(self) -> dict:
        return {"calls": self.calls, "steps": self.steps, "insertion_steps": self.insertion_steps,
                "inserted": [int(n) for n in self.inserted], "sample_rate": float(self.sample_rate)}

    @classmethod
    def from_json(cls, data: Any) -> "InsertionTally":
        """The tally stored with a cached training; ValueError when it is not one."""
        try:
            tally = cls(int(data["calls"]), int(data["steps"]), int(data["insertion_steps"]),
                        [int(n) for n in data["inserted"]], float(data["sample_rate"]))
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not an insertion tally: {data!r} ({exc})") from exc
        return tally

    def describe(self) -> str:
        total = int(np.sum(self.inserted)) if len(self.inserted) else 0
        return (f"audit_hook called {self.calls}x; canaries inserted in {self.insertion_steps} of {self.steps} "
                f"optimizer steps, {total} canary gradients in all (sampling rate {self.sample_rate:.4g})")


def check_insertions(tally: InsertionTally, *, train: str, included: int) -> None:
    """Refuse a training whose gradient canaries did not reach its optimizer steps (see the module docstring).

    The audit reads each canary's coordinate from the final weights: when no
    canary went in, those are the (zeroed) initial values moved only by the
    data, the guesses are coin flips, and the audit would pass any claim.
    ``included``: how many canaries the hook was told to include.
    """
    protocol = ("call audit_hook(optimizer, sample_rate=q) once, with the DPOptimizer that "
                "PrivacyEngine.make_private returned, after any change to the optimizer and before the first "
                "step, and step that optimizer")
    if tally.calls == 0:
        raise ValueError(f"train={train} takes audit_hook but never called it, so no gradient canary reached "
                         f"training and the white-box audit would read the untouched initial weights (it would "
                         f"pass any claim); fix: {protocol} (see pytest_privleak.dp.gradient_canaries), or drop "
                         "the audit_hook parameter and audit threat_model='black-box'")
    if tally.calls > 1:
        raise ValueError(f"train={train} called audit_hook {tally.calls} times in one training: each call wraps "
                         f"the optimizer again and inserts every canary more often than its sampling rate says; "
                         f"fix: {protocol}")
    if tally.steps == 0 or tally.insertion_steps < tally.steps:
        raise ValueError(f"train={train}: the gradient canaries reached only {tally.insertion_steps} of the "
                         f"{tally.steps} optimizer steps of the optimizer given to audit_hook ({tally.describe()}); "
                         "the white-box audit needs them in every step (the optimizer's clip_and_accumulate, which "
                         "the hook wraps, must run in each step; Opacus ghost clipping skips it, and a step of "
                         f"another optimizer is not seen); fix: {protocol}, without grad_sample_mode='ghost'")
    if len(tally.inserted) != included:
        raise ValueError(f"train={train}: the insertion tally holds {len(tally.inserted)} canaries, not the "
                         f"{included} included; fix: delete the cache entry and rerun")


def _ghost_clipping(optimizer: Any) -> bool:
    return any("FastGradientClipping" in cls.__name__ for cls in type(optimizer).__mro__)


class DiracCanaryHook(dict):
    """``audit_hook`` for a training function; see the module docstring for the protocol.

    Keys: ``coordinates`` (flat index into the concatenated trainable
    parameters, one per canary), ``included`` (0/1 per canary), ``seed`` (the
    per-step sampling draw) and ``norm_factor``.  ``tally`` (an attribute, not
    a key: it is no part of the cache key) records what the hook did.
    """

    def __init__(self, coordinates, included, *, seed: int, norm_factor: float = NORM_FACTOR) -> None:
        super().__init__(coordinates=[int(c) for c in coordinates], included=[int(bool(i)) for i in included],
                         seed=int(seed), norm_factor=float(norm_factor))
        self.tally = InsertionTally(inserted=[0] * int(sum(self["included"])))

    def fresh(self) -> "DiracCanaryHook":
        """The same hook with an empty tally (one per training)."""
        return DiracCanaryHook(self["coordinates"], self["included"], seed=self["seed"],
                               norm_factor=self["norm_factor"])

    def __call__(self, optimizer: Any, *, sample_rate: float) -> None:
        if not hasattr(optimizer, "clip_and_accumulate") or not hasattr(optimizer, "max_grad_norm"):
            raise TypeError(f"audit_hook was called with a {type(optimizer).__name__}, not an Opacus DPOptimizer; "
                            "fix: call audit_hook(optimizer, sample_rate=q) with the optimizer "
                            "PrivacyEngine.make_private returned")
        if _ghost_clipping(optimizer):
            raise TypeError(f"audit_hook was called with a {type(optimizer).__name__} (Opacus ghost clipping): its "
                            "step never runs clip_and_accumulate on per-sample gradients, so no gradient canary "
                            "could be inserted; fix: audit a run of the same pipeline with grad_sample_mode='hooks' "
                            "(the default), or use threat_model='black-box'")
        if not 0.0 < float(sample_rate) <= 1.0:
            raise ValueError(f"audit_hook: sample_rate must be the Poisson sampling rate in (0, 1], "
                             f"got {sample_rate!r}")
        tally = self.tally
        tally.calls += 1
        tally.sample_rate = float(sample_rate)
        params = list(optimizer.params)
        sizes = [p.numel() for p in params]
        starts = np.cumsum([0] + sizes)
        every = np.asarray(self["coordinates"], dtype=np.int64)
        if len(every) and every.max() >= starts[-1]:
            raise ValueError(f"audit_hook: coordinate {every.max()} is beyond the optimizer's "
                             f"{starts[-1]} trainable parameters")
        with torch.no_grad():  # every canary's coordinate starts at 0, included or not
            for c, o in zip(every, np.searchsorted(starts, every, side="right") - 1):
                params[o].view(-1)[c - starts[o]] = 0.0
        coords = every[np.asarray(self["included"], dtype=bool)]
        owner = np.searchsorted(starts, coords, side="right") - 1
        generator = torch.Generator().manual_seed(self["seed"])
        height = self["norm_factor"] * float(optimizer.max_grad_norm)
        original_clip, original_step = optimizer.clip_and_accumulate, optimizer.step
        counts = np.zeros(len(coords), dtype=np.int64)
        tally.inserted = counts  # filled in place, step by step

        def clip_and_accumulate(opt) -> None:
            if opt._check_skip_next_step(pop_next=False):
                # a physical batch inside one logical (Poisson) batch, as under Opacus's BatchMemoryManager: its
                # step is skipped and its gradients accumulate; canaries go in once, at the logical step's end
                # (inserted at every physical batch, a correct pipeline read eps_lcb 4.8 at a claim of 2)
                original_clip()
                return
            sampled = torch.rand(len(coords), generator=generator) < float(sample_rate)
            chosen = np.flatnonzero(sampled.numpy())
            if len(chosen):
                for index, p in enumerate(params):
                    rows = torch.zeros((len(chosen), *p.shape), dtype=p.dtype)
                    mine = np.flatnonzero(owner[chosen] == index)
                    if len(mine):
                        rows.view(len(chosen), -1)[torch.as_tensor(mine), torch.as_tensor(
                            coords[chosen][mine] - starts[index])] = height
                    grad_sample = opt._get_flat_grad_sample(p)
                    p.grad_sample = torch.cat([grad_sample, rows.to(grad_sample.device)])
            original_clip()
            counts[chosen] += 1
            tally.insertion_steps += 1

        def step(opt, *args, **kwargs):
            if not opt._check_skip_next_step(pop_next=False):   # logical steps only (see clip_and_accumulate)
                tally.steps += 1
            return original_step(*args, **kwargs)

        # bound methods, so that a later wrapper (torch's LR scheduler reads step.__func__) still works
        optimizer.clip_and_accumulate = types.MethodType(clip_and_accumulate, optimizer)
        optimizer.step = types.MethodType(step, optimizer)


def trainable_size(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def pick_coordinates(module: torch.nn.Module, m: int, seed: int) -> np.ndarray:
    """``m`` distinct flat coordinates of ``module``'s trainable parameters, a seeded draw."""
    total = trainable_size(module)
    if m > total:
        raise ValueError(f"{m} gradient canaries need {m} distinct coordinates, but the model has only {total} "
                         "trainable parameters; fix: pass fewer canaries")
    return np.sort(np.random.default_rng([0xD17AC, int(seed)]).choice(total, size=m, replace=False))


def dirac_scores(module: torch.nn.Module, coordinates) -> np.ndarray:
    """``-θ[coordinate]`` for each canary: how far gradient descent moved the zeroed coordinate down."""
    flat = torch.cat([p.detach().reshape(-1).cpu() for p in module.parameters() if p.requires_grad])
    return -flat[torch.as_tensor(np.asarray(coordinates, dtype=np.int64))].double().numpy()
