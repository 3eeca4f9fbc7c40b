"""Which input pairs the auditor attacks: user pairs, DP-Sniper-style patterns, and pairs found by probing.

Two probes, both on samples independent of the final estimate (so the
search can look at as many pairs as it likes without a union bound):

- the domain probe (continuous or large domains): mean outputs at the
  domain's ends, middle and random points; the widest pairs (largest summed
  per-coordinate log-odds distance for bits, standardised distance
  otherwise) are candidates.  For bit encoders these are near bitwise
  complements, the witnesses of the largest leaks.
- the full screen (finite domains up to ``full_search`` inputs): EVERY input
  is drawn ``per_input`` times and tested against the pooled outputs of all
  inputs (a chi-square statistic on the output means, and on the squares
  for real outputs).  An input whose outputs differ from the rest, such as
  the one input of a hundred a mechanism leaks at, stands out however few
  pairs a random probe would have drawn; the most deviating inputs are
  attacked with their farthest partners.  DP-Sniper tries given pairs only;
  this is our addition for gates on small finite domains.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import cdist

from ..finite import require_finite
from .classifier import OVERFLOW_FIX
from .mechanisms import BoxDomain
from .sampling import CHUNK_ELEMENTS, checked

#: Finite domains up to this many inputs are screened in full by default.
FULL_SEARCH_MAX = 1000
#: Numbers (inputs x draws x width) the full screen may draw; draws per input follow from it.
SCREEN_ELEMENTS = 1 << 25


@dataclass
class Candidates:
    """Pairs to attack, in priority order, and a sentence saying how they were found."""

    pairs: list[tuple[np.ndarray, np.ndarray, str]] = field(default_factory=list)
    coverage: str = ""
    inputs_screened: int = 0
    domain_size: int | None = None
    samples_drawn: int = 0
    _seen: set = field(default_factory=set)

    def add(self, a, b, source: str) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape == b.shape and np.array_equal(a, b):
            return False
        key = frozenset([(a.dtype.str, a.tobytes()), (b.dtype.str, b.tobytes())])
        if key in self._seen:
            return False
        self._seen.add(key)
        self.pairs.append((a, b, source))
        return True


def _moments(mechanism, inputs: np.ndarray, per_input: int, rng, who: str, clock=None):
    """Per-input output means (and means of squares), pooled sums, and whether all outputs are 0/1 (chunked)."""
    first = checked(mechanism(np.repeat(inputs[:1], 1, axis=0), rng), 1, who)
    width = first.shape[1]
    per_chunk = max(1, CHUNK_ELEMENTS // max(1, per_input * width))
    means = np.empty((len(inputs), width))
    squares = np.empty((len(inputs), width))
    binary = True
    for start in range(0, len(inputs), per_chunk):
        block = inputs[start:start + per_chunk]
        batch = np.repeat(block, per_input, axis=0)
        out = checked(mechanism(batch, rng), len(batch), who).reshape(len(block), per_input, width)
        binary = binary and bool(np.all((out == 0) | (out == 1)))
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused just below, with the fix
            means[start:start + len(block)] = out.mean(axis=1, dtype=np.float64)
            if binary:  # 0/1 outputs: the mean of squares is the mean
                squares[start:start + len(block)] = means[start:start + len(block)]
            else:
                squares[start:start + len(block)] = np.square(out, dtype=np.float64).mean(axis=1)
        require_finite(squares[start:start + len(block)], fix=OVERFLOW_FIX,
                       what=f"the mean squared outputs of mechanism {who} (pair search)")
        if clock is not None:
            clock.advance(len(batch), "search (probe)")
    return means, squares, binary


def _features(means: np.ndarray, squares: np.ndarray, binary: bool, per_input: int) -> np.ndarray:
    """Per-input features whose L1 distance tracks the privacy loss: log-odds for bits, standardised means else."""
    if binary:
        sm = (means * per_input + 0.5) / (per_input + 1)
        return np.log(sm) - np.log1p(-sm)  # log-odds: distance ~ sum of per-bit log-ratios
    pooled_sd = np.sqrt(np.maximum(squares.mean(0) - means.mean(0) ** 2, 0.0))
    return means / np.maximum(pooled_sd, 1e-12)


def _add_widest(found: Candidates, probes: np.ndarray, feats: np.ndarray, widest: int) -> None:
    dist = cdist(feats, feats, metric="cityblock")
    order = np.argsort(-dist, axis=None, kind="stable")
    added = 0
    for flat in order[: 50 * widest]:
        i, j = np.unravel_index(flat, dist.shape)
        added += found.add(probes[i], probes[j], "widest")
        if added >= widest:
            break


def _patterns(domain, anchors: np.ndarray, found: Candidates) -> None:
    if isinstance(domain, BoxDomain):
        by_value = {float(v[0]): v for v in anchors}
        lo, hi, mid = domain.low, domain.high, (domain.low + domain.high) / 2
        for u, v in ((lo, hi), (1.0, 0.0), (1.0, 2.0), (lo, mid), (mid, hi)):
            if u in by_value and v in by_value:
                found.add(by_value[u], by_value[v], "pattern")
    else:
        found.add(anchors[0], anchors[1], "pattern")
        found.add(anchors[0], anchors[-1], "pattern")


def probe_pairs(mechanism, rng: np.random.Generator, *, user=(), probe_points: int = 256, probe_samples: int = 64,
                widest: int = 6, who: str = "", clock=None) -> Candidates:
    """User pairs, DP-Sniper-style patterns, and the widest pairs found by probing the domain."""
    domain = mechanism.domain
    found = Candidates()
    for a, b in user:
        found.add(a, b, "user")
    anchors = np.asarray(domain.anchors())
    _patterns(domain, anchors, found)
    probes = np.concatenate([anchors, np.asarray(domain.sample(probe_points, rng))])
    means, squares, binary = _moments(mechanism, probes, probe_samples, rng, who, clock)
    _add_widest(found, probes, _features(means, squares, binary, probe_samples), widest)
    size = None if isinstance(domain, BoxDomain) else len(domain.values)
    found.domain_size = size
    found.inputs_screened = len(probes)
    found.samples_drawn = len(probes) * probe_samples
    where = "the box" if size is None else f"the {size}-input domain"
    found.coverage = (f"probe of {len(anchors)} anchors and {probe_points} random points of {where} "
                      f"({probe_samples} outputs each); {len(found.pairs)} candidate pairs")
    if size is not None:
        found.coverage += (f"; a leak confined to inputs outside the probe can be missed (the domain exceeds the "
                           f"full search of {FULL_SEARCH_MAX} inputs: pass full_search={size} to screen every input)")
    return found


def screen_pairs(mechanism, rng: np.random.Generator, *, user=(), top: int = 4, widest: int = 3,
                 max_per_input: int = 2000, who: str = "", clock=None) -> Candidates:
    """Every input of a finite domain screened as a pair member; the most deviating ones and the widest pairs."""
    domain = mechanism.domain
    values = np.asarray(domain.values)
    k = len(values)
    found = Candidates()
    for a, b in user:
        found.add(a, b, "user")
    _patterns(domain, values, found)
    width = checked(mechanism(values[:1], rng), 1, who).shape[1]
    per_input = int(np.clip(SCREEN_ELEMENTS // max(1, k * width), 64, max_per_input))
    means, squares, binary = _moments(mechanism, values, per_input, rng, who, clock)
    pooled = means.mean(0)
    if binary:  # chi-square on the bit frequencies: n Σ_d (p_i,d - p̄_d)^2 / (p̄_d (1 - p̄_d))
        var = pooled * (1.0 - pooled)
        moments, pooled_moments = means, pooled
    else:  # the same on the first two moments, standardised by their pooled spread
        moments = np.concatenate([means, squares], axis=1)
        pooled_moments = moments.mean(0)
        var = moments.var(0)
    var = np.maximum(var, 1.0 / (per_input * k))
    z = (moments - pooled_moments) / np.sqrt(var)
    deviation = per_input * (z ** 2).sum(axis=1)
    ranked = np.argsort(-deviation, kind="stable")
    feats = _features(means, squares, binary, per_input)
    for i in ranked[:top]:
        far_z = ((z - z[i]) ** 2).sum(axis=1)  # farthest in the screen's own (chi-square) geometry
        far_l1 = np.abs(feats - feats[i]).sum(axis=1)  # farthest in summed log-odds (bits) / standardised means
        for j in dict.fromkeys((int(np.argmax(far_z)), int(np.argmax(far_l1)))):
            found.add(values[i], values[j], "screen")
    if k * k * feats.shape[1] <= (1 << 31):
        _add_widest(found, values, feats, widest)
    found.domain_size = k
    found.inputs_screened = k
    found.samples_drawn = k * per_input
    found.coverage = (f"every input of the {k}-input domain screened as a pair member ({per_input} outputs each, "
                      f"chi-square against the pooled outputs); the {min(top, k)} most deviating attacked with their "
                      f"farthest partners; {len(found.pairs)} candidate pairs")
    return found
