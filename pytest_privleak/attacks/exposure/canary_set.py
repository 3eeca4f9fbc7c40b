"""Exposure of every canary of a :class:`~pytest_privleak.canaries.CanarySet` from ONE scoring of its space.

The members of a set share their pattern (prefix, intent, tags and V0), so
the score of every candidate secret is the same for all of them: the space
(or the sampled references) is scored once and each member is ranked in it
(issue 37). Each member is ranked among the secrets that are NOT in the set:
the other members were trained on too, so they are not the random
alternatives exposure compares with (the Secret Sharer's ``R`` is the space
of secrets the model did not see); counting them would cost each member up
to ``log2 m`` bits for the others' memorisation. A member's space is thus
itself plus the ``|V0|^n - m`` non-members: ceiling ``log2(|V0|^n - m + 1)``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .attack import (DEFAULT_BATCH, DEFAULT_EXACT_BUDGET, DEFAULT_REFERENCES, check_arguments, distinct_draw,
                     extrapolated_from_scores, sampled_from_scores, score_secrets, secret_scorer, space_digits)
from .figure import Exposure, chance_exposure, exposure_from_rank


def skip_members(numbers: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Map ``numbers`` in ``[0, size - m)`` onto the space without the ``m`` ``members``, keeping order.

    With the members sorted ``e_0 < e_1 < ...``, a number ``v`` lands at ``v + #{j : e_j - j <= v}``. By hand:
    members {2, 3} of a space of 6: 0 -> 0, 1 -> 1, 2 -> 4, 3 -> 5.
    """
    ordered = np.sort(np.asarray(members, dtype=np.int64))
    shifted = ordered - np.arange(ordered.size, dtype=np.int64)
    return numbers + np.searchsorted(shifted, numbers, side="right")


def non_member_references(rng: np.random.Generator, size: int, members: np.ndarray,
                          references: int) -> np.ndarray | None:
    """``references`` distinct secrets of the space that are not members, uniform without replacement;
    ``None`` when they would be every non-member (score the space whole)."""
    refs = distinct_draw(rng, int(size) - len(members), references)
    return None if refs is None else skip_members(refs, members)


def exact_members(scores: np.ndarray, members: np.ndarray) -> list[Exposure]:
    """Exact exposure of each member given the scores of the whole space: its rank among the non-members
    (ties counted against it), ``log2(|R| - m + 1) - log2 rank``."""
    scores = np.asarray(scores, dtype=np.float64)
    mask = np.ones(scores.size, dtype=bool)
    mask[members] = False
    others = np.sort(scores[mask])
    size = others.size + 1
    out = []
    for number in members:
        s = float(scores[number])
        rank = 1 + int(np.searchsorted(others, s, side="right"))
        value = exposure_from_rank(rank, size)
        out.append(Exposure(value, "exact", rank, size, size - 1, math.log2(size), chance_exposure(size),
                            (value, value), s))
    return out


def compute_set_exposure(target: Any, canaries: Any, *, method: str = "auto", references: int = DEFAULT_REFERENCES,
                         exact_budget: int = DEFAULT_EXACT_BUDGET, seed: int = 0, confidence: float = 0.95,
                         batch_size: int = DEFAULT_BATCH, bootstrap: int = 30) -> list[Exposure]:
    """The :class:`Exposure` of each member of ``canaries`` (a CanarySet), in order, from one scoring.

    ``method`` as in :func:`.attack.compute_exposure` (``"mix-and-match"`` does not apply: a set is of a
    :class:`~pytest_privleak.canaries.CanaryPattern`). Sampled and extrapolated figures rank every member
    among the same ``references`` non-member secrets; the extrapolation fits the skew-normal per member
    from the shared reference scores.
    """
    check_arguments(canaries[0], method, confidence, references=references, exact_budget=exact_budget,
                    batch_size=batch_size, bootstrap=bootstrap, seed=seed)
    if method == "mix-and-match":
        raise ValueError("method='mix-and-match' ranks one token of a labelled sentence (a MaskCanary); a "
                         "CanarySet is of a canary pattern; fix: method='auto'")
    pattern = canaries.pattern
    base, length, size = len(pattern.vocabulary), pattern.length, pattern.space_size
    members = np.asarray(canaries.secret_numbers, dtype=np.int64)
    if method == "auto":
        method = "exact" if size <= exact_budget else "extrapolated"
    from ..candidates import enumerate_space

    scorer = secret_scorer(target, canaries[0])
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6578706F, len(members)]))
    refs = None if method == "exact" else non_member_references(rng, size, members, references)
    if refs is None:
        exact = exact_members(score_secrets(scorer, enumerate_space(base, length, budget=None), batch_size), members)
        if method == "exact":
            return exact
        note = {"why exact": f"method={method!r} with references={references:,}: the space holds "
                             f"{size - len(members):,} secrets besides the set's {len(members)}, so every secret "
                             "was scored and the figures are exact"}
        return [dataclasses.replace(e, evidence={**e.evidence, **note}) for e in exact]
    scores = score_secrets(scorer, space_digits(np.concatenate([members, refs]), base, length), batch_size)
    own, ref_scores = scores[:len(members)], scores[len(members):]
    reduced = size - len(members) + 1
    if method == "sampled":
        return [sampled_from_scores(float(s), ref_scores, reduced, confidence) for s in own]
    return [extrapolated_from_scores(float(s), ref_scores, reduced, np.random.default_rng([seed, i]), confidence,
                                     bootstrap) for i, s in enumerate(own)]
