"""The gate's rule for a figure measured over training seeds (issue 37): when is a change a regression?

Both sides hold ``k`` per-seed figures (``per_seed``), each the mean over
the same canary set when there is one (``per_canary``, one row per seed). A
regression needs BOTH a shift the seeds cannot explain (a test at
``alpha``) AND a worse mean by more than the tolerance (the shift the team
accepts; issue 26: a test alone flagged a 0.02-bit shift of every seed).

* A rate given as pooled counts (``extra.pooled_successes`` /
  ``pooled_trials``: CEA accuracy, extraction) is compared by Boschloo's exact
  unconditional test, one-sided (Boschloo 1970; uniformly more powerful than
  Fisher's, whose p it uses as the statistic): 0 of 56 -> 16 of 56 trials is
  a shift no Welch test on 7 per-seed rates sees as surely. Pooling assumes
  one rate per side; where a side's seeds disagree more than their trials
  explain (Pearson's chi-square at ``alpha``), the seeds are the unit and
  the continuous rule below applies to the per-seed rates.
* Any other figure: a permutation test over seeds. Under "nothing but the
  training seeds changed" the ``2k`` seeds' rows are exchangeable between
  the sides, so every split of them into two groups of ``k`` is as likely as
  the observed one (all ``C(2k, k)`` splits when there are at most
  :data:`MAX_SPLITS`, else that many seeded random splits). Three statistics
  are computed for every split, each worse-is-larger:

  - ``welch``: Welch's t of the seed figures, for a shift of every seed;
  - ``above``: how many of the run's seeds exceed the baseline's largest,
    for a shift of SOME seeds (4 of 7 jumping to the ceiling: Welch's t
    is small there, since the run's spread grows with its mean);
  - ``canary``: the largest growth of one canary's mean over seeds, for a
    shift of SOME canaries (only when both sides measured the same set).

  They are combined by the minimum of their permutation p-values, itself
  referred to its permutation distribution (Westfall and Young's min-p), so
  the combined test keeps the level ``alpha`` exactly under exchangeability,
  with no Bonferroni loss for the statistics' correlation.
  With ``k <= 3`` a side no split test can reach 5 % (``C(6, 3) = 20``
  splits: the smallest one-sided p is 1/20), so one-sided Welch t decides.
* When both sides trained the SAME seeds (``target.seeds``: main and the
  branch both ran seeds 0..k-1, the usual merge request), each seed's two
  figures form a pair, and the ``2^k`` sign flips of the differences replace
  the splits (:func:`paired_test`: paired t, the largest jump of one seed, the
  largest canary growth, min-p): what a seed's two models share (its
  initialisation and batch order) cancels. Equal figures on both sides (the
  change did not touch the model) are "same" outright.

Exchangeable rows need the same canaries and data on both sides (the same
``--privleak-seed``); a run with another ``--privleak-seed`` redraws the
canaries and the corpus too, whose effect is shared by all of a side's seeds:
no test over seeds sees it, and a canary set of ``m`` secrets divides its
variance by ``m`` (docs/report-and-gate.md gives the measured false alarms).
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

from .model import figure

#: Largest number of splits enumerated; above it, as many random splits (seeded: the gate is deterministic).
MAX_SPLITS = 20_000
_EPS = 1e-12


def _per_seed(result: dict[str, Any]) -> list[float]:
    return [figure(v) for v in result["per_seed"]]


def _table(result: dict[str, Any]) -> np.ndarray | None:
    rows = result.get("per_canary") or []
    if len(rows) < 2 or len({len(r) for r in rows}) != 1 or len(rows[0]) < 2:
        return None
    return np.array([[figure(v) for v in row] for row in rows], dtype=np.float64)


def _same_set(old: dict[str, Any], new: dict[str, Any]) -> bool:
    a, b = (old.get("target") or {}).get("canary_set"), (new.get("target") or {}).get("canary_set")
    return a is not None and a == b


def pooled_counts(result: dict[str, Any]) -> tuple[int, int] | None:
    """``(successes, trials)`` pooled over seeds (and canaries), when the result gives them."""
    extra = result.get("extra") or {}
    hits, trials = figure(extra.get("pooled_successes")), figure(extra.get("pooled_trials"))
    if hits is None or trials is None or not (math.isfinite(hits) and math.isfinite(trials)) or trials <= 0:
        return None
    return int(round(hits)), int(round(trials))


def heterogeneous(rates: list[float], trials: int, alpha: float) -> bool:
    """Whether the seeds' rates (each over ``trials / k`` trials) differ more than the trials explain:
    Pearson's chi-square test of homogeneity on the seeds x (successes, failures) table rejects."""
    from scipy.stats import chi2_contingency

    each = trials / len(rates)
    hits = [r * each for r in rates]
    misses = [each - h for h in hits]
    if sum(hits) <= _EPS or sum(misses) <= _EPS:
        return False
    return float(chi2_contingency([hits, misses], correction=False).pvalue) < alpha


