"""White-box exact ε for mechanisms whose output bits are independent given the input.

For inputs a, a' and output B, ln Pr[B|a]/Pr[B|a'] is a sum over bits, so the
largest privacy loss in the direction a -> a' is the sum over bits of the
larger of ln(p_i/p'_i) and ln((1-p_i)/(1-p'_i)); the pair's ε is the larger
of the two directions (adding absolute values across directions would
overstate it).  This is the ground truth the black-box bound is tested
against.  The paper's corrected bound for OME (hoho-attack-ome-ldp §3.2,
eq. 3-4) is λ^{rl} e^{ε/2}; it is computed here to show it is still below
the exact value for λ >= 10: at an odd bit the worst ratio is
q/p_odd = (1+λ^3)/(1+λ e^{ε/(rl)}), about λ^2, not λ e^{ε/(rl)}.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..finite import require_finite
from .mechanisms import FiniteDomain


def bit_probabilities(mechanism, inputs) -> np.ndarray:
    """The mechanism's ``bit_probabilities(inputs)``, refused unless finite and within [0, 1]."""
    probs = np.asarray(mechanism.bit_probabilities(inputs), dtype=np.float64)
    require_finite(probs, what=f"bit_probabilities of mechanism {type(mechanism).__name__}",
                   fix="return Pr[bit = 1 | input] as finite numbers in [0, 1]")
    if probs.size and (probs.min() < 0 or probs.max() > 1):
        raise ValueError(f"bit_probabilities of mechanism {type(mechanism).__name__} returned values outside [0, 1] "
                         f"(min {probs.min():.3g}, max {probs.max():.3g}); fix: return probabilities Pr[bit = 1]")
    return probs


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def directional_loss(probs_a: np.ndarray, probs_b: np.ndarray) -> np.ndarray:
    """Largest ln Pr[B|a]/Pr[B|b] per pair: ``[A, bits]``, ``[B, bits]`` -> ``[A, B]``.

    Decomposes over bits (independence); a bit that is certain under b but not
    under a gives +inf.
    """
    pa = np.asarray(probs_a, dtype=np.float64)[:, None, :]
    pb = np.asarray(probs_b, dtype=np.float64)[None, :, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        one = _log(pa) - _log(pb)
        zero = _log1m(pa) - _log1m(pb)
    per_bit = np.maximum(np.where(np.isnan(one), -np.inf, one), np.where(np.isnan(zero), -np.inf, zero))
    return per_bit.sum(axis=-1)


def _log1m(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log1p(-p)


def pair_epsilon(mechanism, a, b) -> float:
    """Exact ε of one pair: max over both directions of the largest privacy loss."""
    probs = bit_probabilities(mechanism, np.stack([np.asarray(a), np.asarray(b)]))
    loss = directional_loss(probs, probs)
    return float(max(loss[0, 1], loss[1, 0]))


@dataclass
class WorstCase:
    """Exact worst-case ε over the domain and a pair attaining it (a -> b direction)."""

    epsilon: float
    a: np.ndarray
    b: np.ndarray


def worst_case_epsilon(mechanism, inputs: np.ndarray | None = None, *, chunk: int = 512) -> WorstCase:
    """Exact ε = max over input pairs, for a bit-product mechanism.

    Candidates, in order of preference: ``inputs`` if given; else, when the
    mechanism exposes ``coordinate_candidates()`` and ``bits_per_coordinate``
    (OME), the per-coordinate maximum summed over coordinates (the loss
    separates over coordinates, so the worst pair takes the worst value in
    each); else every value of a finite domain.
    """
    if inputs is None and hasattr(mechanism, "coordinate_candidates"):
        return _separable_worst_case(mechanism)
    if inputs is None:
        if not isinstance(mechanism.domain, FiniteDomain):
            raise ValueError("worst_case_epsilon needs `inputs` (candidate inputs) for a continuous domain")
        inputs = mechanism.domain.values
    inputs = np.asarray(inputs)
    probs = bit_probabilities(mechanism, inputs)
    best, arg = -np.inf, (0, 1)
    for start in range(0, len(probs), chunk):
        loss = directional_loss(probs[start:start + chunk], probs)
        i, j = np.unravel_index(int(np.argmax(loss)), loss.shape)
        if loss[i, j] > best:
            best, arg = float(loss[i, j]), (start + i, j)
    return WorstCase(best, inputs[arg[0]], inputs[arg[1]])


def _separable_worst_case(mechanism) -> WorstCase:
    vals = np.asarray(mechanism.coordinate_candidates(), dtype=float)
    dim = int(mechanism.domain.dim)
    bits = int(mechanism.bits_per_coordinate)
    probs = bit_probabilities(mechanism, np.repeat(vals[:, None], dim, axis=1)).reshape(len(vals), dim, bits)
    total, a, b = 0.0, np.empty(dim), np.empty(dim)
    for j in range(dim):  # a handful of coordinates; each is a [C, C] matrix
        loss = directional_loss(probs[:, j], probs[:, j])
        i, k = np.unravel_index(int(np.argmax(loss)), loss.shape)
        total += float(loss[i, k])
        a[j], b[j] = vals[i], vals[k]
    return WorstCase(total, a, b)


def ome_corrected_bound(lam: float, epsilon: float, r: int, l: int) -> float:
    """ln of the paper's corrected bound λ^{rl} e^{ε/2} (hoho-attack-ome-ldp §3.2, eq. 3-4)."""
    return r * l * math.log(lam) + epsilon / 2.0
