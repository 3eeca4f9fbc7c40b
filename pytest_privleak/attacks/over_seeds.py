"""One figure over several training seeds: per-seed figures, their mean, an interval over seeds, a verdict.

Any ``assert_*`` / ``measure_*`` helper given a
:class:`~pytest_privleak.targets.seeds.SeedModels` runs once per member with
its recording suppressed (:func:`run_over_seeds`); each figure it recorded is
then summarised over the seeds into ONE :class:`LeakResult` (:func:`aggregate`):

* a rate that the member results give as counts (a pair of ``extra`` keys
  in :data:`COUNT_FIELDS` whose ratio is the figure) is pooled over seeds and
  gets an exact Clopper-Pearson interval (:mod:`pytest_privleak.stats`), as
  one draw's figure gets;
* any other figure gets a Student t interval over the ``k`` per-seed figures
  (mean +- t_{k-1} s / sqrt(k)); a seed whose figure is infinite makes the
  interval the range of the figures, said so.

The verdict (issue 26): an ``at_most`` limit fails when the one-sided upper
confidence bound over seeds exceeds it, an ``at_least`` limit when the
one-sided lower bound falls below it: a pipeline that plausibly leaks fails.
The result's ``value`` is that bound when there is a limit, else the mean; the
mean, the worst seed and the share of seeds over the limit go into ``extra``,
the per-seed figures into ``per_seed``. ``k = 1`` keeps the member's result
as it is and says in its evidence that the figure is one draw.

A limit at the end of a pooled rate's range (at most 0, at least 1, e.g.
``assert_cea_accuracy_at_most(models, pin, 0.0)``) is one no confidence bound
can ever meet: the Clopper-Pearson upper bound of ``0/n`` is
``1 - (1 - confidence)^(1/n) > 0`` for every ``n``. Such a limit is judged on
the observed counts instead (:func:`limit_at_range_end`): "no extraction"
fails when any seed's attack succeeds in any trial (at least 1: when any
trial of any seed fails), exactly what one draw's observed figure is judged
on, over ``k`` times the trials. The message says that the bound cannot
certify 0 and states the interval, so a pass reads as "none seen in n trials",
not as a rate of 0.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterator

from scipy.stats import t as student

from .. import results as _results
from ..progress import events as progress
from ..results import LeakResult, PrivacyLeakError, _fmt
from ..stats import clopper_pearson, clopper_pearson_lower, clopper_pearson_upper
from ..targets.seeds import SeedModels
from .inconclusive import INCONCLUSIVE, InconclusiveAuditError, mark_inconclusive

#: The ``extra`` count pairs (successes, trials) by which a result declares that its figure is a share of
#: trials, pooled over seeds with Clopper-Pearson: CEA's accuracy (``correct`` / ``n_trials``), extraction's
#: rate (``extracted`` / ``canaries``), PII extraction's share (``extracted`` / ``items``), and
#: ``successes`` / ``trials`` for any other counted rate. A pair counts only when its ratio is the figure.
COUNT_FIELDS = (("correct", "n_trials"), ("extracted", "canaries"), ("extracted", "items"),
                ("successes", "trials"))
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class OverSeeds:
    """A figure summarised over ``k`` seeds: mean, two-sided interval, one-sided bounds, and how."""

    values: tuple[float, ...]
    mean: float
    interval: tuple[float, float]
    lower: float
    upper: float
    method: str
    #: ``(successes, trials)`` pooled over the seeds when the figure is a rate given as counts, else None.
    counts: tuple[int, int] | None = None


def t_summary(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> OverSeeds:
    """Student t summary of per-seed figures: the two-sided ``confidence`` interval of the mean and the
    one-sided ``confidence`` bounds (mean -+ t_{k-1, confidence} s / sqrt(k)). Needs ``k >= 2``."""
    vals = tuple(float(v) for v in values)
    k = len(vals)
    if k < 2:
        raise ValueError(f"an interval over seeds needs at least 2 seeds, got {k}")
    if not all(math.isfinite(v) for v in vals):
        lo, hi = min(vals), max(vals)
        mean = math.fsum(vals) / k if not (math.inf in vals and -math.inf in vals) else math.nan
        return OverSeeds(vals, mean, (lo, hi), lo, hi,
                         "range of the per-seed figures (a seed's figure is infinite, so no t interval)")
    mean = math.fsum(vals) / k
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (k - 1))
    se = sd / math.sqrt(k)
    two = float(student.ppf((1 + confidence) / 2, k - 1)) * se
    one = float(student.ppf(confidence, k - 1)) * se
    return OverSeeds(vals, mean, (mean - two, mean + two), mean - one, mean + one,
                     f"Student t over {k} seeds ({k - 1} df), s = {_fmt(sd)}")


def pooled_rate_summary(successes: Sequence[float], trials: Sequence[float],
                        confidence: float = DEFAULT_CONFIDENCE) -> OverSeeds:
    """A rate pooled over seeds: sum of successes over sum of trials, with the exact Clopper-Pearson
    two-sided interval and one-sided bounds at ``confidence``."""
    hits, n = int(round(math.fsum(successes))), int(round(math.fsum(trials)))
    rates = tuple(float(s) / float(t) for s, t in zip(successes, trials))
    return OverSeeds(rates, hits / n, clopper_pearson(hits, n, confidence), clopper_pearson_lower(hits, n, confidence),
                     clopper_pearson_upper(hits, n, confidence),
                     f"Clopper-Pearson, pooled over {len(rates)} seeds ({hits}/{n})", counts=(hits, n))


def _counts(result: LeakResult) -> tuple[float, float] | None:
    for hits, trials in COUNT_FIELDS:
        s, n = result.extra.get(hits), result.extra.get(trials)
        if s is not None and n is not None and n > 0 and float(s).is_integer() and float(n).is_integer() \
                and abs(s / n - result.value) <= 1e-9:
            return float(s), float(n)
    return None


def canary_table(members: Sequence[LeakResult]) -> list[tuple[float, ...]] | None:
    """The ``k x m`` table of per-canary figures when every seed measured the same ``m >= 2`` canaries of a
    set (issue 37), else None."""
    rows = [r.per_canary[0] for r in members if len(r.per_canary) == 1]
    if len(rows) != len(members) or len({len(row) for row in rows}) != 1 or len(rows[0]) < 2:
        return None
    return rows


def crossed_summary(table: Sequence[Sequence[float]], confidence: float) -> OverSeeds:
    """The mean of a seeds x canaries table with the t interval of its variance components
    (:func:`.over_canaries.crossed_components`): both the seeds and the canaries are draws."""
    from .over_canaries import crossed_components, describe_crossed

    seed_means = tuple(math.fsum(row) / len(row) for row in table)
    if not all(math.isfinite(v) for row in table for v in row):
        return t_summary(seed_means, confidence)
    crossed = crossed_components(table)
    interval, lower, upper = crossed.bounds(confidence)
    return OverSeeds(seed_means, crossed.mean, interval, lower, upper, describe_crossed(crossed, len(table),
                                                                                         len(table[0])))


def summarise(members: Sequence[LeakResult], confidence: float) -> OverSeeds:
    """Pooled Clopper-Pearson when every member gives its rate as counts, else Student t (within the range
    the figure can take); over a canary set, the crossed seeds x canaries interval instead of the t one."""
    counts = [_counts(r) for r in members]
    table = canary_table(members)
    spread = (within_range(crossed_summary(table, confidence), members) if table is not None
              else within_range(t_summary([r.value for r in members], confidence), members))
    if all(c is not None for c in counts):
        pooled = pooled_rate_summary([c[0] for c in counts], [c[1] for c in counts], confidence)
        if not seeds_disagree(counts) and not (table is not None and canaries_disagree(table, counts)):
            return pooled
        return _wider_of(pooled, spread)
    return spread


def canaries_disagree(table: Sequence[Sequence[float]], counts: Sequence[tuple[float, float]],
                      alpha: float = 0.05) -> bool:
    """Whether a set's canaries' success rates, pooled over seeds, differ more than their trials explain
    (the chi-square test of :func:`seeds_disagree` on the canaries x (successes, failures) table)."""
    m = len(table[0])
    per_canary_trials = [n / m for _, n in counts]     # each seed gives every canary the same trials
    hits = [math.fsum(row[j] * t for row, t in zip(table, per_canary_trials)) for j in range(m)]
    trials = math.fsum(per_canary_trials)
    return seeds_disagree([(round(h), round(trials)) for h in hits], alpha)


def seeds_disagree(counts: Sequence[tuple[float, float]], alpha: float = 0.05) -> bool:
    """Whether the seeds' success rates differ more than their trials explain: Pearson's chi-square test of
    homogeneity on the seeds x (successes, failures) table rejects at ``alpha``. Pooling assumes one rate."""
    from scipy.stats import chi2_contingency

    hits = [c[0] for c in counts]
    misses = [c[1] - c[0] for c in counts]
    if sum(hits) == 0 or sum(misses) == 0:
        return False
    return float(chi2_contingency([hits, misses], correction=False).pvalue) < alpha


def _wider_of(pooled: OverSeeds, by_seed: OverSeeds) -> OverSeeds:
    """The pooled Clopper-Pearson summary, widened to the t interval over the per-seed rates where that is
    wider; used when :func:`seeds_disagree`. Pooling treats every trial of every seed as independent; when the
    seeds disagree (six extract no canary, one extracts 50 of 100) the seeds are the unit of variation, and the
    pooled bound alone (0.090) passed a limit of 0.1 that the t bound (0.21) failed."""
    if not all(math.isfinite(v) for v in (by_seed.lower, by_seed.upper)):
        return pooled
    lower, upper = min(pooled.lower, by_seed.lower), max(pooled.upper, by_seed.upper)
    if (lower, upper) == (pooled.lower, pooled.upper):
        return pooled
    interval = (min(pooled.interval[0], by_seed.interval[0]), max(pooled.interval[1], by_seed.interval[1]))
    return replace(pooled, interval=interval, lower=lower, upper=upper,
                   method=f"{pooled.method}, widened to the Student t interval over the {len(pooled.values)} "
                          "seeds' rates, which is wider (the seeds disagree more than their trials)")


def within_range(summary: OverSeeds, members: Sequence[LeakResult]) -> OverSeeds:
    """``summary``'s interval and bounds cut to what the figure can take: a rank is at least 1, a figure no seed
    took below 0 is read as non-negative, and none exceeds the members' common ceiling. A t interval ignores
    the range: Mix And Match's rank over 7 seeds read -4.03 (interval -11.1 .. 57.4) in the sample report.
    Verdicts do not change, except that a limit at the ceiling itself can no longer be exceeded."""
    values = [r.value for r in members]
    floor = 1.0 if members[0].metric == "rank" else 0.0 if all(v >= 0 for v in values) else -math.inf
    ceilings = {r.ceiling for r in members}
    ceiling = next(iter(ceilings)) if len(ceilings) == 1 and next(iter(ceilings)) is not None else math.inf
    if not (math.isfinite(floor) or math.isfinite(ceiling)) or not math.isfinite(summary.mean):
        return summary
    cut = lambda v: min(max(v, floor), ceiling)  # noqa: E731
    return replace(summary, interval=(cut(summary.interval[0]), cut(summary.interval[1])),
                               lower=cut(summary.lower), upper=cut(summary.upper))


def _violates(direction: str, value: float, threshold: float) -> bool:
    return value > threshold if direction == "at_most" else value < threshold


def limit_at_range_end(summary: OverSeeds, direction: str, threshold: float | None) -> bool:
    """A limit no one-sided bound of a pooled rate can meet: at most 0, or at least 1 (see the module doc)."""
    if summary.counts is None or threshold is None:
        return False
    return threshold <= 0.0 if direction == "at_most" else threshold >= 1.0


def _observed_verdict(summary: OverSeeds, direction: str, threshold: float, seeds: Sequence[int],
                      confidence: float) -> str:
    """The ``verdict on`` evidence of a limit at the end of a pooled rate's range, judged on the counts."""
    hits, n = summary.counts
    k = len(seeds)
    if direction == "at_most":
        bound, side, word, event = summary.upper, "upper", "certify 0", "succeeds"
        offending = [s for s, v in zip(seeds, summary.values) if v > 0.0]
        seen = f"{hits} of {n} trials over {k} seeds succeeded"
    else:
        bound, side, word, event = summary.lower, "lower", "certify 1", "misses"
        offending = [s for s, v in zip(seeds, summary.values) if v < 1.0]
        seen = f"{n - hits} of {n} trials over {k} seeds missed"
    which = (f"seed{'s' if len(offending) > 1 else ''} {', '.join(str(s) for s in offending)}" if offending
             else "no seed")
    lo, hi = summary.interval
    return (f"the observed counts, not a bound: the one-sided {confidence:.0%} {side} bound of a rate pooled over "
            f"seeds can never {word} (here {_fmt(bound)}; no number of trials makes it {_fmt(threshold)}), so a "
            f"limit of {_fmt(threshold)} fails when any seed's attack {event} in any trial; {seen} ({which}); "
            f"{confidence:.0%} interval of the pooled rate {_fmt(lo)} .. {_fmt(hi)}"
            + ("" if offending else f": none seen in {n} trials, which bounds the rate by {_fmt(bound)}, "
                                    "not a rate of 0"))


