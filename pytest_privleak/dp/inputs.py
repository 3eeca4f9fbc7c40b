"""Argument checks shared by the DP bounds: each bad input is refused naming the argument and the fix."""
from __future__ import annotations

import math

import numpy as np

from ..finite import require_finite


def check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(delta)) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta={delta!r} must lie strictly between 0 and 1 (the δ of the (ε, δ) claim); "
                         f"fix: pass the δ the training claims, such as delta=1e-5")
    return float(delta)


def check_confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) \
            or not math.isfinite(float(confidence)) or not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1; "
                         f"fix: pass a probability such as confidence=0.95")
    return float(confidence)


def check_scores(scores, what: str) -> np.ndarray:
    """A 1-D float array of finite scores (``what`` names the argument in the message)."""
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be a 1-D array of numbers, got {type(scores).__name__}; "
                         f"fix: pass one float score per canary (higher = more likely included)") from err
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D (one score per canary), got shape {arr.shape}; "
                         f"fix: pass one float score per canary")
    require_finite(arr, what=f"{what} (canary scores)",
                   fix="score the canaries on a model whose weights and loss are finite; retrain it")
    return arr


def check_included(included, m: int) -> np.ndarray:
    arr = np.asarray(included)
    if arr.dtype != np.bool_:
        raise ValueError(f"included must be a boolean array (True = the canary was in the training data), "
                         f"got dtype {arr.dtype}; fix: pass the inclusion draw as bools, e.g. "
                         f"np.asarray(flags, dtype=bool)")
    if arr.ndim != 1 or len(arr) != m:
        raise ValueError(f"included has shape {arr.shape} but scores has {m} entries; fix: pass one "
                         f"inclusion flag per scored canary, in the same order")
    return arr


def check_one_run_inputs(scores, included) -> tuple[np.ndarray, np.ndarray]:
    arr = check_scores(scores, "scores")
    inc = check_included(included, len(arr))
    if len(arr) < 2:
        raise ValueError(f"a one-run audit needs at least 2 canaries, got {len(arr)}; fix: insert more "
                         f"canaries (hundreds to thousands give useful bounds)")
    return arr, inc


def check_guess_counts(guess_counts, m: int) -> list[tuple[int, int]]:
    """``(k_plus, k_minus)`` pairs of non-negative ints with 1 <= k_plus + k_minus <= m."""
    pairs = list(guess_counts)
    if not pairs:
        raise ValueError("guess_counts is empty; fix: pass None for the default candidates or a list of "
                         "(k_plus, k_minus) pairs")
    out = []
    for n, pair in enumerate(pairs):
        try:
            kp, km = pair
        except (TypeError, ValueError) as err:
            raise ValueError(f"guess_counts[{n}]={pair!r} is not a (k_plus, k_minus) pair; fix: pass pairs "
                             f"such as (100, 100)") from err
        if any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0 for k in (kp, km)):
            raise ValueError(f"guess_counts[{n}]={pair!r} must hold two non-negative integers; fix: pass "
                             f"counts such as (100, 100)")
        if kp + km == 0:
            raise ValueError(f"guess_counts[{n}]=(0, 0) guesses no canary (an empty guess set bounds nothing); "
                             f"fix: guess at least one canary")
        if kp + km > m:
            raise ValueError(f"guess_counts[{n}]={pair!r} guesses {kp + km} canaries but only {m} were scored; "
                             f"fix: keep k_plus + k_minus <= {m}")
        out.append((int(kp), int(km)))
    return out
