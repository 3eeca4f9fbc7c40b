"""Baseline files: read and check one at start-up, and make one from this run's report.

A baseline is a report.json (:mod:`report.model`) whose results carry the
tolerance that gates them (resolved when it was saved, see
:func:`pytest_privleak.report.gate.saved_tolerance`). Every problem with the
file is a :class:`~report.model.ReportFileError` raised when it is read (the
plugin turns it into a usage error at start-up), never a crash at session end.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .keys import NAME_FIX, key_problems, unstable_reason
from .model import ReportFileError
from .reader import load_report
from .structure import comparable_figure


def _fix(path: Path) -> str:
    return f"regenerate it on the main branch with `pytest --privleak-save-baseline {path}`"


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Read the baseline at ``path`` and check what the gate relies on; :class:`ReportFileError` if unusable.

    Beyond :func:`reader.load_report` (readable, UTF-8, JSON, a version-1 report,
    the fields the gate reads well-formed, tolerances finite and >= 0): it holds
    at least one result, no key twice, and no key with run-specific text.
    """
    path = Path(path)
    data = load_report(path)
    entries = [r for t in data["tests"] for r in t["results"]]
    if not entries:
        raise ReportFileError(f"privleak baseline {path} holds no results ({len(data['tests'])} test(s)), so the "
                              f"gate would compare nothing; {_fix(path)} with the privacy tests selected")
    seen: set[str] = set()
    for entry in entries:
        key = entry["key"]
        if key in seen:
            raise ReportFileError(f"privleak baseline {path}: entry {key!r} appears twice, so the gate cannot "
                                  f"tell which one to compare; {_fix(path)}")
        seen.add(key)
        reason = unstable_reason(key)
        if reason:
            raise ReportFileError(f"privleak baseline {path}: entry {key!r} holds {reason}, which changes every "
                                  f"run, so no run can ever match it; {NAME_FIX}, then {_fix(path)}")
    return data


def baseline_to_save(report: dict[str, Any], overrides: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """This run's report as a baseline (each result with its resolved tolerance), and why it must not be saved.

    The problems: no result at all, unusable keys (:func:`keys.key_problems`), a
    value that is not a figure (NaN, e.g. put there by a report hook), or a
    tolerance that is not a finite number >= 0. A baseline with any of them
    would be refused when read, so it is not written.
    """
    from .gate import saved_tolerance

    problems = key_problems(report["tests"])
    tests = []
    for test in report["tests"]:
        results = []
        for result in test["results"]:
            if comparable_figure(result.get("value")) is None:
                problems.append(f"result {result.get('key')!r} of test {test['nodeid']} has value "
                                f"{result.get('value')!r}, which no later run can be compared with; check what "
                                "the model or scorer returned (and any pytest_privleak_report hook)")
            tol, source = saved_tolerance(result, overrides)
            if not (math.isfinite(tol) and tol >= 0):
                problems.append(f"result {result.get('key')!r} of test {test['nodeid']} asks tolerance {tol!r}; "
                                "give tolerance= a finite number >= 0 (in the metric's unit) or leave it out")
            results.append({**result, "tolerance": tol, "tolerance_source": source})
        tests.append({**test, "results": results})
    if not any(test["results"] for test in tests):
        problems.append("no privacy result was recorded in this run, so there is nothing to save as a baseline; "
                        "run the privacy tests (check -k/-m and skips) with --privleak-save-baseline")
    return {**report, "tests": tests, "baseline": None}, problems


def write_refusal_report(settings: Any, error: str) -> Path | None:
    """When the baseline is refused at start-up: a report with no tests whose gate part names ``error``.

    Written only when a report folder was asked for, so that CI's report
    artefact and ``$GITHUB_STEP_SUMMARY`` say why the run stopped instead of
    being absent. Returns the summary.md written, or ``None`` (not asked, or the
    folder cannot be written: the usage error is what matters then).
    """
    from .gate import failed_comparison
    from .model import build_report, encode
    from .writer import write_report

    if settings.report_dir is None:
        return None
    report = build_report([], [], seed=settings.seed, xdist=False)
    report["baseline"] = encode(failed_comparison(str(settings.baseline), error))
    try:
        return write_report(report, settings.report_dir)["markdown"]
    except OSError:
        return None
