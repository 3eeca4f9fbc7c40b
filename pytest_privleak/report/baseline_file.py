"""Baseline files: read and check one at start-up, and make one from this run's report.

A baseline is a report.json (:mod:`report.model`) whose results carry the
tolerance that gates them (resolved when it was saved, see
:func:`pytest_privleak.report.gate.saved_tolerance`); a report.json written by
``--privleak-report`` carries them the same way, so either can be the baseline
and neither takes its tolerances from the checkout under test. Every problem
with the file is a :class:`~report.model.ReportFileError` raised when it is
read (the plugin turns it into a usage error at start-up), never a crash at
session end.

When ``PRIVLEAK_CACHE_HMAC_KEY`` is set, both are signed with it
(:func:`sign`: an HMAC-SHA256 over each entry's key, direction, value and
tolerance), and a baseline read while it is set must carry a valid signature,
so an edited value (say a leaking 0.87 rewritten to 1.0) is refused.
"""
from __future__ import annotations

import hmac
import json
import math
from pathlib import Path
from typing import Any

from ..cache.manifest import HMAC_KEY_ENV, hmac_secret, signature

from .keys import NAME_FIX, key_problems, unstable_reason
from .model import ReportFileError, figure
from .reader import load_report
from .structure import comparable_figure


def _fix(path: Path) -> str:
    return f"regenerate it on the main branch with `pytest --privleak-save-baseline {path}`"


def load_baseline(path: str | Path, *, unsigned_ok: bool = False) -> dict[str, Any]:
    """Read the baseline at ``path`` and check what the gate relies on; :class:`ReportFileError` if unusable.

    Beyond :func:`reader.load_report` (readable, UTF-8, JSON, a version-1 report,
    the fields the gate reads well-formed, tolerances finite and >= 0): it holds
    at least one result, no key twice, no key with run-specific text, and a valid
    signature when signed or when the key is set (:func:`check_signature`;
    ``unsigned_ok``: a signed baseline may be read without the key).
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
    check_signature(data, path, unsigned_ok=unsigned_ok)
    return data


SIGNATURE_FIELD = "signature"
_SIGNED = "pytest-privleak baseline"


def _signed_text(data: dict[str, Any]) -> dict[str, str]:
    """What the signature covers: per entry key, the fields the gate reads (canonical JSON)."""
    from .model import encode

    return {str(r.get("key")): json.dumps(encode([r.get("attack"), r.get("metric"), r.get("direction"),
                                                  r.get("value"), r.get("tolerance")]
                                                 + ([r["per_seed"]] if r.get("per_seed") else [])
                                                 + ([r["audit"]] if r.get("audit") else [])
                                                 + ([r["per_canary"]] if r.get("per_canary") else [])),
                                          separators=(",", ":"))
            for t in data.get("tests", []) for r in t.get("results", [])}


def sign(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with an HMAC signature of its entries when ``PRIVLEAK_CACHE_HMAC_KEY`` is set (else unchanged)."""
    secret = hmac_secret()
    if secret is None:
        return data
    return {**data, SIGNATURE_FIELD: {"hmac": signature(_SIGNED, _signed_text(data), secret),
                                      "covers": "each entry's key, attack, metric, direction, value, tolerance, "
                                                "per-seed and per-canary figures and audit record"}}


UNSIGNED_OK = "--privleak-unsigned-ok"


def unverified_note(data: dict[str, Any], path: Any) -> str | None:
    """The note a gate prints when it reads a signed file without the key (``--privleak-unsigned-ok``)."""
    if SIGNATURE_FIELD in data and hmac_secret() is None:
        return (f"{path} is signed but was read unverified ({HMAC_KEY_ENV} is not set here; accepted by "
                f"{UNSIGNED_OK})")
    return None


