"""LiRA, the likelihood-ratio attack of Carlini et al. 2022 ("Membership inference attacks from first principles").

For each candidate record ``x`` the attacker trains reference ("shadow")
models with and without ``x`` and fits a Gaussian to the statistic each
reference gives ``x`` (§IV-B, Algorithm 1). The statistic is the
logit-scaled confidence ``phi(p) = log(p / (1 - p))`` (§IV-B, "logit
scaling"), which makes the per-record distributions close to Gaussian; for a
classifier ``p`` is the probability of the true label, ``exp(-loss)``.

- online (§IV-B): ``log N(phi; mu_in, s_in^2) - log N(phi; mu_out, s_out^2)``,
  each record's own ``mu_in`` (mean over references trained on it) and
  ``mu_out`` (over references trained without it);
- offline (§IV-C): only references trained without ``x``: a one-sided test,
  ``(phi - mu_out) / s_out`` (higher = member). The paper's score is
  ``Phi`` of it; the z-value ranks the same and keeps its resolution in the tail.
- variance: per record, or one global variance over all records (§VI-A: with
  few reference models the per-record estimate is too noisy and a global one
  attacks better). ``variance="auto"`` takes the global one below
  :data:`PER_RECORD_MIN_REFERENCES` references.

Everything is batched over records (``[K, N]`` arrays: K references, N records).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...finite import require_finite

#: below this many references (in or out, per record) ``variance="auto"`` uses the global variance
PER_RECORD_MIN_REFERENCES = 64
#: the variance floor, relative to the global variance, so a record whose references agree exactly stays finite
VARIANCE_FLOOR = 1e-6


def logit_confidence(losses: np.ndarray) -> np.ndarray:
    """``phi(p) = log p - log(1 - p)`` for ``p = exp(-loss)`` (Carlini et al. §IV-B), computed from the loss.

    ``log(1 - p) = log(-expm1(-loss))`` keeps full float64 resolution for a
    loss near 0 (a memorised record), where ``1 - p`` would round to 0; a
    loss of exactly 0 (``p = 1``) is clipped to the smallest positive float64.
    """
    loss = np.asarray(losses, dtype=np.float64)
    if np.any(loss < 0):
        raise ValueError("logit scaling needs losses >= 0 (the negative log-probability of the true label), "
                         f"got a minimum of {loss.min():.6g}; fix: pass lira_statistic='loss' for a score that is "
                         "not a negative log-probability")
    loss = np.maximum(loss, np.finfo(np.float64).tiny)
    return -loss - np.log(-np.expm1(-loss))


@dataclass(frozen=True)
class GaussianFit:
    """Per-record means and variances of the in and out statistics (``nan`` where a side has no reference)."""

    mu_in: np.ndarray
    var_in: np.ndarray
    mu_out: np.ndarray
    var_out: np.ndarray
    variance: str          # "per-record" or "global"


def _masked_mean(stats: np.ndarray, mask: np.ndarray) -> np.ndarray:
    count = mask.sum(axis=0)
    total = np.where(mask, stats, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _masked_var(stats: np.ndarray, mask: np.ndarray, mean: np.ndarray) -> np.ndarray:
    count = mask.sum(axis=0)
    squares = np.where(mask, (stats - np.nan_to_num(mean)) ** 2, 0.0).sum(axis=0)
    return np.where(count > 1, squares / np.maximum(count - 1, 1), np.nan)


def _global_var(stats: np.ndarray, mask: np.ndarray) -> float:
    """Variance of all statistics on one side pooled over records and references (ddof 1)."""
    values = stats[mask]
    return float(np.var(values, ddof=1)) if values.size > 1 else float("nan")


def fit_gaussians(ref_stats: np.ndarray, in_mask: np.ndarray, variance: str = "auto") -> GaussianFit:
    """Fit LiRA's in / out Gaussians per record from ``ref_stats[k, n]`` (reference ``k`` on record ``n``).

    ``in_mask[k, n]``: reference ``k`` was trained on record ``n``. A record
    with no reference on one side gets that side's mean as its other side's
    mean plus the global shift between the in and out statistics (a gap
    filler for small ``K``, not in the paper; with ``K >= 2`` balanced halves
    every record has both sides). ``variance``: "per-record", "global" or
    "auto" (global below :data:`PER_RECORD_MIN_REFERENCES` references).
    """
    stats = np.asarray(ref_stats, dtype=np.float64)
    mask = np.asarray(in_mask, dtype=bool)
    if stats.ndim != 2 or mask.shape != stats.shape:
        raise ValueError(f"ref_stats must be [references, records] and in_mask the same shape, got "
                         f"{stats.shape} and {mask.shape}")
    require_finite(stats, what="the reference models' statistics (ref_stats)",
                   fix="check the reference models for NaN/inf outputs (a diverged training run) and retrain them")
    if variance not in ("auto", "per-record", "global"):
        raise ValueError(f"variance must be 'auto', 'per-record' or 'global', got {variance!r}")
    out_mask = ~mask
    mu_in, mu_out = _masked_mean(stats, mask), _masked_mean(stats, out_mask)
    g_in, g_out = _global_var(stats, mask), _global_var(stats, out_mask)
    if np.isnan(g_in):
        g_in = g_out
    if np.isnan(g_out):
        g_out = g_in
    if mask.any() and out_mask.any():
        shift = float(stats[mask].mean() - stats[out_mask].mean())
        mu_in = np.where(np.isnan(mu_in), mu_out + shift, mu_in)
        mu_out = np.where(np.isnan(mu_out), mu_in - shift, mu_out)
    if variance == "auto":
        few = min(int(mask.sum(axis=0).min()), int(out_mask.sum(axis=0).min()))
        variance = "per-record" if few >= PER_RECORD_MIN_REFERENCES else "global"
    n = stats.shape[1]
    if variance == "global":
        var_in, var_out = np.full(n, g_in), np.full(n, g_out)
    else:
        var_in = _masked_var(stats, mask, mu_in)
        var_out = _masked_var(stats, out_mask, mu_out)
        var_in = np.where(np.isnan(var_in), g_in, var_in)
        var_out = np.where(np.isnan(var_out), g_out, var_out)
    floor = VARIANCE_FLOOR * max(np.nan_to_num(g_in), np.nan_to_num(g_out), 1e-12)
    return GaussianFit(mu_in, np.maximum(var_in, floor), mu_out, np.maximum(var_out, floor), variance)


def _log_normal(x: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2.0 * np.pi * var) + (x - mu) ** 2 / var)


def lira_online(target_stats: np.ndarray, ref_stats: np.ndarray, in_mask: np.ndarray,
                variance: str = "auto") -> np.ndarray:
    """Online LiRA (§IV-B): per record ``log N(phi; mu_in, s_in^2) - log N(phi; mu_out, s_out^2)``; higher = member."""
    target = np.asarray(target_stats, dtype=np.float64)
    fit = fit_gaussians(ref_stats, in_mask, variance)
    if not np.asarray(in_mask, dtype=bool).any():
        raise ValueError("online LiRA needs references trained on the candidates (in_mask has no True); fix: "
                         "use lira_offline, or train references on halves that include the candidates")
    return _log_normal(target, fit.mu_in, fit.var_in) - _log_normal(target, fit.mu_out, fit.var_out)


def lira_offline(target_stats: np.ndarray, out_stats: np.ndarray, variance: str = "auto") -> np.ndarray:
    """Offline LiRA (§IV-C): ``(phi - mu_out) / s_out`` per record from references never trained on it."""
    target = np.asarray(target_stats, dtype=np.float64)
    stats = np.asarray(out_stats, dtype=np.float64)
    fit = fit_gaussians(stats, np.zeros(stats.shape, dtype=bool), variance)
    return (target - fit.mu_out) / np.sqrt(fit.var_out)