def _combined_target(members: Sequence[LeakResult], seeds: Sequence[int]) -> dict[str, Any]:
    hashes = [str((r.target or {}).get("content_hash") or "") for r in members]
    target = {k: v for k, v in (members[0].target or {}).items() if k not in ("content_hash", "seed")}
    target["seeds"] = list(seeds)
    if all(hashes):
        target["member_hashes"] = hashes
        target["content_hash"] = hashlib.sha256("\n".join(hashes).encode()).hexdigest()
    return target


def one_draw(result: LeakResult, seed: int) -> LeakResult:
    """A ``k = 1`` result, unchanged but for evidence that says it is one draw of the training seed."""
    note = (f"one draw: the figure of one model (training seed {seed}); a retrain with another seed may differ, "
            "so give seeds=k (or --privleak-seeds k) for a figure that holds across training seeds")
    return replace(result, evidence={**result.evidence, "over seeds": note})


def aggregate(members: Sequence[LeakResult], seeds: Sequence[int]) -> LeakResult:
    """One :class:`LeakResult` for the same figure measured on the models of ``seeds`` (see the module doc)."""
    if len(members) != len(seeds) or not members:
        raise ValueError(f"aggregate needs one result per seed, got {len(members)} result(s) for seeds {list(seeds)}")
    first = members[0]
    if len(members) == 1:
        return one_draw(first, seeds[0])
    confidence = first.confidence or DEFAULT_CONFIDENCE
    summary = summarise(members, confidence)
    direction, threshold = first.direction, first.threshold
    worst_i = max(range(len(members)), key=lambda i: summary.values[i] if direction == "at_most"
                  else -summary.values[i])
    bound = summary.upper if direction == "at_most" else summary.lower
    side = "upper" if direction == "at_most" else "lower"
    observed = limit_at_range_end(summary, direction, threshold)
    per_seed = ", ".join(f"seed {s}: {_fmt(v)}" for s, v in zip(seeds, summary.values))
    extra = {"mean": summary.mean, f"{side}_bound": bound, "worst_seed": float(seeds[worst_i]),
             "worst_figure": summary.values[worst_i], "seeds": float(len(members))}
    if summary.counts is not None:
        extra["pooled_successes"], extra["pooled_trials"] = float(summary.counts[0]), float(summary.counts[1])
    table = canary_table(members)
    evidence = {"per seed": per_seed, "over seeds": f"mean {_fmt(summary.mean)}; {confidence:.0%} interval over "
                f"seeds by {summary.method}"}
    if table is not None:
        cells = [v for row in table for v in row]
        worst_cell = max(cells) if direction == "at_most" else min(cells)
        extra["worst_cell"] = worst_cell
        evidence["over canaries"] = (f"each seed's figure is the mean over the same {len(table[0])} canaries; the "
                                     f"worst canary of any seed reads {_fmt(worst_cell)}")
    if threshold is not None:
        over = sum(_violates(direction, v, threshold) for v in summary.values)
        extra["share_over_limit"] = over / len(members)
        evidence["verdict on"] = (_observed_verdict(summary, direction, threshold, seeds, confidence) if observed
                                  else f"the one-sided {confidence:.0%} {side} bound over seeds"
                                  f"{' and canaries' if table is not None else ''} ({_fmt(bound)}), "
                                  f"not the mean: a pipeline that plausibly leaks fails; {over} of {len(members)} "
                                  f"seeds {'violate' if over != 1 else 'violates'} the limit, the worst is seed "
                                  f"{seeds[worst_i]} ({_fmt(summary.values[worst_i])})")
    for key, value in first.extra.items():  # member extras as means over seeds, e.g. cea's HDT
        if key not in extra and all(key in r.extra for r in members):
            extra[f"{key}_mean"] = math.fsum(r.extra[key] for r in members) / len(members)
    evidence.update({f"seed {seeds[0]}: {k}": v for k, v in first.evidence.items() if k != INCONCLUSIVE})
    judged = bound if threshold is not None and not observed else summary.mean
    combined = replace(first, value=judged, interval=summary.interval,
                       confidence=confidence, evidence=evidence, extra=extra,
                       target={k: v for k, v in _combined_target(members, seeds).items()
                               if k not in (INCONCLUSIVE, "inconclusive_allowed")},
                       per_seed=summary.values, per_canary=tuple(table) if table is not None else ())
    short = [(s, r) for s, r in zip(seeds, members) if (r.target or {}).get(INCONCLUSIVE)]
    if not short:
        return combined
    # a seed whose run was cut short by its budget leaves the figure over seeds inconclusive too
    return mark_inconclusive(combined, covered=short_runs(short, len(members)),
                             rest=short[0][1].evidence.get(INCONCLUSIVE, "the budget each seed's message names"),
                             allowed=all((r.target or {}).get("inconclusive_allowed") for _, r in short))


