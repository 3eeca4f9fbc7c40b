"""Which canaries a one-run audit guesses, and how many guesses it may try without losing validity.

In the one-run experiment (Steinke, Nasr, Jagielski 2023, Sec. 2, Algorithm 1; Mahloujifar, Melis,
Chaudhuri 2024, Sec. 3) each of m canaries is included with probability 1/2; the auditor ranks them by
score, guesses the top ``k_plus`` as IN, the bottom ``k_minus`` as OUT and abstains on the rest.  Both
papers' theorems hold for a number of guesses fixed before the data are seen.  Trying several
``(k_plus, k_minus)`` and keeping the best is a choice made on the data, so each candidate is tested at
``significance / J`` (Bonferroni over the J candidates): every one of the J bounds then holds at once
with probability at least 1 - significance, so their maximum does too.

The default candidates depend on m only (never on the scores): guess totals halving from m down to
about 8, each both one-sided (top only) and balanced (half top, half bottom), or only one of the two
shapes when the caller knows which fits its canaries (fewer candidates: a smaller correction).
Passing one pair fixed in advance (say, chosen on a pilot run's canaries) costs no correction.

Ties in score are broken by a fixed pseudo-random key per canary position (not by position, which a
caller might have ordered by inclusion), so the guesses are a deterministic function of the scores.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Seed of the fixed tie-break key (any constant works: it only has to ignore the inclusion draw).
TIE_BREAK_SEED = 0x5EED
#: The smallest guess total of the default candidates.
SMALLEST_TOTAL = 8


@dataclass(frozen=True)
class GuessCounts:
    """Correct-guess counts of every candidate ``(k_plus, k_minus)`` on one ranking of the canaries."""

    k_plus: np.ndarray       # (J,) guesses IN taken from the top of the ranking
    k_minus: np.ndarray      # (J,) guesses OUT taken from the bottom
    correct: np.ndarray      # (J,) correct guesses of each candidate
    order: np.ndarray        # (m,) canary indices from highest to lowest score (ties broken by the fixed key)

    @property
    def guesses(self) -> np.ndarray:
        return self.k_plus + self.k_minus

    def guessed(self, j: int, included: np.ndarray) -> tuple[int, ...]:
        """Indices guessed by candidate ``j``, the correct guesses first (each group in ranking order)."""
        top = self.order[: int(self.k_plus[j])]
        bottom = self.order[len(self.order) - int(self.k_minus[j]):][::-1]
        right = np.concatenate([top[included[top]], bottom[~included[bottom]]])
        wrong = np.concatenate([top[~included[top]], bottom[included[bottom]]])
        return tuple(int(i) for i in np.concatenate([right, wrong]))


#: Which sides a default candidate guesses: "both" (balanced and top-only), "balanced" or "top".
SIDES = ("both", "balanced", "top")


def default_candidates(m: int, sides: str = "both") -> list[tuple[int, int]]:
    """``(k_plus, k_minus)`` pairs that depend on m only: guess totals m, m/2, m/4, ... down to ~8, each
    balanced (half top, half bottom: best when both tails of the scores tell, as for a Gaussian shift)
    and/or, up to m/2, top-only (best when only members stand out, as for many input-space canaries)."""
    if sides not in SIDES:
        raise ValueError(f"guess_counts={sides!r} names no candidate set; fix: pass one of {', '.join(SIDES)}, "
                         f"None or a list of (k_plus, k_minus) pairs")
    totals, c = [], m
    while c >= min(SMALLEST_TOTAL, m):
        totals.append(c)
        if c == 1:
            break
        c = c // 2
    pairs: list[tuple[int, int]] = []
    for c in totals:
        balanced, top = (c - c // 2, c // 2), (c, 0)
        shapes = {"both": (balanced, top) if 2 * c <= m else (balanced,), "balanced": (balanced,),
                  "top": (top,) if 2 * c <= m or c == totals[-1] else ()}[sides]
        for pair in shapes:
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def ranking(scores: np.ndarray) -> np.ndarray:
    """Canary indices from the highest to the lowest score; ties broken by a fixed pseudo-random key."""
    key = np.random.default_rng(TIE_BREAK_SEED).permutation(len(scores))
    return np.lexsort((key, scores))[::-1]


def count_correct(scores: np.ndarray, included: np.ndarray, candidates) -> GuessCounts:
    """Correct guesses of every candidate at once (cumulative sums along one ranking)."""
    order = ranking(scores)
    inc = included[order]
    right_top = np.concatenate([[0], np.cumsum(inc)])             # IN among the top k
    right_bottom = np.concatenate([[0], np.cumsum(~inc[::-1])])   # OUT among the bottom k
    kp = np.array([p for p, _ in candidates], dtype=np.int64)
    km = np.array([n for _, n in candidates], dtype=np.int64)
    return GuessCounts(k_plus=kp, k_minus=km, correct=right_top[kp] + right_bottom[km], order=order)
