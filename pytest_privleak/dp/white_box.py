"""The framework-neutral white-box contract of the DP-SGD audit (issue 32): what a training loop hands the audit.

A DP-SGD step is: per-example gradients, each clipped to C and summed,
Gaussian noise of std σ·C added to the sum, the result scaled and applied
(Abadi et al. 2016, Algorithm 1).  The white-box auditor may add worst-case
gradients to any step (Nasr et al. 2023 §3; Steinke, Nasr, Jagielski 2023 §5),
so a loop that can be audited white-box hands the audit three things per
step, in this order::

    audit = audit_hook.attach(model, sample_rate=q, max_grad_norm=C)   # once, before the first step
    for each step:
        grads = per_example_grads(...)      # {name: [B, *shape]} (or a list in attach's order), before clipping
        grads = audit.before_clipping(grads)   # the audit's canary rows appended; call again per microbatch
        summed = clip_each_row_and_sum(grads)  # the sum the noise is added to
        audit.before_noise(summed)
        update = (summed + noise) / normaliser  # the noisy gradient the optimizer applies
        audit.after_noise(update)

Nothing framework-specific is needed: per-example gradients from
``torch.func``, microbatches or Opacus's ``grad_sample`` all work (Opacus goes
through this same contract: :mod:`.opacus_hook`).  Parameters are told once
(an ``nn.Module``: its trainable ``named_parameters``; or a list of tensors)
and every later call is matched to them by name or position in that one
order, so canaries are placed and scored in the same coordinates whatever
order an optimizer keeps its groups in.

What the audit does with them (:class:`WhiteBoxSession`):

- Dirac canaries: ``count`` coordinates drawn from the told parameters; each
  included canary (a fair coin, drawn by the audit) is sampled into each step
  with probability q, as a record would be, and appended as a per-example row
  that is zero except ``norm_factor · C`` at its coordinate (so clipping binds,
  and its absence shows).
- Scores: each canary's score is the sum over steps of the log-likelihood
  ratio of "sampled into this step" against "not", read from the noisy update
  at its coordinate (less the step's own rows' clipped share there) over the
  step's noise scale (what the released noisy gradients say about it:
  post-processing of the DP-SGD output, so any optimizer after it is allowed).
- Reach (no silent pass): at ``before_noise`` each inserted canary's share of
  the clipped sum is the sum at its coordinate minus what the step's own rows
  put there when each is clipped to C (exact where no row of the step touches
  the coordinate, whatever the clipping; elsewhere exact under per-sample
  clipping).  A clip step that drops the appended rows leaves exactly 0 at an
  untouched coordinate, where any clipping that keeps the row leaves a positive
  share (C per-sample, f·height when a per-batch clipping scales it by f).  A
  dropped canary (or, in a step whose canaries all share coordinates with its
  rows, a mean share near 0) is recorded with its step, and the audit refuses
  the training.
- Noise scale: the part of the update orthogonal to the clipped sum is the
  noise over the normaliser; its per-coordinate RMS ``σ·C / n_t`` and the
  projection ``1 / n_t`` are kept per step for the normalisation checks of
  :mod:`.sampling`.

How many canaries go into one step matters when clipping is per batch rather
than per sample: they share the batch's clipping budget (a norm of B·C for a
mean over B rows clipped to C) and, when the mean is taken over the rows
given, its denominator.  ``per_step_cap`` is the count at which about
``min(B, 4 (B / norm_factor)²)`` are sampled into a step (B = q · records, the
expected batch): neither dilutes a canary below half its height, so a
per-batch clipping bug shows (issue 32: with the default 2000, about 210 a
step in batches of 64, it passed); the audit runs that count beside the
default one, in a training of its own (Bonferroni over the two).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["WhiteBoxSession", "NORM_FACTOR", "DROPPED", "per_step_cap"]

#: A canary's gradient norm over the clipping norm: > 1, so that clipping binds (and its absence shows).
NORM_FACTOR = 10.0
#: A canary at a coordinate no row of its step touches reached the clipped sum when its share there (over C) is
#: above this: exactly 0 when the clip step dropped its row, C under per-sample clipping, f·height under any
#: clipping that scales the row by f > 0 (per-batch clipping included).
DROPPED = 1e-6
#: The same for a step whose every canary shares its coordinate with the step's rows: their mean share.
DENSE_DROPPED = 1e-2
#: A canary at a coordinate no row of its step touches, clipped on its own to C, leaves exactly C (share 1) in the
#: clipped sum; a share below 1 by more than this means the clip step shrinks a record's effect below what the
#: white-box bound models, which would then under-read the training (above 1, as under per-batch clipping, the
#: canaries move the update more than modelled and the bound still catches it).
PER_EXAMPLE_TOLERANCE = 1e-2
#: Fewest canaries the audit picks when it caps the count for dilution (below, the one-run bound is weak).
MIN_CAPPED = 100


def per_step_cap(count: int, sample_rate: float, records: int | None, norm_factor: float = NORM_FACTOR) -> int:
    """How many of ``count`` canaries to use so that about ``k = min(B, 4 (B / norm_factor)²)`` are sampled per
    step (half are included, each sampled at q): ``2 k / q``, at least :data:`MIN_CAPPED`."""
    if not records:
        return count
    expected_batch = sample_rate * records
    per_step = min(expected_batch, 4.0 * (expected_batch / norm_factor) ** 2)
    return int(min(count, max(MIN_CAPPED, int(2.0 * per_step / sample_rate))))


def _flat(tensor: Any, what: str) -> torch.Tensor:
    if isinstance(tensor, (list, tuple)):   # Opacus keeps the grad_sample of accumulated backward passes in a list
        tensor = torch.cat(list(tensor), dim=0)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a tensor, got {type(tensor).__name__}")
    return tensor


class WhiteBoxSession:
    """One training's side of the contract (see the module docstring); made by ``audit_hook.attach``."""

    def __init__(self, named: list[tuple[str | None, torch.Tensor]], *, sample_rate: float, max_grad_norm: float,
                 count: int, included: Sequence[int], coordinate_seed: int, sampling_seed: int, norm_factor: float,
                 tally) -> None:
        self.names = [name for name, _ in named]
        self.params = [p for _, p in named]
        self.shapes = [tuple(p.shape) for p in self.params]
        self.sizes = np.array([p.numel() for p in self.params], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])
        total = int(self.starts[-1])
        if count > total:
            raise ValueError(f"{count} gradient canaries need {count} distinct coordinates, but the parameters given "
                             f"to the audit hold only {total}; fix: pass fewer canaries")
        self.q, self.c, self.height = float(sample_rate), float(max_grad_norm), float(norm_factor) * float(max_grad_norm)
        rng = np.random.default_rng([0xD17AC, int(coordinate_seed)])
        self.coords = np.sort(rng.choice(total, size=count, replace=False)).astype(np.int64) if count else \
            np.zeros(0, dtype=np.int64)
        self.owner = np.searchsorted(self.starts, self.coords, side="right") - 1
        self.offset = self.coords - self.starts[self.owner]
        self.included = np.flatnonzero(np.asarray(included[:count], dtype=bool))
        self.generator = torch.Generator().manual_seed(int(sampling_seed))
        self.tally = tally
        tally.coordinates = [[int(o), int(f)] for o, f in zip(self.owner, self.offset)]
        tally.shapes = [list(s) for s in self.shapes]
        tally.names = list(self.names)
        tally.scores = np.zeros(count, dtype=np.float64)
        tally.sums = np.zeros(count, dtype=np.float64)
        tally.inserted = np.zeros(count, dtype=np.int64)
        self._open = False
        self._stage = "after_noise"   # the last call made

    # --- the three calls -------------------------------------------------------------------------------------------
    def before_clipping(self, grads):
        """``grads``: per-example gradients before clipping, ``[rows, *shape]`` per parameter (a dict by name or a
        list in ``attach``'s order).  Returns the same with the canary rows of this step appended (on the first
        call of a step; later calls of the same step, its other microbatches, are passed through)."""
        tensors = self._unpack(grads, "before_clipping", per_example=True)
        rows = int(tensors[0].shape[0])
        if not self._open:
            self._open_step()
        self._rows += rows
        if len(self.coords):
            share, touched = self._clipped_at_canaries(tensors, rows)
            self._data_all += share
            self._touched_all |= touched
        if not self._open_insert:
            return self._pack(grads, tensors)
        self._open_insert = False
        chosen = self._chosen
        out = []
        for index, g in enumerate(tensors):
            extra = torch.zeros((len(chosen), int(self.sizes[index])), dtype=g.dtype, device=g.device)
            mine = np.flatnonzero(self.owner[chosen] == index)
            if len(mine):
                extra[torch.as_tensor(mine), torch.as_tensor(self.offset[chosen][mine])] = self.height
            out.append(torch.cat([g, extra.view(len(chosen), *self.shapes[index])], dim=0))
        self.tally.insertion_steps += 1
        return self._pack(grads, out)

    def before_noise(self, summed) -> None:
        """``summed``: the clipped sum of this step (what the Gaussian noise of std σ·C is added to)."""
        tensors = self._unpack(summed, "before_noise", per_example=False)
        if not self._open:
            self._fail("before_noise came without before_clipping: no per-example rows reached this step, so no "
                       "canary could be inserted (a clip step that bypasses the hook)")
            self._open_step()
        self._stage = "before_noise"
        self._summed = self._flatten(tensors)
        chosen = self._chosen
        if len(chosen):
            # a canary's share: the sum at its coordinate less what the step's own rows put there clipped to C. Exact
            # whatever the clipping where no row of the step touches the coordinate; elsewhere exact under
            # per-sample clipping, and its error averages out over the step's canaries under other clippings
            share = (self._summed[self.coords[chosen]] - self._data_all[chosen]) / self.c
            self.tally.min_share = min(self.tally.min_share, float(share.min()))
            clean = share[~self._touched_all[chosen]]
            dropped = int(np.sum(clean <= DROPPED))
            if dropped or (not len(clean) and float(share.mean()) <= DENSE_DROPPED):
                where = (f"{dropped} of the {len(clean)} canaries inserted before clipping at coordinates no row of "
                         f"the step touches left {np.round(np.sort(clean)[:3], 6).tolist()}·C in the clipped sum"
                         if len(clean) else f"the {len(chosen)} canaries inserted before clipping left "
                                            f"{float(share.mean()):.3g}·C on average in the clipped sum")
                self._fail(f"{where} (any clipping that keeps a row leaves a positive share; per-sample clipping "
                           "leaves C): the clip step dropped the rows the hook appended (e.g. it keeps only its own "
                           "batch's rows)")
            off = clean[clean < 1.0 - PER_EXAMPLE_TOLERANCE]
            if len(off):
                self._fail(f"{len(off)} of the {len(clean)} canaries inserted before clipping at coordinates no row "
                           f"of the step touches left {np.round(off[:3], 4).tolist()}·C in the clipped sum, less than "
                           "the 1·C that clipping each row to C on its own leaves: the clip step does not clip per "
                           "example to the max_grad_norm the audit was told (per-layer clipping, a micro-batch's "
                           "summed gradient clipped as one unit, another norm), and the white-box bound, which "
                           "models per-example clipping (Abadi et al. 2016), would read such a training as private "
                           "whatever its noise (a held-out probe's noise-free micro-batch loop read 0.0); fix: clip "
                           "each example's whole gradient to C and tell attach/audit_hook that C, or audit this "
                           "training black-box (threat_model=\"black-box\")")

    def after_noise(self, update) -> None:
        """``update``: the noisy gradient the optimizer applies this step (any constant scale)."""
        tensors = self._unpack(update, "after_noise", per_example=False)
        if self._stage != "before_noise":
            self._fail("after_noise came without before_noise: the clipped sum of this step was not shown to the "
                       "audit")
            self._summed = None
        flat = self._flatten(tensors)
        t = self.tally
        t.inserted[self._chosen] += 1
        t.rows.append(int(self._rows))
        s = self._summed
        if s is not None and float(s @ s) > 0.0 and len(flat) > 1:
            x = float(flat @ s) / float(s @ s)
            residual = flat - x * s
            rms = float(np.sqrt(residual @ residual / (len(flat) - 1)))
        else:
            x, rms = float("nan"), float(np.sqrt(flat @ flat / max(1, len(flat))))
        t.inverse_normaliser.append(x)
        t.noise_rms.append(rms)
        if len(self.coords):
            t.sums += flat[self.coords]
            t.scores += self._step_evidence(flat[self.coords], x, rms)
        t.steps += 1
        self._open = False
        self._stage = "after_noise"

    # --- helpers ---------------------------------------------------------------------------------------------------
    def _step_evidence(self, update: np.ndarray, x: float, rms: float) -> np.ndarray:
        """This step's log-likelihood ratio, per canary, of "sampled into the step" (probability q) against "not".

        The update at the canary's coordinate less the step's own rows' share there clipped to C (the auditor may
        know every other record) and over the noise RMS is N(h, 1) when the canary went in and N(0, 1) when not,
        h = C / (n_t RMS), the shift of a canary clipped to C: the white-box adversary sees every noisy update
        (Nasr et al. 2023), and summing this over steps weighs the steps a canary went into above the noise of the
        others.  Without a normaliser estimate (no clipped sum shown) the update itself is the evidence."""
        if not np.isfinite(x) or x <= 0.0:
            return update
        scale = max(rms, 1e-12 * float(np.max(np.abs(update))), 1e-300)
        z = (update - x * self._data_all) / scale
        h = self.c * x / scale
        with np.errstate(over="ignore"):
            return np.logaddexp(np.log1p(-min(self.q, 1.0 - 1e-12)), np.log(self.q) + h * z - 0.5 * h * h)

    def _open_step(self) -> None:
        sampled = torch.rand(len(self.included), generator=self.generator) < self.q
        self._chosen = self.included[sampled.numpy()]
        self._data_all = np.zeros(len(self.coords))
        self._touched_all = np.zeros(len(self.coords), dtype=bool)
        self._rows = 0
        self._open = True
        self._open_insert = True
        self._stage = "before_clipping"

    def _fail(self, why: str) -> None:
        if self.tally.failure is None:
            self.tally.failure = f"step {self.tally.steps + 1}: {why}"

    def _flatten(self, tensors: list[torch.Tensor]) -> np.ndarray:
        return torch.cat([t.detach().reshape(-1).double().cpu() for t in tensors]).numpy()

    def _clipped_at_canaries(self, tensors: list[torch.Tensor], rows: int) -> tuple[np.ndarray, np.ndarray]:
        """What this call's own rows put at every canary's coordinate when each row is clipped to C, and whether
        any of them is non-zero there."""
        if rows == 0:
            return np.zeros(len(self.coords)), np.zeros(len(self.coords), dtype=bool)
        flat = [g.detach().reshape(rows, -1).double().cpu() for g in tensors]
        norms = torch.sqrt(sum(f.pow(2).sum(1) for f in flat))
        factor = (self.c / (norms + 1e-6)).clamp(max=1.0)
        out = np.zeros(len(self.coords))
        touched = np.zeros(len(self.coords), dtype=bool)
        for index, f in enumerate(flat):
            mine = np.flatnonzero(self.owner == index)
            if len(mine):
                columns = f[:, torch.as_tensor(self.offset[mine])]
                out[mine] = (factor @ columns).numpy()
                touched[mine] = (columns != 0).any(0).numpy()
        return out, touched

    def _unpack(self, value, call: str, *, per_example: bool) -> list[torch.Tensor]:
        if isinstance(value, Mapping):
            if any(name is None for name in self.names):
                raise TypeError(f"{call}: got a dict, but attach was given unnamed parameters; fix: pass a list in "
                                "the order given to attach, or attach(model) to match by name")
            missing = [name for name in self.names if name not in value]
            if missing:
                raise ValueError(f"{call}: no tensor for parameter(s) {missing[:3]} told to attach; fix: pass one "
                                 "entry per trainable parameter, named as model.named_parameters() names them")
            tensors = [_flat(value[name], f"{call}[{name!r}]") for name in self.names]
        else:
            try:
                tensors = [_flat(v, f"{call}[{i}]") for i, v in enumerate(value)]
            except TypeError as exc:
                raise TypeError(f"{call} takes a dict of tensors by parameter name or a list in attach's order: "
                                f"{exc}") from None
            if len(tensors) != len(self.params):
                raise ValueError(f"{call}: got {len(tensors)} tensors for the {len(self.params)} parameters told to "
                                 "attach; fix: one per parameter, in attach's order")
        for i, (t, shape) in enumerate(zip(tensors, self.shapes)):
            got = tuple(t.shape[1:]) if per_example else tuple(t.shape)
            if got != shape and not (not per_example and t.numel() == int(np.prod(shape))):
                what = "per-example rows [rows, *shape]" if per_example else "the parameter's shape"
                raise ValueError(f"{call}: parameter {self.names[i] or i} has shape {shape}, got {tuple(t.shape)}; "
                                 f"fix: pass {what}")
        if per_example and len({int(t.shape[0]) for t in tensors}) > 1:
            raise ValueError(f"{call}: the parameters' per-example tensors hold different numbers of rows "
                             f"{[int(t.shape[0]) for t in tensors]}; fix: one row per example for every parameter")
        return tensors

    def _pack(self, original, tensors: list[torch.Tensor]):
        if isinstance(original, Mapping):
            out = dict(original)
            out.update(zip(self.names, tensors))
            return out
        return type(original)(tensors) if isinstance(original, tuple) else list(tensors)