def exact_rate_test(before: tuple[int, int], after: tuple[int, int]) -> tuple[float, float]:
    """Boschloo's one-sided exact test of two pooled rates: ``(p that after is larger, p that it is smaller)``.

    By hand: 0 of 1 before, 1 of 1 after: the only table as extreme is the observed one, of probability
    ``pi (1 - pi)`` under a common rate ``pi``, at most 1/4: p = 0.25.
    """
    from scipy.stats import boschloo_exact

    (hb, nb), (ha, na) = before, after
    table = [[ha, hb], [na - ha, nb - hb]]
    larger = float(boschloo_exact(table, alternative="greater").pvalue)
    smaller = float(boschloo_exact(table, alternative="less").pvalue)
    return min(larger, 1.0), min(smaller, 1.0)


def splits(k: int, seed: int = 0) -> np.ndarray:
    """Boolean ``[S, 2k]`` rows: which of the ``2k`` pooled seeds go to the run's side; row 0 is the observed
    split (the run's seeds last). All ``C(2k, k)`` splits when at most :data:`MAX_SPLITS`, else random ones."""
    n = 2 * k
    if math.comb(n, k) <= MAX_SPLITS:
        rows = np.zeros((math.comb(n, k), n), dtype=bool)
        for i, chosen in enumerate(combinations(range(n - 1, -1, -1), k)):
            rows[i, list(chosen)] = True
        return rows       # the first combination of the reversed range is the last k: the observed split
    rng = np.random.default_rng(seed)
    rows = np.zeros((MAX_SPLITS, n), dtype=bool)
    rows[0, k:] = True
    for i in range(1, MAX_SPLITS):
        rows[i, rng.permutation(n)[:k]] = True
    return rows


def _welch(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Welch's t of the run's group against the baseline's, for every split (rows of ``groups``)."""
    k = int(groups[0].sum())
    run = np.where(groups, values, 0.0).sum(axis=1) / k
    base = np.where(~groups, values, 0.0).sum(axis=1) / k
    var_run = (np.where(groups, values - run[:, None], 0.0) ** 2).sum(axis=1) / (k - 1)
    var_base = (np.where(~groups, values - base[:, None], 0.0) ** 2).sum(axis=1) / (k - 1)
    se = np.sqrt((var_run + var_base) / k)
    shift = run - base
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, shift / np.where(se > 0, se, 1.0), np.sign(shift) * np.inf)
    return np.nan_to_num(t, nan=0.0, posinf=np.inf, neginf=-np.inf)


