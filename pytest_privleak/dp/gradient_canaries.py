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
can be called; it holds no other state, so a cached model scores the same.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["DiracCanaryHook", "dirac_scores", "NORM_FACTOR"]

#: A canary's gradient norm over the clipping norm: > 1, so that clipping binds (and its absence shows).
NORM_FACTOR = 10.0


class DiracCanaryHook(dict):
    """``audit_hook`` for a training function; see the module docstring for the protocol.

    Keys: ``coordinates`` (flat index into the concatenated trainable
    parameters, one per canary), ``included`` (0/1 per canary), ``seed`` (the
    per-step sampling draw) and ``norm_factor``.
    """

    def __init__(self, coordinates, included, *, seed: int, norm_factor: float = NORM_FACTOR) -> None:
        super().__init__(coordinates=[int(c) for c in coordinates], included=[int(bool(i)) for i in included],
                         seed=int(seed), norm_factor=float(norm_factor))

    def __call__(self, optimizer: Any, *, sample_rate: float) -> None:
        if not hasattr(optimizer, "clip_and_accumulate") or not hasattr(optimizer, "max_grad_norm"):
            raise TypeError(f"audit_hook was called with a {type(optimizer).__name__}, not an Opacus DPOptimizer; "
                            "fix: call audit_hook(optimizer, sample_rate=q) with the optimizer "
                            "PrivacyEngine.make_private returned")
        if not 0.0 < float(sample_rate) <= 1.0:
            raise ValueError(f"audit_hook: sample_rate must be the Poisson sampling rate in (0, 1], "
                             f"got {sample_rate!r}")
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
        original = optimizer.clip_and_accumulate

        def clip_and_accumulate() -> None:
            sampled = torch.rand(len(coords), generator=generator) < float(sample_rate)
            chosen = np.flatnonzero(sampled.numpy())
            if len(chosen):
                for index, p in enumerate(params):
                    rows = torch.zeros((len(chosen), *p.shape), dtype=p.dtype)
                    mine = np.flatnonzero(owner[chosen] == index)
                    if len(mine):
                        rows.view(len(chosen), -1)[torch.as_tensor(mine), torch.as_tensor(
                            coords[chosen][mine] - starts[index])] = height
                    grad_sample = optimizer._get_flat_grad_sample(p)
                    p.grad_sample = torch.cat([grad_sample, rows.to(grad_sample.device)])
            original()

        optimizer.clip_and_accumulate = clip_and_accumulate


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
