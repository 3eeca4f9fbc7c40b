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

**Lanes.** On the CPU a stack's arithmetic grows with k (the recurrence is
one fused kernel per model, at one core's compute limit with the targets'
shapes), so a process with more than one core splits the stack into
``lanes`` smaller stacks that train at once, each in its own thread (torch
releases the GIL inside its kernels; each kernel runs on one core, as the
targets' one torch thread asks). A model's weights do not depend on the
models it is stacked with, so they do not depend on the lanes either
(``tests/test_stacked_lanes.py``). The default is the trainings this process
may run at once (:func:`pytest_privleak.targets.parallel.current`, which the
plugin sets from ``--privleak-train-processes``: the cores this process may
use); 1 outside pytest and on a GPU, where one stack is the fast way.
"""
from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    lanes: int | None = None,
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
    (default 0). ``lanes``: stacks trained at once in threads (None: see the
    module's docstring). Returns each model's :class:`TrainingHistory`.
    """
    k = len(nets)
    if not (len(train_sets) == len(valid_sets) == len(seeds) == len(noise_seeds) == len(names) == k):
        raise ValueError("fit_stacked needs one train split, valid split, seed, noise seed and name per model")
    lanes = min(default_lanes(device) if lanes is None else _checked_lanes(lanes), k)
    options = dict(loss_fn=loss_fn, take=take, epochs=epochs, batch_size=batch_size, lr=lr, device=device,
                   early_stopping=early_stopping, patience=patience, grad_clip=grad_clip, progress=progress,
                   eval_batch_size=eval_batch_size, optimizer=optimizer, momentum=momentum, lr_decay=lr_decay,
                   after_backward=after_backward, vocabulary_sized=vocabulary_sized, padding_fill=padding_fill)
    if lanes <= 1:
        return _fit_one_stack(nets, train_sets, valid_sets, seeds=seeds, noise_seeds=noise_seeds, names=names,
                              before_validation=before_validation, on_epoch=on_epoch, **options)
    chunks = [list(range(k))[lane::lanes] for lane in range(lanes)]

    def lane(members: list[int]) -> list[TrainingHistory]:
        validation = None if before_validation is None else (
            lambda params, models: before_validation(params, [members[m] for m in models]))
        epoch_hook = None if on_epoch is None else (lambda j, state, row: on_epoch(members[j], state, row))
        return _fit_one_stack([nets[j] for j in members], [train_sets[j] for j in members],
                              [valid_sets[j] for j in members], seeds=[seeds[j] for j in members],
                              noise_seeds=[noise_seeds[j] for j in members], names=[names[j] for j in members],
                              before_validation=validation, on_epoch=epoch_hook, **options)

    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="privleak-stack-lane") as pool:
        futures = [pool.submit(contextvars.copy_context().run, lane, members) for members in chunks]
        results = [future.result() for future in futures]
    histories: list[TrainingHistory | None] = [None] * k
    for members, result in zip(chunks, results):
        for j, history in zip(members, result):
            histories[j] = history
    return histories


def default_lanes(device: torch.device | str) -> int:
    """Stacks to train at once: the trainings this process may run at once on the CPU, 1 on a GPU."""
    if torch.device(device).type != "cpu":
        return 1
    from ..parallel import current

    return current().processes


def _checked_lanes(lanes: object) -> int:
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes={lanes!r} must be an integer >= 1 (1: one stack) or None (the cores this process "
                         "may use)")
    return lanes


def _fit_one_stack(nets, train_sets, valid_sets, *, loss_fn, take, seeds, noise_seeds, epochs, batch_size, lr,
                   device, names, early_stopping, patience, grad_clip, progress, eval_batch_size, optimizer,
                   momentum, lr_decay, after_backward, before_validation, on_epoch, vocabulary_sized,
                   padding_fill) -> list[TrainingHistory]:
    """:func:`fit_stacked` for one stack, in this thread."""
    k = len(nets)
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
