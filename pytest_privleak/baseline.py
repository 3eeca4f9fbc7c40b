"""The CI merge gate: compare this run's results with a stored report.json (the baseline).

A result is matched by its key (test node id + ``attack.metric`` + label). It
regressed when it moved in the leaking direction by more than its tolerance:
an ``at_most`` figure (attack accuracy, exposure, ε lower bound) grew, an
``at_least`` figure shrank. New and vanished results are listed, never failed.

Tolerance, first found wins: the assertion's ``LeakResult.tolerance``; the ini
option ``privleak_tolerance`` (``attack.metric=T``, then ``metric=T``); the
built-in per-metric default (:data:`DEFAULT_TOLERANCES`); the ini
``default=T``; :data:`FALLBACK_TOLERANCE`. Tolerances are absolute, in the
metric's own unit.
"""
from __future__ import annotations

import math
from typing import Any

from .report.model import figure

#: Built-in absolute tolerances by metric name: rates in [0, 1] move by a few points on GPUs,
#: exposures (bits) by about one bit, ε lower bounds by a tenth.
DEFAULT_TOLERANCES: dict[str, float] = {
    "accuracy": 0.05, "hdt": 0.05, "auc": 0.05, "advantage": 0.05, "tpr": 0.05,
    "reconstruction_accuracy": 0.05, "linking_auc": 0.05,
    "exposure_bits": 1.0, "d_exposure_bits": 1.0, "epsilon_lcb": 0.1, "epsilon": 0.1,
}
FALLBACK_TOLERANCE = 0.05
_EPS = 1e-12


def tolerance_for(result: dict[str, Any], overrides: dict[str, float]) -> float:
    """The absolute tolerance of one result (see the module docstring for the order)."""
    own = figure(result.get("tolerance"))
    if own is not None:
        return own
    name, metric = f"{result['attack']}.{result['metric']}", result["metric"]
    for table in (overrides, DEFAULT_TOLERANCES):
        for key in (name, metric):
            if key in table:
                return float(table[key])
    return float(overrides.get("default", FALLBACK_TOLERANCE))


def _worsening(direction: str, before: float, after: float) -> float:
    """How far ``after`` moved in the leaking direction (negative when it improved)."""
    if before == after:
        return 0.0
    delta = after - before if direction == "at_most" else before - after
    return math.inf if math.isnan(delta) else delta


def _index(report: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {r["key"]: (t["nodeid"], r) for t in report.get("tests", []) for r in t.get("results", [])}


def compare(current: dict[str, Any], baseline: dict[str, Any], overrides: dict[str, float],
            path: str) -> dict[str, Any]:
    """The ``baseline`` part of the report: regressions, improvements, new, vanished, passed."""
    now, before = _index(current), _index(baseline)
    regressions, improvements = [], []
    for key, (nodeid, result) in now.items():
        if key not in before:
            continue
        old = before[key][1]
        tol = tolerance_for(result, overrides)
        b, a = figure(old["value"]), figure(result["value"])
        change = {"key": key, "nodeid": nodeid, "metric": f"{result['attack']}.{result['metric']}",
                  "label": result.get("label") or "", "direction": result["direction"],
                  "before": b, "after": a, "tolerance": tol}
        worse = _worsening(result["direction"], b, a)
        if worse > tol + _EPS:
            regressions.append(change)
        elif -worse > tol + _EPS:
            improvements.append(change)
    return {"path": str(path), "passed": not regressions, "regressions": regressions,
            "improvements": improvements, "new": sorted(set(now) - set(before)),
            "vanished": sorted(set(before) - set(now)), "compared": len(set(now) & set(before))}


def _num(x: float) -> str:
    from .results import _fmt

    return _fmt(x)


def describe_change(change: dict[str, Any]) -> str:
    """``tests/x.py::t cea.accuracy [pin]: 0.100 -> 0.400 (worse by 0.300 > tolerance 0.050; must not grow)``."""
    label = f" [{change['label']}]" if change.get("label") else ""
    before, after, tol = figure(change["before"]), figure(change["after"]), figure(change["tolerance"])
    moved = abs(_worsening(change["direction"], before, after))
    rule = "must not grow" if change["direction"] == "at_most" else "must not shrink"
    return (f"{change['nodeid']} {change['metric']}{label}: before {_num(before)}, after {_num(after)} "
            f"(moved {_num(moved)}, tolerance {_num(tol)}; {rule})")


def gate_lines(comparison: dict[str, Any]) -> list[str]:
    """Human summary of the gate, used by the terminal summary and summary.md."""
    path = comparison["path"]
    regressions = comparison["regressions"]
    lines = []
    if regressions:
        lines.append(f"privleak baseline gate FAILED: {len(regressions)} result(s) leak more than in {path} "
                     "beyond tolerance")
        lines += [f"  REGRESSION {describe_change(c)}" for c in regressions]
    else:
        lines.append(f"privleak baseline gate passed: {comparison.get('compared', 0)} result(s) compared with "
                     f"{path}, none worse than its tolerance")
    lines += [f"  improved   {describe_change(c)}" for c in comparison["improvements"]]
    lines += [f"  new (not in baseline, not gated): {key}" for key in comparison["new"]]
    lines += [f"  vanished (in baseline, not in this run): {key}" for key in comparison["vanished"]]
    if comparison.get("compared", 0) == 0 and comparison["vanished"]:
        lines.append(f"  no result in common with {path}: is it the baseline of this test suite?")
    return lines
