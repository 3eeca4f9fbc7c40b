"""The CI merge gate: compare this run's results with a stored baseline (a report.json).

A result is matched with the baseline entry of the same key (test node id +
``attack.metric`` + label). The gate FAILS when

* a result regressed: it moved in the leaking direction by more than its
  tolerance (an ``at_most`` figure such as attack accuracy, exposure or an ε
  lower bound grew; an ``at_least`` figure shrank);
* a result cannot be compared: its direction differs from the baseline's, or a
  value is NaN;
* a baseline entry has no counterpart in this run (its test was skipped,
  deselected or crashed, or its key changed), unless ``--privleak-allow-missing``;
* nothing at all was compared, or the run's keys are unusable (see
  :mod:`report.keys`).

New results (not in the baseline) are listed, never gated.

Figures measured over ``k >= 2`` training seeds (``per_seed``, issue 26) are
compared as distributions, not points, by the seed rule of
:mod:`.seed_rule` (issue 37): a test at :data:`SEED_ALPHA` that rejects (an
exact test of pooled counts for a rate; for any other figure a permutation
test over seeds that combines Welch's t with statistics for a shift of some
seeds or some canaries), with the mean also worse by more than the
tolerance (a shift the seeds cannot explain, and larger than the team
accepts); the tolerance rule alone applies to ``k = 1`` (and when neither
side varies over seeds, so no test is possible). A baseline saved with
another ``k`` than the run's cannot be compared (an invalid entry naming
both). A figure whose baseline and run both sit within the tolerance of its
ceiling cannot show growth: the gate lists it as ``CEILING`` with the remedy
instead of calling the comparison passed.

Tolerances come from the baseline file or the workflow's command line (the
ini of the checkout under test can only tighten them), never from the run
under test, so a change cannot raise its own tolerance and pass. When a baseline is
saved, each entry stores the tolerance resolved then (:func:`saved_tolerance`:
the assertion's own ``tolerance=``, else the ini option ``privleak_tolerance``
as ``attack.metric=T`` then ``metric=T``, else the built-in per-metric default
:data:`DEFAULT_TOLERANCES`, else the ini ``default=T``, else
:data:`FALLBACK_TOLERANCE`). When comparing (:func:`gate_tolerance`), the
baseline's stored tolerance applies, else the same ini/built-in chain; the
current run's ``tolerance`` is ignored (a note says so when it differs).
Tolerances are absolute, in the metric's own unit.
"""
from __future__ import annotations

import math
from typing import Any

import pytest

from .model import figure
from .printable import printable
from .verdict.strength import audit_problems, describe_problem, stronger_settings

#: Built-in absolute tolerances by metric name: rates in [0, 1] move by a few points on GPUs,
#: exposures (bits) by about one bit, ε lower bounds by a tenth. The Mix And Match rank (a place
#: among |V| tokens; measured: it did not move for 16 canaries under other batch sizes or float64)
#: may lose one place, a tie broken the other way or one candidate crossing the secret.
#: A canary set's mean exposure (issue 37): one canary's figure may move by a bit, the mean of m = 8 by about
#: 1/sqrt(8) of it when the canaries move independently (measured in docs/report-and-gate.md)
MEAN_EXPOSURE_TOLERANCE = 0.35
DEFAULT_TOLERANCES: dict[str, float] = {
    "accuracy": 0.05, "hdt": 0.05, "auc": 0.05, "advantage": 0.05, "tpr": 0.05,
    "reconstruction_accuracy": 0.05, "linking_auc": 0.05,
    "exposure_bits": 1.0, "mean_exposure_bits": MEAN_EXPOSURE_TOLERANCE, "d_exposure_bits": 1.0, "d_exposure_class_max_bits": 1.0, "epsilon_lcb": 0.1, "epsilon": 0.1,
    "mix-and-match.rank": 1.0,
}
FALLBACK_TOLERANCE = 0.05
#: The smallest built-in tolerance of a TPR at a low FPR (about three members of 300 moving)
TPR_TOLERANCE_FLOOR = 0.01
#: One-sided level of the seed test: the gate's false-alarm rate on seed-only changes, if the per-seed
#: figures are near normal (measured by bench/bench_seeds.py).
SEED_ALPHA = 0.05
_EPS = 1e-12
ALLOW_MISSING_HOW = "--privleak-allow-missing on the workflow's command line (the ini cannot allow it)"


