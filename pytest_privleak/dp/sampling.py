"""Exact tests that a DP-SGD loop samples and normalises as its accountant assumes (issue 32, item 4).

The accountants of DP-SGD (the subsampled Gaussian mechanism: Abadi et al.
2016; Mironov, Talwar, Zhang 2019) assume Poisson sampling: at every step
each of the N records joins the batch independently with probability q,
the same q the accountant was told, and the noisy sum is scaled by a
constant that does not depend on the data.  Samplers that break it are what
DP-SGD users report (opacus 80: shuffled fixed-size batches; opacus 813 and
600: ``WeightedRandomSampler``; opacus 571 and 819: a normaliser that moves
with the batch or the dataset size), and the white-box canaries, which the
audit samples itself, cannot see them.  Annamalai et al. (arXiv 2411.10614)
measure shuffling under-reporting ε by up to 4x; Lebeda et al.
(arXiv 2405.20769) find sampling without replacement at Poisson's parameters
gives ε > 10 where Poisson gives about 1.

Given the records each of T steps used (:func:`watched_loader`, or the
loop's own ``audit_hook.record_batch``), every test below is exact under that
null hypothesis (independent Bernoulli(q) inclusions): its statistic is a
binomial count whose law follows from it alone, with two-sided p-values.

- once per step: no record twice in one batch (probability 0 under Poisson);
- sampling rate: all inclusions, Binomial(N·T, q);
- batch sizes: the steps whose size lies in the central half of
  Binomial(N, q), Binomial(T, p) (fixed-size batches put every step in it,
  or none), and the disjoint pairs of steps (0, 1), (2, 3), ... of equal size,
  Binomial(⌊T/2⌋, Σ_k P(k)²) (fixed sizes make every pair equal);
- equal per-record frequencies: the records whose inclusion count lies in
  the central half of Binomial(T, q), Binomial(N, p) (shuffled epochs make
  every count equal; a weighted sampler spreads them), and the largest count,
  P(max >= x) = 1 - F(x - 1)^N;
- independent steps: records in both batches of the disjoint pairs of steps
  (0, 1), (2, 3), ..., Binomial(N·⌊T/2⌋, q²) (an epoch's shuffled batches are
  disjoint).

Normalisation (from the white-box contract's per-step noise scale, see
:mod:`.white_box`): the noise's per-coordinate RMS is σ·C / n_t, n_t the
normaliser; with P coordinates its log has variance 1 / (2(P - 1)).

- within a run, n_t must not follow the batch size: the slope of log RMS on
  log(batch size) is 0, a z-test with that known variance (normalising by the
  actual batch size gives a slope of -1: opacus 571);
- across neighbouring datasets (one record removed, one added), the mean log
  RMS must not move by more than its noise and an eighth of one record's share
  of the normaliser (opacus 819: Opacus 1.0-1.6 divide by int(N·q), which moves
  with N; a sampling rate computed as B / N moves σ by about 0.2 % a record at
  N = 300, B = 64, within that tolerance, and less on more data).

The p-values are combined by Bonferroni; the verdict is the smallest
adjusted one against 1 - confidence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, norm

__all__ = ["Property", "sampling_properties", "within_run_normalisation", "neighbour_normalisation",
           "watched_loader", "central_set"]


@dataclass(frozen=True)
class Property:
    """One tested property: its name, two-sided p-value (None: not tested), and what was measured."""

    name: str
    p_value: float | None
    measured: str

    def verdict(self, level: float) -> str:
        if self.p_value is None:
            return "not tested"
        return "FAIL" if self.p_value <= level else "ok"


def two_sided(k: int, n: int, p: float) -> float:
    """Two-sided exact binomial p-value: twice the smaller tail, at most 1."""
    if n == 0:
        return 1.0
    low, high = binom.cdf(k, n, p), binom.sf(k - 1, n, p)
    return float(min(1.0, 2.0 * min(low, high)))


def central_set(n: int, p: float) -> tuple[int, int, float]:
    """The narrowest interval [lo, hi] around the mode of Binomial(n, p) holding at least half the mass, and
    that mass: the "central half" the tests count into."""
    mode = int(math.floor((n + 1) * p))
    mode = min(max(mode, 0), n)
    lo = hi = mode
    mass = float(binom.pmf(mode, n, p))
    while mass < 0.5:
        left = float(binom.pmf(lo - 1, n, p)) if lo > 0 else -1.0
        right = float(binom.pmf(hi + 1, n, p)) if hi < n else -1.0
        if right >= left:
            hi += 1
            mass += right
        else:
            lo -= 1
            mass += left
    return lo, hi, mass


def sampling_properties(batches, population: int, q: float) -> list[Property]:
    """The exact tests of the module docstring on the recorded ``batches`` (record indices per step)."""
    n, t = int(population), len(batches)
    sizes = np.array([len(b) for b in batches], dtype=np.int64)
    included = np.zeros((t, n), dtype=bool)
    repeats = 0
    for step, rows in enumerate(batches):
        rows = np.asarray(rows, dtype=np.int64)
        repeats += len(rows) - len(np.unique(rows))
        included[step, rows] = True
    out = []
    first = next((s for s, b in enumerate(batches) if len(b) != len(set(np.asarray(b).tolist()))), None)
    out.append(Property("each record at most once per step", 0.0 if repeats else 1.0,
                        f"{repeats} repeated records in one batch (first at step {first + 1})" if repeats
                        else "no record twice in a batch"))
    total = int(sizes.sum())
    measured = total / (n * t)
    out.append(Property("sampling rate", two_sided(total, n * t, q),
                        f"accounted q {q:.4g}, measured {measured:.4g} ({total} inclusions in {t} steps of {n} "
                        f"records; expected {n * t * q:.1f})"))
    lo, hi, mass = central_set(n, q)
    inside = int(np.sum((sizes >= lo) & (sizes <= hi)))
    pairs = t // 2
    same = int(np.sum(sizes[0:2 * pairs:2] == sizes[1:2 * pairs:2]))
    tie = float(np.sum(binom.pmf(np.arange(n + 1), n, q) ** 2))   # P(two independent sizes are equal)
    p_sizes = min(1.0, 2.0 * min(two_sided(inside, t, mass), two_sided(same, pairs, tie)))
    spread = f"sizes {sizes.min()}..{sizes.max()}" if t else "no steps"
    out.append(Property("batch sizes Binomial(N, q)", p_sizes,
                        f"{inside} of {t} batch sizes in {lo}..{hi} (Binomial({n}, {q:.4g}) puts {mass:.3f} there); "
                        f"{same} of {pairs} disjoint pairs of steps of equal size (expected {pairs * tie:.1f}); "
                        f"{spread}, sd {sizes.std():.2f} against {math.sqrt(n * q * (1 - q)):.2f}"))
    counts = included.sum(0)
    lo, hi, mass = central_set(t, q)
    inside = int(np.sum((counts >= lo) & (counts <= hi)))
    top = int(counts.max()) if n else 0
    p_max = float(1.0 - binom.cdf(top - 1, t, q) ** n) if top > 0 else 1.0
    out.append(Property("equal per-record frequencies", min(1.0, 2.0 * min(two_sided(inside, n, mass), p_max)),
                        f"{inside} of {n} records included {lo}..{hi} times in {t} steps (Binomial({t}, {q:.4g}) "
                        f"puts {mass:.3f} there); most often {top} times (P = {p_max:.3g} under Poisson)"))
    pairs = t // 2
    if pairs:
        both = int(np.sum(included[0:2 * pairs:2] & included[1:2 * pairs:2]))
        out.append(Property("independent steps", two_sided(both, n * pairs, q * q),
                            f"{both} records in both batches of {pairs} disjoint pairs of steps (expected "
                            f"{n * pairs * q * q:.1f} under independence)"))
    else:
        out.append(Property("independent steps", None, "fewer than 2 steps recorded"))
    return out


def _clean(values) -> np.ndarray:
    return np.asarray([v for v in values], dtype=np.float64)


def within_run_normalisation(rows, noise_rms, coordinates: int) -> Property:
    """Slope of log noise RMS on log batch size (0 when the normaliser is a constant); see the module doc."""
    rms, size = _clean(noise_rms), _clean(rows)
    name = "normaliser independent of the batch"
    if len(rms) < 3 or coordinates < 3:
        return Property(name, None, "fewer than 3 steps through the white-box contract")
    if not np.all(rms > 0):
        return Property(name, None, "no noise in the update (σ = 0): the normaliser cannot be read from it")
    keep = size > 0
    x, y = np.log(size[keep]), np.log(rms[keep])
    sxx = float(np.sum((x - x.mean()) ** 2))
    if len(x) < 3 or sxx == 0.0:
        return Property(name, None, "every batch the same size: a normaliser by the batch size would not show")
    slope = float(np.sum((x - x.mean()) * (y - y.mean())) / sxx)
    se = math.sqrt(1.0 / (2.0 * (coordinates - 1)) / sxx)
    p = float(2.0 * norm.sf(abs(slope / se)))
    return Property(name, p, f"noise scale ~ (batch size)^{slope:.3f} ± {se:.3f} over {len(x)} steps (0 for a "
                             "constant normaliser, -1 when dividing by the actual batch size)")


def neighbour_normalisation(runs: dict[str, tuple[list, int]], coordinates: int, expected_batch: float) -> Property:
    """Mean log noise RMS of the run on the data against runs on neighbouring data (see the module docstring).

    ``runs``: label -> (noise RMS per step, population); the first is the data itself."""
    name = "normaliser independent of the dataset size"
    items = list(runs.items())
    if len(items) < 2 or coordinates < 3:
        return Property(name, None, "no neighbouring run through the white-box contract")
    (_, (base, n_base)), rest = items[0], items[1:]
    base = _clean(base)
    if len(base) == 0 or not np.all(base > 0):
        return Property(name, None, "no noise in the update (σ = 0): the normaliser cannot be read from it")
    tolerance = 0.125 * math.log1p(1.0 / max(expected_batch, 1.0))
    worst_p, shown = 1.0, []
    for other_label, (other, n_other) in rest:
        other = _clean(other)
        if len(other) == 0 or not np.all(other > 0):
            continue
        diff = float(np.mean(np.log(other)) - np.mean(np.log(base)))
        se = math.sqrt(1.0 / (2.0 * (coordinates - 1)) * (1.0 / len(base) + 1.0 / len(other)))
        beyond = max(0.0, abs(diff) - tolerance)
        p = float(2.0 * norm.sf(beyond / se)) if beyond > 0 else 1.0
        worst_p = min(worst_p, p)
        shown.append(f"{other_label} (N = {n_other}): noise scale x{math.exp(diff):.4f} (± {se:.4f}; tolerance "
                     f"{tolerance:.4f})")
    return Property(name, min(1.0, worst_p * max(1, len(shown))),
                    f"against the data (N = {n_base}): " + "; ".join(shown))


class _RecordingBatches:
    """A batch sampler that records each batch it hands out."""

    def __init__(self, inner, hook, population: int) -> None:
        self.inner, self.hook, self.population = inner, hook, population

    def __iter__(self):
        for batch in self.inner:
            self.hook.record_batch(list(batch), population=self.population)
            yield batch

    def __len__(self) -> int:
        return len(self.inner)


def watched_loader(loader, hook):
    """A ``DataLoader`` over ``loader``'s dataset and batch sampler (any sampler: Opacus's Poisson one, a
    ``WeightedRandomSampler``, shuffling) with the same collate function, recording each batch in ``hook``.

    Batches are recorded when the batch sampler hands them out; with worker processes that is ahead of
    training by the prefetch depth, so audit with ``num_workers=0`` (the default)."""
    from torch.utils.data import DataLoader

    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is None:
        raise TypeError(f"audit_hook.watch_loader needs a DataLoader that batches through a batch sampler, got "
                        f"{type(loader).__name__} without one; fix: pass the DataLoader training iterates, or "
                        "report each step with audit_hook.record_batch(indices, population=N)")
    population = len(loader.dataset)
    return DataLoader(loader.dataset, batch_sampler=_RecordingBatches(batch_sampler, hook, population),
                      collate_fn=loader.collate_fn, num_workers=loader.num_workers, pin_memory=loader.pin_memory,
                      timeout=loader.timeout, worker_init_fn=loader.worker_init_fn, generator=loader.generator)