def short_runs(short: Sequence[tuple[int, LeakResult]], k: int) -> str:
    """``2 of 5 seeds' runs (seeds 3, 4) were cut short by their budget``."""
    return (f"{len(short)} of {k} seeds' runs (seed{'s' if len(short) > 1 else ''} "
            f"{', '.join(str(s) for s, _ in short)}) were cut short by their budget")


@contextmanager
def _collected() -> Iterator[list[LeakResult]]:
    """Record into a private list inside the block (the member runs), then restore the test's sink."""
    saved = getattr(_results._local, "sink", None)  # the plugin's per-test list, or None outside pytest
    sink: list[LeakResult] = []
    _results.set_sink(sink)
    try:
        yield sink
    finally:
        _results.set_sink(saved)


def _keyed(found: Sequence[LeakResult]) -> dict[tuple[str, str, int], LeakResult]:
    out, seen = {}, {}
    for r in found:
        base = (r.name, r.label)
        seen[base] = seen.get(base, 0) + 1
        out[(*base, seen[base])] = r
    return out


def _pick(value: Any, index: int) -> Any:
    """``value`` with each :class:`SeedModels` (itself, or an item of a list or tuple) replaced by member ``index``."""
    if isinstance(value, SeedModels):
        return value[index]
    if isinstance(value, (list, tuple)) and any(isinstance(v, SeedModels) for v in value):
        return type(value)(v[index] if isinstance(v, SeedModels) else v for v in value)
    return value


