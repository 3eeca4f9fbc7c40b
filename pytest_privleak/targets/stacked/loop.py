"""The epoch loop of k stacked models: :func:`..training.fit`, each model with its own everything.

What :func:`~pytest_privleak.targets.training.fit` does for one model, this
does for k at once, model j as if it trained alone:

* its data order from ``torch.Generator().manual_seed(seeds[j])`` (a shuffle
  per epoch cut in ``batch_size`` chunks) over its own ``train_items[j]``;
* its dropout and word dropout from its own generator (:class:`.params.Noise`);
* one forward and backward for all models: the loss summed over models of
  each model's mean per-example loss, so each model's gradient is its own;
* its gradient clipped by its own norm, its own Adam/SGD state, the same
  learning-rate schedule ``lr / (1 + lr_decay * epoch)``;
* its validation loss per epoch (evaluation mode, no noise), its early
  stopping (patience, best weights restored) and its history; a model that
  stops leaves the stack, the others go on.

Models trained together must have the same stacked parameter shapes (the
vocabulary-sized ones padded, :mod:`.plan`) and the same number of training
items (the same number of steps per epoch); :func:`.plan.stack_groups` groups them so.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..training import TrainingHistory, _Progress
from .params import (Noise, clip_per_model, load_model_state, make_stacked_optimizer, model_state,
                     narrow_optimizer, stack_parameters)
from .plan import stacked_shapes

#: ``loss(params, batch, noise) -> [k, B]`` per-example losses; ``noise`` is None in evaluation mode.
StackedLoss = Callable[[dict, Any, "Noise | None"], torch.Tensor]


def fit_stacked(
    nets: Sequence[torch.nn.Module],
    loss_fn: StackedLoss,
    train_sets: Sequence[Any],
    valid_sets: Sequence[Any],
    take: Callable[[Sequence[Any], Sequence[torch.Tensor]], Any],
    *,
    seeds: Sequence[int],
    noise_seeds: Sequence[int],
    epochs: int,
    batch_size: int,
    lr: float,
    device: torch.device,
    names: Sequence[str],
    early_stopping: bool = False,
    patience: int = 20,
    grad_clip: float | None = None,
    progress: bool = True,
    eval_batch_size: int = 1024,
    optimizer: str = "adam",
    momentum: float = 0.0,
    lr_decay: float = 0.0,
    after_backward: Callable[[dict], None] | None = None,
    before_validation: Callable[[dict, Sequence[int]], None] | None = None,
    on_epoch: Callable[[int, dict, dict], None] | None = None,
    vocabulary_sized: Sequence[str] = (),
    padding_fill: dict[str, float] | None = None,
) -> list[TrainingHistory]:
    """Train ``nets`` (k same-shaped networks, initialised) together; their final weights are written back.

    ``train_sets[j]`` / ``valid_sets[j]``: model j's data, anything with a
    ``len``; ``take(sets, rows)`` stacks one batch on the model axis, model
    j's the items ``rows[j]`` (a long tensor of indices) of ``sets[j]``. ``after_backward(params)`` may edit gradients
    (e.g. zero a padding row); ``before_validation(params, models)`` may edit
    weights before each validation pass (``models``: the index in ``nets`` of
    each stacked row); ``on_epoch(j, state, row)`` gets model j's weights after
    each epoch (padded rows included: :func:`.params.load_model_state` cuts
    them). ``vocabulary_sized``: parameters whose rows are padded in the
    stack (:mod:`.plan`), their padded rows set to ``padding_fill[name]``
    (default 0). Returns each model's :class:`TrainingHistory`.
    """
    k = len(nets)
    if not (len(train_sets) == len(valid_sets) == len(seeds) == len(noise_seeds) == len(names) == k):
        raise ValueError("fit_stacked needs one train split, valid split, seed, noise seed and name per model")
    sizes = {len(items) for items in train_sets}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"stacked models need non-empty training splits of one size, got {sorted(sizes)}")
    if early_stopping and not all(len(items) for items in valid_sets):
        raise ValueError("early_stopping=True needs a validation split; the dataset's valid split is empty")
    n = sizes.pop()
    orders = [torch.Generator().manual_seed(int(s)) for s in seeds]
    noise = Noise(noise_seeds, device)
    shapes = {}
    for name, each in _transpose([stacked_shapes(net, vocabulary_sized) for net in nets]).items():
        if len(set(each)) != 1:
            raise ValueError(f"stacked models need one stacked shape of {name}, got {sorted(set(each))}")
        shapes[name] = each[0]
    params = stack_parameters(nets, shapes, padding_fill)
    step = make_stacked_optimizer(optimizer, params, lr=lr, momentum=momentum)
    active = list(range(k))                      # model index (in nets) of each stacked row
    histories = [TrainingHistory() for _ in range(k)]
    best_loss, best_state, stale = [math.inf] * k, [None] * k, [0] * k
    reports = [_Progress(names[j], epochs, progress, early_stopping) for j in range(k)]
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        tick = time.perf_counter()
        for group in step.param_groups:
            group["lr"] = lr / (1.0 + lr_decay * epoch)
        perms = [torch.randperm(n, generator=orders[j]) for j in active]
        totals = torch.zeros(len(active), dtype=torch.float64)
        for i in range(0, n, batch_size):
            batch = take([train_sets[j] for j in active], [perm[i:i + batch_size] for perm in perms])
            losses = loss_fn(params, batch, noise)                                        # [k, B]
            step.zero_grad(set_to_none=True)
            losses.mean(dim=1).sum().backward()
            if after_backward is not None:
                after_backward(params)
            if grad_clip:
                clip_per_model(params, grad_clip)
            step.step()
            totals += losses.detach().double().sum(dim=1).cpu()
        valid = _valid_losses(params, loss_fn, take, [valid_sets[j] for j in active], eval_batch_size,
                              before_validation, active)
        seconds = time.perf_counter() - tick
        stopping: list[int] = []
        for row, j in enumerate(active):
            record = {"epoch": epoch, "train_loss": float(totals[row]) / n, "valid_loss": valid[row],
                      "seconds": seconds}
            history = histories[j]
            history.epochs.append(record)
            improved = valid[row] is not None and valid[row] < best_loss[j]
            if improved:
                best_loss[j], stale[j], history.best_epoch = valid[row], 0, epoch
                if early_stopping:
                    best_state[j] = model_state(params, row)
            else:
                stale[j] += 1
            reports[j].epoch(record, improved)
            if on_epoch is not None:
                on_epoch(j, model_state(params, row), record)
            history.stopped_epoch = epoch
            if early_stopping and stale[j] >= patience:
                history.stopped_early = True
                stopping.append(row)
        for row in stopping:
            j = active[row]
            load_model_state(nets[j], best_state[j] if best_state[j] is not None else model_state(params, row))
        if stopping:
            keep = [row for row in range(len(active)) if row not in stopping]
            if not keep:
                active = []
                break
            params, step = narrow_optimizer(optimizer, step, params, keep, lr=lr, momentum=momentum)
            noise.narrow(keep)
            active = [active[row] for row in keep]
    for row, j in enumerate(active):
        state = best_state[j] if early_stopping and best_state[j] is not None else model_state(params, row)
        load_model_state(nets[j], state)
    elapsed = time.perf_counter() - start
    for j, history in enumerate(histories):
        if not len(valid_sets[j]):
            history.best_epoch = history.stopped_epoch
        history.seconds = elapsed
        nets[j].eval()
    return histories


def _transpose(shapes: Sequence[dict]) -> dict[str, list]:
    """``[{name: shape}]`` -> ``{name: [shape, ...]}``; one shape per name in a group (:func:`.plan.stack_groups`)."""
    out: dict[str, list] = {}
    for one in shapes:
        for name, shape in one.items():
            out.setdefault(name, []).append(shape)
    return out


@torch.no_grad()
def _valid_losses(params: dict, loss_fn: StackedLoss, take, valid_sets: Sequence[Any], chunk: int,
                  before_validation, active: Sequence[int]) -> list[float | None]:
    """Mean per-example validation loss of each stacked model (None for a model without a validation split)."""
    if before_validation is not None:
        before_validation(params, active)
    sizes = [len(items) for items in valid_sets]
    if not any(sizes):
        return [None] * len(valid_sets)
    if len(set(sizes)) == 1:
        size = sizes[0]
        totals = torch.zeros(len(valid_sets), dtype=torch.float64)
        for i in range(0, size, chunk):
            rows = torch.arange(i, min(i + chunk, size))
            totals += loss_fn(params, take(valid_sets, [rows] * len(valid_sets)), None).double().sum(dim=1).cpu()
        return [float(t) / size for t in totals]
    out: list[float | None] = []               # valid splits of different sizes: one model at a time
    for row, (items, size) in enumerate(zip(valid_sets, sizes)):
        if not size:
            out.append(None)
            continue
        one = {name: p[row:row + 1] for name, p in params.items()}
        total = 0.0
        for i in range(0, size, chunk):
            total += float(loss_fn(one, take([items], [torch.arange(i, min(i + chunk, size))]), None).double().sum())
        out.append(total / size)
    return out