def _above(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """How many of the run's seeds exceed the baseline's largest figure, for every split."""
    base_max = np.where(~groups, values, -np.inf).max(axis=1)
    return (groups & (values > base_max[:, None] + _EPS)).sum(axis=1).astype(np.float64)


def _canary(table: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The largest growth of one canary's mean over seeds, run minus baseline, for every split."""
    k = int(groups[0].sum())
    g = groups.astype(np.float64)
    run = g @ table / k
    base = (1.0 - g) @ table / k
    return (run - base).max(axis=1)


def _upper_p(stat: np.ndarray) -> np.ndarray:
    """For each split, the share of splits whose statistic is at least its own (its permutation p)."""
    ordered = np.sort(stat)
    finite = np.isfinite(stat)
    slack = np.where(finite, 1e-9 * np.maximum(1.0, np.abs(np.where(finite, stat, 0.0))), 0.0)
    return (stat.size - np.searchsorted(ordered, stat - slack, side="left")) / stat.size


def permutation_test(before: list[float], after: list[float], before_table: np.ndarray | None = None,
                     after_table: np.ndarray | None = None) -> dict[str, float]:
    """One-sided permutation p-values (worse = larger) of ``welch``, ``above``, ``canary`` (when both
    tables are given) and their min-p combination ``combined`` (see the module doc)."""
    k = len(before)
    values = np.array([*before, *after], dtype=np.float64)
    groups = splits(k)
    stats = {"welch": _welch(values, groups), "above": _above(values, groups)}
    if before_table is not None and after_table is not None:
        stats["canary"] = _canary(np.vstack([before_table, after_table]), groups)
    pvals = {name: _upper_p(stat) for name, stat in stats.items()}
    smallest = np.min(np.vstack(list(pvals.values())), axis=0)
    combined = float(np.mean(smallest <= smallest[0] + 1e-12))
    return {**{name: float(p[0]) for name, p in pvals.items()}, "combined": combined,
            "splits": float(groups.shape[0])}


def seed_test(direction: str, before: list[float], after: list[float]) -> tuple[float, float] | None:
    """One-sided Welch t test that ``after`` leaks more than ``before`` (larger for ``at_most``, smaller for
    ``at_least``): ``(p for worse, p for better)``; ``None`` when neither sample varies (no test possible)."""
    from scipy.stats import ttest_ind

    if len(before) < 2 or len(after) < 2:
        raise ValueError(f"the seed test needs at least 2 seeds a side, got {len(before)} and {len(after)}")
    if not all(math.isfinite(v) for v in (*before, *after)):
        return None
    if len(set(before)) == 1 and len(set(after)) == 1:
        return None
    worse = "greater" if direction == "at_most" else "less"
    better = "less" if direction == "at_most" else "greater"
    return (float(ttest_ind(after, before, equal_var=False, alternative=worse).pvalue),
            float(ttest_ind(after, before, equal_var=False, alternative=better).pvalue))


def welch_p(before: list[float], after: list[float]) -> float | None:
    """One-sided Welch t p that ``after`` is larger; None when neither side varies."""
    tested = seed_test("at_most", before, after)
    return None if tested is None else tested[0]


def redrawn_sets_test(before: np.ndarray, after: np.ndarray, direction: str) -> tuple[float | None, float | None, str]:
    """``(p worse, p better, rule)`` when the two sides measured DIFFERENT canary sets (another
    ``--privleak-seed``): the canaries' own effect is shared by all of a side's seeds, so the seeds are not
    exchangeable between the sides; the means are compared by a t test whose variance is the sum of both
    sides' variance components (seed, canary, residual; :func:`pytest_privleak.stats.crossed_components`),
    with Satterthwaite's degrees of freedom."""
    from scipy.stats import t as student

    from ..stats import crossed_components

    cb, ca = crossed_components(before.tolist()), crossed_components(after.tolist())
    variance = cb.variance + ca.variance
    rule = (f"one-sided t of the means over seeds and canaries, by variance components (the canary sets differ, "
            f"so the canaries' own effect counts: {before.shape[1]} and {after.shape[1]} canaries)")
    if variance <= 0:
        return None, None, rule
    parts = [v ** 2 / df for v, df in ((cb.variance, cb.df), (ca.variance, ca.df)) if v > 0 and math.isfinite(df)]
    df = variance ** 2 / sum(parts) if parts else math.inf
    t = (ca.mean - cb.mean) / math.sqrt(variance)
    larger, smaller = float(student.sf(t, df)), float(student.cdf(t, df))
    return ((larger, smaller) if direction == "at_most" else (smaller, larger)) + (rule,)


def _worse(direction: str, values: list[float]) -> list[float]:
    return list(values) if direction == "at_most" else [-v for v in values]


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def flips(k: int, seed: int = 0) -> np.ndarray:
    """``[S, k]`` signs +-1, one row per relabelling of ``k`` seed pairs; row 0 (all +1) is the observed
    one. All ``2^k`` when at most :data:`MAX_SPLITS`, else that many seeded random rows."""
    if 2 ** k <= MAX_SPLITS:
        codes = np.arange(2 ** k)[:, None] >> np.arange(k)[None, :] & 1
        return 1.0 - 2.0 * codes
    rng = np.random.default_rng(seed)
    rows = rng.choice([-1.0, 1.0], size=(MAX_SPLITS, k))
    rows[0] = 1.0
    return rows


def paired_test(before: list[float], after: list[float], before_table: np.ndarray | None = None,
                after_table: np.ndarray | None = None) -> dict[str, float]:
    """One-sided sign-flip permutation p-values (worse = larger) of seeds measured on BOTH sides (the same
    training seeds: main and the branch both ran seeds 0..k-1). Under "the change does not matter" each
    seed's two figures are exchangeable, so every sign of each difference ``after_i - before_i`` is as
    likely. Statistics: ``paired`` (the paired t), ``jump`` (the largest difference: some seeds) and
    ``canary`` (the largest mean difference of one canary: some canaries), combined by min-p as in
    :func:`permutation_test`. Pairing removes what a seed's two models share (its initialisation and data
    order): the joint model's seed means at R = 2 and R = 4 correlate 0.70 by seed."""
    d = np.array(after, dtype=np.float64) - np.array(before, dtype=np.float64)
    k = d.size
    signs = flips(k)
    flipped = signs * d[None, :]
    mean = flipped.mean(axis=1)
    sd = flipped.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, mean / np.where(sd > 0, sd, 1.0) * math.sqrt(k), np.sign(mean) * np.inf)
    stats = {"paired": np.nan_to_num(t, nan=0.0, posinf=np.inf, neginf=-np.inf), "jump": flipped.max(axis=1)}
    if before_table is not None and after_table is not None:
        rows = np.asarray(after_table, dtype=np.float64) - np.asarray(before_table, dtype=np.float64)
        stats["canary"] = (signs @ rows / k).max(axis=1)
    pvals = {name: _upper_p(stat) for name, stat in stats.items()}
    smallest = np.min(np.vstack(list(pvals.values())), axis=0)
    return {**{name: float(p[0]) for name, p in pvals.items()},
            "combined": float(np.mean(smallest <= smallest[0] + 1e-12)), "splits": float(signs.shape[0])}


def _same_seeds(old: dict[str, Any], new: dict[str, Any]) -> bool:
    a, b = (old.get("target") or {}).get("seeds"), (new.get("target") or {}).get("seeds")
    return isinstance(a, list) and len(a) >= 2 and a == b


def shift_p(before: list[float], after: list[float], before_table: np.ndarray | None,
            after_table: np.ndarray | None, alpha: float,
            paired: bool = False) -> tuple[float | None, str, dict[str, float]]:
    """``(p, rule, parts)``: the one-sided p that ``after`` is larger (None: no test possible), the rule's
    name, and the component p-values (all oriented worse = larger). ``paired``: both sides ran the same
    training seeds, in the same order (:func:`paired_test`)."""
    k = len(before)
    if paired and 2 ** k * alpha >= 2:
        parts = paired_test(before, after, before_table, after_table)
        names = "paired t, largest seed jump" + (", largest canary growth" if "canary" in parts else "")
        how = "all" if parts["splits"] == 2 ** k else "random"
        return parts["combined"], (f"min-p of {names} over {int(parts['splits'])} {how} sign flips of the {k} "
                                   f"seeds both sides trained, alpha {alpha:g}"), parts
    if math.comb(2 * k, k) * alpha < 2:       # no split test can reject: the smallest p is 1 / C(2k, k)
        return welch_p(before, after), f"one-sided Welch t over seeds, alpha {alpha:g}", {}
    parts = permutation_test(before, after, before_table, after_table)
    names = "Welch t, seeds above the baseline's largest" + (", largest canary growth" if "canary" in parts else "")
    how = "all" if parts["splits"] == math.comb(2 * k, k) else "random"
    rule = (f"min-p of {names} over {int(parts['splits'])} {how} splits of the {2 * k} seeds, "
            f"alpha {alpha:g}")
    return parts["combined"], rule, parts


def judge(change: dict[str, Any], old: dict[str, Any], new: dict[str, Any], alpha: float) -> str:
    """Fill ``change`` for a figure over seeds (means, both sets, the rule, p) and return
    ``"regression"``, ``"improvement"`` or ``"same"`` (see the module doc)."""
    direction, tol = change["direction"], change["tolerance"]
    before, after = _per_seed(old), _per_seed(new)
    change.update({"before": _mean(before), "after": _mean(after), "before_seeds": before, "after_seeds": after,
                   "alpha": alpha})
    delta = change["after"] - change["before"]
    worse = delta if direction == "at_most" else -delta
    counted = pooled_counts(old), pooled_counts(new)
    if all(c is not None for c in counted) and not any(heterogeneous(v, c[1], alpha)
                                                        for v, c in zip((before, after), counted)):
        (hb, nb), (ha, na) = counted
        larger, smaller = exact_rate_test((hb, nb), (ha, na))
        p_worse, p_better = (larger, smaller) if direction == "at_most" else (smaller, larger)
        change["rule"] = (f"one-sided Boschloo exact test of the pooled counts ({hb}/{nb} before, {ha}/{na} "
                          f"after), alpha {alpha:g}")
        change["before"], change["after"] = hb / nb, ha / na
        delta = change["after"] - change["before"]
        worse = delta if direction == "at_most" else -delta
    elif _table(old) is not None and _table(new) is not None and not _same_set(old, new):
        p_worse, p_better, rule = redrawn_sets_test(_table(old), _table(new), direction)
        if p_worse is None:
            change["rule"] = "tolerance (the figures do not vary over seeds and canaries, so no test)"
            return ("regression" if worse > tol + _EPS else "improvement" if -worse > tol + _EPS else "same")
        change["rule"] = rule + f", alpha {alpha:g}"
    else:
        tables = (_table(old), _table(new)) if _same_set(old, new) else (None, None)
        w_before, w_after = _worse(direction, before), _worse(direction, after)
        t_before, t_after = (None, None) if tables[0] is None or tables[1] is None else (
            tables[0] if direction == "at_most" else -tables[0], tables[1] if direction == "at_most" else -tables[1])
        if not all(math.isfinite(v) for v in (*before, *after)):
            return "same"
        paired = _same_seeds(old, new)
        if paired and before == after:
            change["rule"] = "the same seeds gave the same figures on both sides"
            return "same"
        p_worse, rule, parts = shift_p(w_before, w_after, t_before, t_after, alpha, paired)
        if p_worse is None:   # no spread on either side: the tolerance rule on the means
            change["rule"] = "tolerance (the figures do not vary over seeds, so no test)"
            return ("regression" if worse > tol + _EPS else "improvement" if -worse > tol + _EPS else "same")
        p_better = shift_p([-v for v in w_before], [-v for v in w_after], None if t_before is None else -t_before,
                           None if t_after is None else -t_after, alpha, paired)[0]
        change["rule"] = rule
        if parts:
            change["p_parts"] = {name: parts[name] for name in ("welch", "above", "paired", "jump", "canary")
                                 if name in parts}
    change["p_value"] = p_worse
    if p_worse < alpha and worse > tol + _EPS:
        return "regression"
    if p_better is not None and p_better < alpha and -worse > tol + _EPS:
        change["p_value"] = p_better
        return "improvement"
    return "same"