def _member_args(args: tuple, kwargs: dict, index: int) -> tuple[tuple, dict]:
    return tuple(_pick(a, index) for a in args), {k: _pick(v, index) for k, v in kwargs.items()}


def seed_sets(args: tuple, kwargs: dict) -> list:
    """The :class:`SeedModels` among a call's arguments, also as items of a list or tuple argument (the
    paper's one model per canary, ``[m1, m2, m3]``); several must have the same seeds."""
    values = [v for v in (*args, *kwargs.values())]
    values += [item for v in values if isinstance(v, (list, tuple)) for item in v]
    found = [v for v in values if isinstance(v, SeedModels)]
    for other in found[1:]:
        if other.seeds != found[0].seeds:
            raise ValueError(f"the models over seeds passed together must share their seeds: {found[0]!r} and "
                             f"{other!r}; fix: train them with the same seeds=k and seed=")
    return found


def run_over_seeds(function: Callable[..., Any], args: tuple, kwargs: dict, sets: list) -> Any:
    """Call ``function`` once per seed with each :class:`SeedModels` replaced by its member, then record one
    aggregate per recorded figure and return them in the shape the function returns (raising
    :class:`PrivacyLeakError` for the first failing aggregate)."""
    __tracebackhide__ = True
    seeds = sets[0].seeds
    per_seed: list[dict] = []
    shape: Any = None
    for index in range(len(seeds)):
        member_args, member_kwargs = _member_args(args, kwargs, index)
        with _collected() as sink, progress.part(f"seed {index + 1} of {len(seeds)}"):   # a long attack's lines
            try:
                returned = function(*member_args, **member_kwargs)
            except PrivacyLeakError as exc:
                returned = exc.result
        listed = returned if isinstance(returned, list) else [returned]
        per_seed.append(_keyed(sink) or _keyed([r for r in listed if isinstance(r, LeakResult)]))
        if index == 0:
            shape = returned
    keys = list(per_seed[0]) + [key for found in per_seed[1:] for key in found if key not in per_seed[0]]
    keys = list(dict.fromkeys(keys))
    aggregates = {}
    for key in keys:
        present = [(s, found[key]) for s, found in zip(seeds, per_seed) if key in found]
        aggregates[key] = _results.record(aggregate([r for _, r in present], [s for s, _ in present]))
    failing = next((r for r in aggregates.values() if not r.passed), None)
    if failing is not None:
        raise PrivacyLeakError(failing)
    short = next((r for r in aggregates.values()
                  if r.target.get(INCONCLUSIVE) and not r.target.get("inconclusive_allowed")), None)
    if short is not None:   # within the limit, but some seed did not cover what the default covers
        raise InconclusiveAuditError(short, covered=short.evidence[INCONCLUSIVE].split("; ")[0],
                                     rest=short.evidence[INCONCLUSIVE].split("; to cover the rest: ")[-1])
    if isinstance(shape, LeakResult):
        return aggregates.get(next(iter(_keyed([shape]))), shape)
    if isinstance(shape, list) and all(isinstance(item, LeakResult) for item in shape):
        return [aggregates.get(key, item) for key, item in _keyed(shape).items()]
    return shape