def parse_tolerances(lines, *, option: str = "privleak_tolerance") -> dict[str, float]:
    """Parse ini lines ``cea.accuracy=0.1`` / ``exposure=2`` / ``default=0.05`` into a dict.

    Keys are ``attack.metric``, a bare ``metric``, or ``default``; values are
    non-negative absolute tolerances in the metric's own unit.
    """
    out: dict[str, float] = {}
    for number, raw in enumerate(lines or [], start=1):
        line = str(raw).strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        try:
            tol = float(value)
        except ValueError:
            tol = float("nan")
        if not sep or not key or not (tol >= 0) or tol == float("inf"):
            raise ValueError(f"ini option {option}, line {number} ({line!r}): expected 'attack.metric=TOLERANCE' "
                             "with a finite non-negative number, e.g. 'cea.accuracy=0.1' or 'default=0.05'")
        out[key] = tol
    return out


def configured_tolerance(attack: str, metric: str, overrides: dict[str, float]) -> tuple[float, str]:
    """The tolerance the ini or the built-in table gives ``attack.metric``, and which of them gave it."""
    name = f"{attack}.{metric}"
    for table, source in ((overrides, "ini"), (DEFAULT_TOLERANCES, "built-in default")):
        for key in (name, metric):
            if key in table:
                return float(table[key]), source
        if table is DEFAULT_TOLERANCES and _tpr_tolerance(metric) is not None:
            return _tpr_tolerance(metric), source
    if "default" in overrides:
        return float(overrides["default"]), "ini"
    return FALLBACK_TOLERANCE, "built-in default"


def _tpr_tolerance(metric: str) -> float | None:
    """A TPR at a false-positive rate (``tpr_at_fpr_0.01``) may move by the FPR itself, at least 0.01: the
    fallback 0.05 let a TPR at 1 % FPR grow from 0.010 to 0.054 on every seed (5x chance) without failing."""
    if not metric.startswith("tpr_at_fpr_"):
        return None
    try:
        fpr = float(metric[len("tpr_at_fpr_"):])
    except ValueError:
        return None
    return max(fpr, TPR_TOLERANCE_FLOOR) if math.isfinite(fpr) and fpr > 0 else None


def saved_tolerance(result: dict[str, Any], overrides: dict[str, float]) -> tuple[float, str]:
    """The tolerance stored with a result in a new baseline: the assertion's own, else the configured one.

    Resolved when the baseline is saved (on the main branch), so the assertion's
    ``tolerance=`` there becomes part of the baseline, not of later runs.
    """
    own = figure(result.get("tolerance"))
    if own is not None:
        return own, "assertion"
    return configured_tolerance(result["attack"], result["metric"], overrides)


def tolerance_for(result: dict[str, Any], overrides: dict[str, float]) -> float:
    """The tolerance a baseline saved from ``result`` stores (see :func:`saved_tolerance`)."""
    return saved_tolerance(result, overrides)[0]


def gate_tolerance(entry: dict[str, Any], overrides: dict[str, float]) -> tuple[float, str]:
    """The tolerance that gates a baseline ``entry``: the one stored in the baseline, else the configured one."""
    stored = figure(entry.get("tolerance"))
    if stored is not None:
        tol, source = stored, "baseline"
    else:
        tol, source = configured_tolerance(entry["attack"], entry["metric"], overrides)
    if not (math.isfinite(tol) and tol >= 0):
        raise ValueError(f"baseline entry {entry.get('key')!r}: tolerance {tol!r} is not a finite number >= 0")
    return tol, source


def _worsening(direction: str, before: float, after: float) -> float:
    """How far ``after`` moved in the leaking direction (negative when it improved)."""
    if before == after:
        return 0.0
    delta = after - before if direction == "at_most" else before - after
    return math.inf if math.isnan(delta) else delta


