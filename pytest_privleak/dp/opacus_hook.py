"""Opacus's ``DPOptimizer`` through the white-box contract of :mod:`.white_box`, by its public methods only.

``audit_hook(optimizer, sample_rate=q)`` wraps three public methods of the
optimizer instance (bound methods, so a later wrapper such as torch's LR
scheduler still works):

- ``clip_and_accumulate``: ``p.grad_sample`` (a tensor, or Opacus's list of
  accumulated ones) goes through ``before_clipping`` first, so the canary rows
  are clipped by the optimizer's own clipping;
- ``add_noise``: ``p.summed_grad`` goes to ``before_noise`` first;
- ``scale_grad``: the noisy, scaled ``p.grad`` goes to ``after_noise`` after.

A logical step ends at ``add_noise``: under ``BatchMemoryManager`` the
physical batches of one Poisson batch each run ``clip_and_accumulate`` (the
canaries go in with the first) and only the last adds noise, so no private
flag (``_check_skip_next_step``) is read.  Parameters are the optimizer's
``params`` in its groups' order, for placing and for scoring alike.
"""
from __future__ import annotations

import types
from typing import Any

__all__ = ["attach_dp_optimizer", "is_dp_optimizer"]

_METHODS = ("clip_and_accumulate", "add_noise", "scale_grad")


def is_dp_optimizer(optimizer: Any) -> bool:
    return all(callable(getattr(optimizer, name, None)) for name in _METHODS) and hasattr(optimizer, "max_grad_norm") \
        and hasattr(optimizer, "params")


def _ghost_clipping(optimizer: Any) -> bool:
    return any("FastGradientClipping" in cls.__name__ for cls in type(optimizer).__mro__)


def attach_dp_optimizer(hook, optimizer: Any, sample_rate: float):
    """Wrap ``optimizer`` (an Opacus ``DPOptimizer``) so that each step goes through ``hook``'s session."""
    if _ghost_clipping(optimizer):
        raise TypeError(f"audit_hook was called with a {type(optimizer).__name__} (Opacus ghost clipping): its "
                        "step never clips materialised per-sample gradients, so no gradient canary could be "
                        "inserted; fix: audit a run of the same pipeline with grad_sample_mode='hooks' (the "
                        "default), or use threat_model='black-box'")
    if not is_dp_optimizer(optimizer):
        raise TypeError(f"audit_hook(optimizer, ...) was called with a {type(optimizer).__name__}, which has no "
                        "clip_and_accumulate / add_noise / scale_grad (an Opacus DPOptimizer has them); fix: for a "
                        "loop without Opacus use audit = audit_hook.attach(model, sample_rate=q, max_grad_norm=C) "
                        "and hand it each step's per-example gradients, clipped sum and update (see "
                        "pytest_privleak.dp.white_box)")
    params = list(optimizer.params)
    session = hook.attach(params, sample_rate=sample_rate, max_grad_norm=float(optimizer.max_grad_norm))
    clip, noise, scale = optimizer.clip_and_accumulate, optimizer.add_noise, optimizer.scale_grad

    def clip_and_accumulate(opt) -> None:
        grads = session.before_clipping([p.grad_sample for p in params])
        for p, g in zip(params, grads):
            p.grad_sample = g
        clip()

    def add_noise(opt) -> None:
        session.before_noise([p.summed_grad for p in params])
        noise()

    def scale_grad(opt) -> None:
        scale()
        session.after_noise([p.grad for p in params])

    optimizer.clip_and_accumulate = types.MethodType(clip_and_accumulate, optimizer)
    optimizer.add_noise = types.MethodType(add_noise, optimizer)
    optimizer.scale_grad = types.MethodType(scale_grad, optimizer)
    return session
