"""One figure over the canaries of a set (issue 37): their mean, worst member, and an interval that counts
the variance between canaries and, over seeds, between seeds too.

A :class:`~pytest_privleak.canaries.CanarySet` puts ``m`` secrets into one
training set; an attack measures each, and the result's figure is their mean
(:func:`over_set`), with the per-canary figures in ``LeakResult.per_canary``.
Over ``k`` training seeds the figures form a ``k x m`` table whose rows (seeds)
and columns (canaries) are both random draws: the same set is trained with
every seed, so a canary that is easy to memorise is easy in every row. The
mean of the table then varies by

    Var(mean) = s_seed^2 / k + s_canary^2 / m + s_resid^2 / (k m)

(a two-way crossed random-effects model, one figure per cell), estimated from
the table's mean squares (:func:`crossed_components`). A Student t interval
over the k seed means alone would miss the canary term: it sees how seeds
differ, not how another draw of the secrets would.

A rate (CEA accuracy, extraction) is pooled over canaries and seeds as counts
with the exact Clopper-Pearson interval (:mod:`.over_seeds`); where the
canaries disagree more than their trials explain, that interval is widened
to the crossed one, as it is where the seeds disagree.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..results import LeakResult, _fmt
from ..stats import Crossed, crossed_components  # noqa: F401  (shared with the gate)
from .redaction import shown_text

#: The evidence key that says how many canaries a figure rests on.
CANARIES_KEY = "canaries"


def describe_crossed(c: Crossed, k: int, m: int) -> str:
    """``variance components over 7 seeds x 8 canaries (seed 0.41, canary 0.12, residual 2.3; 9.8 df)``."""
    return (f"variance components over {k} seed{'s' if k != 1 else ''} x {m} canaries (seed {_fmt(c.seed)}, "
            f"canary {_fmt(c.canary)}, residual {_fmt(c.residual)}; {c.df:.3g} df)")


def one_canary_note(text: str) -> str:
    """The evidence line of a figure that rests on one canary."""
    from ..canaries import SET_SIZE

    return (f"one canary ({text!r}): the worst case of one secret alone in its template; its figure moves by "
            f"several bits between draws, so to compare branches (the gate) draw canary('pin', count={SET_SIZE}), "
            "each said as often, at no extra training cost (a set's figure is lower: its secrets share the "
            "template)")


def set_note(canaries: Any, figures: Sequence[float], worst_word: str) -> str:
    """The evidence line of a figure over a canary set: how many, the mean, the worst."""
    worst = max(range(len(figures)), key=lambda i: figures[i])
    return (f"{len(figures)} distinct secrets of pattern {canaries.pattern.name!r} in one training set; the "
            f"figure is their mean; {worst_word} {_fmt(figures[worst])} ({shown_text(canaries[worst])!r})")


def over_set(result: LeakResult, canaries: Any, figures: Sequence[float], *, per_canary: str,
             confidence: float = 0.95, rate: bool = False) -> LeakResult:
    """``result`` (measured on every member of ``canaries``) as the figure over the set.

    ``figures``: each member's figure in order. A continuous figure becomes the mean with a t interval over
    the ``m`` canaries; a rate (``rate=True``) keeps the result's pooled value and interval. ``per_canary``
    is the evidence line listing the members' figures. The worst member goes into ``extra`` and the
    evidence, the figures into ``per_canary``, and the label is the set's unless ``name=`` gave one.
    """
    values = [float(v) for v in figures]
    m = len(values)
    extra = {**result.extra, "worst_canary": max(values), "canary_count": float(m)}
    evidence = {CANARIES_KEY: set_note(canaries, values, "the worst canary reads"), "per canary": per_canary,
                **{k: v for k, v in result.evidence.items() if k != CANARIES_KEY}}
    value, interval, conf = result.value, result.interval, result.confidence
    if not rate:
        value = math.fsum(values) / m
        if m >= 2 and all(math.isfinite(v) for v in values):
            interval, _, _ = crossed_components([values]).bounds(confidence)
            interval = (max(interval[0], 0.0) if min(values) >= 0 else interval[0],
                        min(interval[1], result.ceiling) if result.ceiling is not None else interval[1])
            conf = confidence
            evidence["over canaries"] = (f"mean {_fmt(value)}; {confidence:.0%} interval over the {m} canaries by "
                                         "Student t (each canary a draw of the secret)")
        else:
            interval = (min(values), max(values))
    return replace(result, value=value, interval=interval, confidence=conf, extra=extra, evidence=evidence,
                   per_canary=(tuple(values),))
