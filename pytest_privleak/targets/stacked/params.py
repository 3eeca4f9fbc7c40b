"""Stacked parameters of k same-shaped networks and what each model keeps of its own.

* :func:`stack_parameters` / :func:`unstack_into`: per-model ``nn.Module``
  parameters to leaf tensors ``[k, *shape]`` and back (names unchanged, so the
  per-model network is the one the attacks and the cache know).
* :class:`Noise`: a ``torch.Generator`` per model for dropout and word
  dropout, so a model's draws do not depend on the models stacked with it.
* :func:`clip_per_model`: ``torch.nn.utils.clip_grad_norm_`` per model (each
  model's own total norm over all its parameters).
* :func:`make_stacked_optimizer` / :func:`narrow_optimizer`: torch's Adam or
  SGD over the stacked tensors (both elementwise, so each model's update is its
  own), and the same optimiser restricted to the models still training when
  one stops early.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..training import make_optimizer


def stack_parameters(nets: Sequence[nn.Module], shapes: dict[str, Sequence[int]] | None = None,
                     fill: dict[str, float] | None = None) -> dict[str, torch.Tensor]:
    """``{name: [k, *shape]}`` leaf tensors (requiring grad) of the parameters of ``nets``, in ``nets`` order.

    ``shapes``: the stacked shape of a parameter whose models' values are
    smaller (:func:`.plan.stacked_shapes`); each value is placed at the start
    of its rows, the rest is ``fill[name]`` (default 0).
    """
    out = {}
    for name, _ in nets[0].named_parameters():
        values = [net.get_parameter(name).detach() for net in nets]
        shape = tuple((shapes or {}).get(name, values[0].shape))
        stacked = values[0].new_full((len(values), *shape), (fill or {}).get(name, 0.0))
        for j, value in enumerate(values):
            stacked[(j, *(slice(0, n) for n in value.shape))] = value
        out[name] = stacked.requires_grad_(True)
    return out


@torch.no_grad()
def model_state(params: dict[str, torch.Tensor], index: int) -> dict[str, torch.Tensor]:
    """Model ``index``'s stacked parameters as a state dict (copies, padded rows included)."""
    return {name: p[index].detach().clone() for name, p in params.items()}


@torch.no_grad()
def load_model_state(net: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy ``state`` (a :func:`model_state`) into ``net``, each parameter cut to its own shape."""
    missing = {name for name, _ in net.named_parameters()} - set(state)
    if missing:
        raise KeyError(f"no stacked value for parameter(s) {sorted(missing)}")
    for name, value in state.items():
        target = net.get_parameter(name)
        target.copy_(value[tuple(slice(0, n) for n in target.shape)])


class Noise:
    """Dropout and word-dropout draws, each model from its own generator, stacked on the model axis.

    ``seeds[j]`` seeds model j's generator (on ``device``); a model draws the
    same masks whichever models it is stacked with. :meth:`narrow` keeps the
    generators of the models still training.
    """

    def __init__(self, seeds: Sequence[int], device: torch.device) -> None:
        self.device = torch.device(device)
        self.generators = [torch.Generator(device=self.device).manual_seed(int(s)) for s in seeds]

    def narrow(self, keep: Sequence[int]) -> None:
        self.generators = [self.generators[i] for i in keep]

    def uniform(self, shape: Sequence[int]) -> torch.Tensor:
        """``[k, *shape]`` uniform draws in [0, 1), row j from model j's generator."""
        return torch.stack([torch.rand(tuple(shape), generator=g, device=self.device) for g in self.generators])

    def dropout(self, x: torch.Tensor, p: float) -> torch.Tensor:
        """Inverted dropout of ``x [k, ...]`` with probability ``p``, as ``torch.nn.functional.dropout``:
        a Bernoulli(1 - p) mask per model from its generator, scaled by ``1 / (1 - p)``."""
        if p == 0.0:
            return x
        masks = torch.stack([torch.empty(x.shape[1:], device=x.device).bernoulli_(1.0 - p, generator=g)
                             for g in self.generators])
        return x * masks.div_(1.0 - p)


def noise_seed() -> int:
    """A seed drawn from torch's global RNG: called right after a model's seeded initialisation, it gives the
    model's noise generator a stream of its own (not the data-order stream, which is seeded by the seed itself)."""
    return int(torch.randint(0, 2 ** 62, (), dtype=torch.long))


@torch.no_grad()
def clip_per_model(params: dict[str, torch.Tensor], max_norm: float) -> None:
    """Scale each model's gradients so that their total 2-norm is at most ``max_norm``, as
    ``clip_grad_norm_`` does for one model: ``coef = min(1, max_norm / (norm + 1e-6))``.

    Each model's norm is the root of the sum, over its parameters, of their
    squared norms, each a reduction over that model's row alone (a reduction
    across the model axis would take another path for one model than for seven).
    """
    grads = [p.grad for p in params.values() if p.grad is not None]
    if not grads:
        return
    total = None
    for g in grads:
        square = torch.linalg.vector_norm(g.flatten(1), 2.0, dim=1) ** 2                   # [k]
        total = square if total is None else total + square
    coef = torch.clamp(max_norm / (total.sqrt() + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))


def make_stacked_optimizer(name: str, params: dict[str, torch.Tensor], *, lr: float,
                           momentum: float = 0.0) -> torch.optim.Optimizer:
    """The target's optimiser (:func:`..training.make_optimizer`) over the stacked parameters."""
    return make_optimizer(name, list(params.values()), lr=lr, momentum=momentum)


def narrow_optimizer(name: str, optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor],
                     keep: Sequence[int], *, lr: float, momentum: float = 0.0
                     ) -> tuple[dict[str, torch.Tensor], torch.optim.Optimizer]:
    """The stacked parameters and optimiser restricted to the models ``keep`` (their per-model state kept)."""
    index = torch.tensor(list(keep), dtype=torch.long)
    narrowed = {n: p.detach()[index.to(p.device)].clone().requires_grad_(True) for n, p in params.items()}
    fresh = make_stacked_optimizer(name, narrowed, lr=lr, momentum=momentum)
    for old, new in zip(params.values(), narrowed.values()):
        state = optimizer.state.get(old)
        if not state:
            continue
        fresh.state[new] = {key: (value[index.to(value.device)].clone()
                                  if torch.is_tensor(value) and value.dim() > 0 else
                                  value.clone() if torch.is_tensor(value) else value)
                            for key, value in state.items()}
    for group, old_group in zip(fresh.param_groups, optimizer.param_groups):
        group["lr"] = old_group["lr"]
    return narrowed, fresh