def seed_count(result: dict[str, Any]) -> int:
    """How many training seeds a stored result was measured over (1: one draw, no ``per_seed``)."""
    return max(len(result.get("per_seed") or ()), 1)


def _index(report: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {r["key"]: (t["nodeid"], r) for t in report.get("tests", []) for r in t.get("results", [])}


def _uncomparable(old: dict[str, Any], new: dict[str, Any], before: float, after: float) -> str | None:
    """Why a baseline entry and this run's result cannot be compared, or ``None``."""
    if old["direction"] != new["direction"]:
        return (f"the limit's direction changed from {old['direction']} (baseline) to {new['direction']} (this "
                "run), so 'worse' means opposite things; if the assertion really changed, re-save the baseline "
                "on the main branch")
    if math.isnan(before):
        return "the baseline's value is NaN; re-save the baseline on the main branch"
    if math.isnan(after):
        return "this run's value is NaN; check what the model or scorer returned"
    return None


def _tolerance_notes(key: str, result: dict[str, Any], tol: float, source: str,
                     overrides: dict[str, float]) -> list[str]:
    notes = []
    own = figure(result.get("tolerance"))
    if own is not None and own != tol:
        notes.append(f"{key}: this run asks tolerance {_num(own)}, the gate uses {_num(tol)} ({source}); "
                     "tolerances come from the baseline or the ini, never from the run under test (re-save the "
                     "baseline on the main branch to adopt a new one)")
    if source == "baseline":
        ini, ini_source = configured_tolerance(result["attack"], result["metric"], overrides)
        if ini_source == "ini" and ini != tol:
            notes.append(f"{key}: the ini privleak_tolerance gives {_num(ini)}, the baseline stores {_num(tol)}, "
                         "which applies (re-save the baseline to adopt the ini value)")
    return notes


def _seed_mismatch(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    k_old, k_new = seed_count(old), seed_count(new)
    if k_old == k_new:
        if k_old > 1 and not all(math.isfinite(figure(v)) for v in (*old["per_seed"], *new["per_seed"])):
            # an infinite seed on both sides made the means equal, so any move of the other seeds passed
            return ("a per-seed figure is infinite or NaN, so no test over seeds can compare the two sets; check "
                    "what the model or scorer returned, or gate this figure with one seed (--privleak-seeds 1)")
        return None
    return (f"the baseline was saved with {k_old} training seed(s) (k={k_old}) and this run measured {k_new} "
            f"(k={k_new}), so their figures are different statistics; fix: run with --privleak-seeds {k_old} (or "
            f"seeds={k_old}), or re-save the baseline on the main branch with --privleak-seeds {k_new}")


def _inconclusive(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a figure is no measurement to compare: it was cut short by its budget (accepted or not)."""
    for side, result in (("this run's", new), ("the baseline's", old)):
        target = result.get("target") if isinstance(result.get("target"), dict) else {}
        if target.get("inconclusive"):
            how = " and accepted with allow_inconclusive=True" if target.get("inconclusive_allowed") else ""
            return (f"{side} figure is inconclusive (the measurement was cut short by its budget{how}), so it "
                    "is no measurement to compare; give the audit the budget its message names (on the main "
                    f"branch too for the baseline), or pass {ALLOW_MISSING_HOW} to leave it ungated")
    return None


def _audit_notes(key: str, before: Any, after: Any, attack: str) -> list[str]:
    """A stronger audit than the baseline's is compared, and said; so is another plugin version."""
    notes = []
    stronger = stronger_settings(attack, before, after)
    if stronger:
        notes.append(f"{key}: this run's audit is stronger than the baseline's ({', '.join(stronger)}); its "
                     "figure is compared as usual")
    if isinstance(before, dict) and isinstance(after, dict) and before.get("version") != after.get("version"):
        notes.append(f"{key}: measured by pytest-privleak {after.get('version')}, the baseline by "
                     f"{before.get('version')}")
    return notes


def compare(current: dict[str, Any], baseline: dict[str, Any], overrides: dict[str, float], path: str, *,
            allow_missing: bool = False, errors: list[str] | tuple[str, ...] = (),
            alpha: float = SEED_ALPHA) -> dict[str, Any]:
    """The ``baseline`` part of the report: regressions, improvements, invalid, new, missing, verdict.

    ``errors`` are problems found before comparing (e.g. unusable keys); they fail the gate. ``alpha``:
    the one-sided level of the seed test for figures over ``k >= 2`` seeds. ``seeds`` lists every
    compared figure over seeds with both sets of per-seed figures (the report draws them).
    """
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 0.5):
        raise ValueError(f"the seed test's alpha={alpha!r} must lie in (0, 0.5), e.g. 0.05")
    now, before = _index(current), _index(baseline)
    regressions, improvements, invalid, notes, seeds, ceiling = [], [], [], [], [], []
    weakened, unmeasured = [], []
    for key, (nodeid, result) in now.items():
        if key not in before:
            continue
        old = before[key][1]
        tol, source = gate_tolerance(old, overrides)
        b, a = figure(old["value"]), figure(result["value"])
        change = {"key": key, "nodeid": nodeid, "metric": f"{result['attack']}.{result['metric']}",
                  "label": result.get("label") or "", "direction": result["direction"],
                  "before": b, "after": a, "tolerance": tol, "tolerance_source": source}
        # strength before figures (issue 36): an inconclusive figure or a weaker audit is never compared
        weaker = audit_problems(result["attack"], old.get("audit"), result.get("audit"))
        if weaker:
            weakened.append({**change, "settings": weaker})
            continue
        partial = _inconclusive(old, result)
        if partial:
            unmeasured.append({**change, "reason": partial})
            continue
        notes += _audit_notes(key, old.get("audit"), result.get("audit"), result["attack"])
        reason = _uncomparable(old, result, b, a) or _seed_mismatch(old, result)
        if reason:
            invalid.append({**change, "reason": reason})
            continue
        if seed_count(old) > 1:
            from . import seed_rule      # numpy and scipy only where figures over seeds are compared

            outcome = seed_rule.judge(change, old, result, alpha)
            seeds.append({**change, "outcome": outcome})
        else:
            worse = _worsening(result["direction"], b, a)
            outcome = "regression" if worse > tol + _EPS else "improvement" if -worse > tol + _EPS else "same"
        stuck = cannot_grow(change, old, result) if outcome != "regression" else None
        if stuck:
            ceiling.append({**change, "reason": stuck})
        if outcome == "regression":
            regressions.append(change)
        elif outcome == "improvement":
            improvements.append(change)
        notes += _tolerance_notes(key, result, tol, source, overrides)
    comparison = {"path": str(path), "passed": False, "regressions": regressions, "improvements": improvements,
                  "invalid": invalid, "new": sorted(set(now) - set(before)),
                  "vanished": sorted(set(before) - set(now)),
                  "compared": len(set(now) & set(before)) - len(unmeasured),
                  "allow_missing": bool(allow_missing), "errors": list(errors), "notes": notes,
                  "seeds": seeds, "weakened": weakened, "inconclusive": unmeasured, "ceiling": ceiling}
    comparison["passed"] = gate_exit(comparison) is None
    return comparison


def failed_comparison(path: str, error: str) -> dict[str, Any]:
    """The ``baseline`` part when the comparison itself could not run: the gate fails, naming why."""
    return {"path": str(path), "passed": False, "regressions": [], "improvements": [], "invalid": [], "new": [],
            "vanished": [], "compared": 0, "allow_missing": False, "errors": [error], "notes": [], "seeds": [],
            "weakened": [], "inconclusive": [], "ceiling": []}


def gate_exit(comparison: dict[str, Any]) -> pytest.ExitCode | None:
    """The exit status the gate asks for: tests failed for a regression, usage error for an invalid comparison."""
    if comparison.get("regressions"):
        return pytest.ExitCode.TESTS_FAILED
    missing = (comparison.get("vanished") or comparison.get("inconclusive")) and not comparison.get("allow_missing")
    if comparison.get("invalid") or comparison.get("errors") or comparison.get("weakened") or missing \
            or not comparison.get("compared"):
        return pytest.ExitCode.USAGE_ERROR
    return None


def _num(x: float) -> str:
    from ..results import _fmt

    return _fmt(x)


def describe_change(change: dict[str, Any]) -> str:
    """``t.py::t cea.accuracy [pin]: before 0.100, after 0.400 (moved 0.300, tolerance 0.050 (baseline); ...)``."""
    label = f" [{change['label']}]" if change.get("label") else ""
    before, after, tol = figure(change["before"]), figure(change["after"]), figure(change["tolerance"])
    moved = abs(_worsening(change["direction"], before, after))
    rule = "must not grow" if change["direction"] == "at_most" else "must not shrink"
    if change.get("before_seeds") is not None:
        return _describe_seed_change(change, label, rule)
    source = f" ({change['tolerance_source']})" if change.get("tolerance_source") else ""
    return (f"{change['nodeid']} {change['metric']}{label}: before {_num(before)}, after {_num(after)} "
            f"(moved {_num(moved)}, tolerance {_num(tol)}{source}; {rule})")


def _describe_seed_change(change: dict[str, Any], label: str, rule: str) -> str:
    """``... : mean before 2.000 (seeds 1.000, 2.000, 3.000), after 5.000 (...); one-sided Welch t p = 0.011 ...``."""
    seeds = lambda values: ", ".join(_num(figure(v)) for v in values)  # noqa: E731
    k = len(change["before_seeds"])
    before, after = _num(figure(change["before"])), _num(figure(change["after"]))
    head = (f"{change['nodeid']} {change['metric']}{label}: mean over {k} seeds before {before} "
            f"({seeds(change['before_seeds'])}), after {after} ({seeds(change['after_seeds'])})")
    if change.get("p_value") is None:
        return f"{head}; {change.get('rule', 'tolerance')}, tolerance {_num(figure(change['tolerance']))}; {rule}"
    moved = _worsening(change["direction"], figure(change["before"]), figure(change["after"]))
    return (f"{head}; {change['rule']}: p = {change['p_value']:.3g}, mean moved {_num(moved)} against tolerance "
            f"{_num(figure(change['tolerance']))} (both must hold for a regression); {rule}")


def _missing_fix(path: str) -> str:
    return ("  fix: run the tests that record these results (were they skipped, deselected with -k/-m, or did "
            "they stop before recording?); if a result's label changed, give the assertion a stable name= and "
            f"re-save the baseline on the main branch with `pytest --privleak-save-baseline {path}`; to gate only "
            f"what this run measured, pass {ALLOW_MISSING_HOW}")


def gate_lines(comparison: dict[str, Any]) -> list[str]:
    """Human summary of the gate, used by the terminal summary and summary.md.

    One line each: labels, test ids and keys come from the project under test, so every line is made
    :func:`~.printable.printable` (a newline in a label is shown as ``\\x0a``, never a line of its own).
    """
    path = comparison["path"]
    regressions, invalid = comparison.get("regressions", []), comparison.get("invalid", [])
    missing, allowed = comparison.get("vanished", []), comparison.get("allow_missing", False)
    weakened, partial = comparison.get("weakened", []), comparison.get("inconclusive", [])
    compared = comparison.get("compared", 0)
    # Root causes first: an unusable key explains the missing and new entries below it.
    lines = [f"privleak baseline gate FAILED: {error}" for error in comparison.get("errors", [])]
    if weakened:
        lines.append(f"privleak baseline gate FAILED: {len(weakened)} result(s) were measured by a weaker or "
                     f"different audit than in {path}, so their figures were not compared")
        for c in weakened:
            lines.append(f"  WEAKENED {_named_change(c)}: "
                         + "; ".join(describe_problem(p) for p in c.get("settings", [])))
        lines.append("  fix: measure with the baseline's settings (or stronger ones); if the audit really "
                     "changes, re-save the baseline on the main branch")
    if regressions:
        lines.append(f"privleak baseline gate FAILED: {len(regressions)} result(s) leak more than in {path} "
                     "beyond tolerance")
        lines += [f"  REGRESSION {describe_change(c)}" for c in regressions]
    if invalid:
        lines.append(f"privleak baseline gate FAILED: {len(invalid)} result(s) cannot be compared with {path}")
        lines += [f"  INVALID {_named_change(c)}: {c['reason']}" for c in invalid]
    if partial and not allowed:
        lines.append(f"privleak baseline gate FAILED: {len(partial)} result(s) are inconclusive, so their figures "
                     f"were not compared with {path}")
        lines += [f"  INCONCLUSIVE {_named_change(c)}: {c['reason']}" for c in partial]
    if missing and not allowed:
        one = len(missing) == 1
        lines.append(f"privleak baseline gate FAILED: {len(missing)} baseline entr{'y' if one else 'ies'} of {path} "
                     f"{'has' if one else 'have'} no result in this run, so {'it was' if one else 'they were'} "
                     "not compared")
        lines += [f"  MISSING {key}" for key in missing]
        lines.append(_missing_fix(path))
    if not compared and partial:
        lines.append(f"privleak baseline gate FAILED: nothing was compared: every result with a counterpart in "
                     f"{path} is inconclusive")
    elif not compared and (missing or not comparison.get("errors")):
        lines.append(f"privleak baseline gate FAILED: nothing was compared: no result of this run has a "
                     f"counterpart in {path}; is it the baseline of this test suite?")
    stuck = comparison.get("ceiling", [])
    if comparison.get("passed"):
        over = len(comparison.get("seeds", []))
        how = (f" ({over} over training seeds, by the seed rule at alpha "
               f"{comparison['seeds'][0].get('alpha', SEED_ALPHA):g})" if over else "")
        if stuck:
            lines.append(f"privleak baseline gate: {compared} result(s) compared with {path}{how}, none worse than "
                         f"its tolerance, but {len(stuck)} cannot show growth (at the ceiling on both sides): the "
                         f"comparison proves nothing for {'it' if len(stuck) == 1 else 'them'}")
        else:
            lines.append(f"privleak baseline gate passed: {compared} result(s) compared with {path}{how}, none worse "
                         "than its tolerance")
    lines += [f"  CEILING {c['nodeid']} {c['metric']}" + (f" [{c['label']}]" if c.get("label") else "")
              + f": {c['reason']}" for c in stuck]
    if missing and allowed:
        lines += [f"  missing, allowed by --privleak-allow-missing (not gated): {key}" for key in missing]
    if partial and allowed:
        lines += [f"  inconclusive, allowed by --privleak-allow-missing (not gated): {c['key']}" for c in partial]
    lines += [f"  improved   {describe_change(c)}" for c in comparison.get("improvements", [])]
    lines += [f"  new (not in baseline, not gated): {key}" for key in comparison.get("new", [])]
    lines += [f"  note: {note}" for note in comparison.get("notes", [])]
    return [printable(line) for line in lines]


def _named_change(change: dict[str, Any]) -> str:
    """``t.py::t cea.accuracy [pin]`` of a compared entry."""
    return f"{change['nodeid']} {change['metric']}" + (f" [{change['label']}]" if change.get("label") else "")


def cannot_grow(change: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a figure cannot show growth beyond its tolerance, or None (issue 37 item 3).

    An ``at_most`` figure with a ceiling (exposure: ``log2 |R|``; a rate: 1) whose baseline mean sits within
    the tolerance of it can never grow by more than the tolerance, so no regression can show; when the run
    is there too, the comparison says so instead of passing."""
    if change["direction"] != "at_most":
        return None
    ceilings = {figure(old.get("ceiling")), figure(new.get("ceiling"))}
    if len(ceilings) != 1 or None in ceilings:
        return None
    ceiling, tol = ceilings.pop(), figure(change["tolerance"])
    before, after = figure(change["before"]), figure(change["after"])
    if not (math.isfinite(ceiling) and before >= ceiling - tol - _EPS and after >= ceiling - tol - _EPS):
        return None
    return (f"the figure sits at its ceiling on both sides (before {before:.4g}, after {after:.4g}, ceiling "
            f"{ceiling:.4g}, tolerance {tol:g}), so this comparison cannot show growth; fix: measure where it has "
            "room (fewer training epochs, a smaller repeat count R in the test, more canaries: canary(..., "
            "count=m)), then re-save the baseline")