def check_signature(data: dict[str, Any], path: Path, *, unsigned_ok: bool = False) -> None:
    """With ``PRIVLEAK_CACHE_HMAC_KEY`` set: refuse a baseline that is unsigned or whose entries were edited.

    Without it: refuse a *signed* baseline (its signature cannot be checked, so an entry edited after main
    signed it would pass unseen) unless ``unsigned_ok`` (``--privleak-unsigned-ok`` on the workflow's
    command line) accepts reading it unverified.
    """
    secret = hmac_secret()
    if secret is None:
        if SIGNATURE_FIELD in data and not unsigned_ok:
            raise ReportFileError(f"privleak baseline {path} is signed, but {HMAC_KEY_ENV} is not set here, so its "
                                  "signature cannot be checked and an edited entry would go unseen; set "
                                  f"{HMAC_KEY_ENV} to the key that signed it (the repository secret), or pass "
                                  f"{UNSIGNED_OK} on the workflow's command line to gate on it unverified")
        return
    given = (data.get(SIGNATURE_FIELD) or {}).get("hmac") if isinstance(data.get(SIGNATURE_FIELD), dict) else None
    if not isinstance(given, str):
        raise ReportFileError(f"privleak baseline {path} is not signed although {HMAC_KEY_ENV} is set, so an edited "
                              f"value could not be told apart; {_fix(path)} with {HMAC_KEY_ENV} set (the same key)")
    if not hmac.compare_digest(given, signature(_SIGNED, _signed_text(data), secret)):
        raise ReportFileError(f"privleak baseline {path}: its signature does not match its entries under the key in "
                              f"{HMAC_KEY_ENV} (a value, tolerance or key was edited, or another key signed it); "
                              f"{_fix(path)} with the key the gate uses")


def with_tolerances(report: dict[str, Any], overrides: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """``report`` with each result's gating tolerance resolved (as a baseline stores it), and bad values found.

    Written so into report.json too, so a report used as a baseline carries the
    tolerances it was written with instead of taking them from a later run's ini.
    """
    from .gate import saved_tolerance

    problems = []
    tests = []
    for test in report["tests"]:
        results = []
        for result in test["results"]:
            if comparable_figure(result.get("value")) is None:
                problems.append(f"result {result.get('key')!r} of test {test['nodeid']} has value "
                                f"{result.get('value')!r}, which no later run can be compared with; check what "
                                "the model or scorer returned (and any pytest_privleak_report hook)")
            if result.get("tolerance_source") and result.get("tolerance") is not None:
                tol, source = figure(result["tolerance"]), result["tolerance_source"]   # resolved already (a shard)
            else:
                tol, source = saved_tolerance(result, overrides)
            if not (math.isfinite(tol) and tol >= 0):
                problems.append(f"result {result.get('key')!r} of test {test['nodeid']} asks tolerance {tol!r}; "
                                "give tolerance= a finite number >= 0 (in the metric's unit) or leave it out")
            results.append({**result, "tolerance": tol, "tolerance_source": source})
        tests.append({**test, "results": results})
    return {**report, "tests": tests}, problems


def baseline_to_save(report: dict[str, Any], overrides: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """This run's report as a baseline (each result with its resolved tolerance), and why it must not be saved.

    The problems: no result at all, unusable or coinciding keys
    (:func:`keys.key_problems`), a value that is not a figure (NaN, e.g. put
    there by a report hook), or a tolerance that is not a finite number >= 0. A
    baseline with any of them would be refused when read, so it is not written.
    Signed when ``PRIVLEAK_CACHE_HMAC_KEY`` is set.
    """
    problems = key_problems(report["tests"])
    resolved, bad = with_tolerances(report, overrides)
    problems += bad
    if not any(test["results"] for test in resolved["tests"]):
        problems.append("no privacy result was recorded in this run, so there is nothing to save as a baseline; "
                        "run the privacy tests (check -k/-m and skips) with --privleak-save-baseline")
    return sign({**resolved, "baseline": None}), problems


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
