"""The report document: one JSON-safe dict, built once and rendered as JSON, HTML and Markdown.

Shape (versioned by :data:`SCHEMA_VERSION`, described by ``schema.json``)::

    {"schema": "pytest-privleak/report", "version": 1, "plugin_version": ..., "created": ...,
     "run": {"seed", "xdist", "workers": [{"id", "host", "hostname", "device", "gpu", "status", "error",
                                           "crashed_test"}]},
     "summary": {"tests", "results", "passed", "failed", "measured", "leaking",
                 "expected_leaks", "expected_leaking", "redacted"},
     "tests": [{"nodeid", "outcome", "duration", "worker", "host", "device", "seed",
                "results": [{"key", "name", LeakResult fields..., "device", "seed", "target_hash"}]}],
     "baseline": null | {"path", "passed", "compared", "regressions", "improvements", "invalid", "new",
                         "vanished", "allow_missing", "errors", "notes"}}

A baseline file is such a report whose results' ``tolerance`` is the one that
gates them, resolved when it was saved (with ``tolerance_source``); see
:mod:`pytest_privleak.report.gate` and :mod:`.baseline_file`. Attack and metric
names are free strings: a new attack or metric needs no schema change.

``host`` (of a test and a worker) is where the worker ran, as its ``--tx``
spec names it (``localhost`` for ``-n N``, null without xdist); a worker's
``hostname`` is what that machine calls itself (null when it died).

A test's ``outcome`` is passed, failed, skipped, xfailed, error or crashed; an
entry may also be a wider-scoped fixture (``<scope node id>::<fixture>``) whose
results it recorded while setting up or tearing down. A result recorded inside
``expect_leak`` carries ``"expected": true``. ``failed`` and ``leaking`` leave out
declared failing results (xfail tests, ``expected``): those are counted in
``expected_leaks`` / ``expected_leaking`` and shown as "expected leak". An
undeclared failing result of a passed or skipped test is a swallowed leak
(:func:`swallowed_leaks`), which fails the run.

Non-finite floats (an infinite exposure, say) are written as the strings
``"Infinity"``, ``"-Infinity"``, ``"NaN"`` so the file is strict JSON.
"""
from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Iterable

from ..results import FIGURE_FIELDS, decode_result, encode, figure  # noqa: F401  (the result codec, one layer down)

SCHEMA_ID = "pytest-privleak/report"
SCHEMA_VERSION = 1
#: How a declared failing result (a test marked xfail, or recorded inside ``expect_leak``) is shown:
#: visible, but not counted in the LEAK banner.
EXPECTED_LEAK = "expected leak"
#: Outcomes of a test that did not fail although it may hold a failing result: such a result, undeclared,
#: is a swallowed leak (the test caught the error, or skipped after it), which fails the run.
QUIET_OUTCOMES = ("passed", "skipped")


class ReportFileError(ValueError):
    """A stored report (e.g. a baseline) that cannot be read; the message names the file and the fix."""


def result_key(nodeid: str, result: dict[str, Any]) -> str:
    """Identity of a result across runs: test node id + ``attack.metric`` + label."""
    label = result.get("label") or ""
    return f"{nodeid}::{result['attack']}.{result['metric']}" + (f"[{label}]" if label else "")


def target_hash(target: dict[str, Any] | None) -> str | None:
    """The target's content hash from ``LeakResult.target`` (``content_hash``, ``hash`` or ``key``)."""
    for name in ("content_hash", "hash", "key"):
        value = (target or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None


def worker_name(worker: dict[str, Any]) -> str:
    """``gw2 on host h2`` when the worker's host is known and not this machine, else its id."""
    from ..distribute.placement import LOCAL

    host = worker.get("host")
    return f"{worker['id']} on host {host}" if host and host != LOCAL else str(worker["id"])


def is_expected_leak(outcome: str, result: dict[str, Any]) -> bool:
    """A declared failing result (its test marked xfail, or recorded inside ``expect_leak``): not a LEAK."""
    return result.get("verdict") == "FAIL" and (outcome == "xfailed" or bool(result.get("expected")))


def is_unaccepted_inconclusive(result: dict[str, Any]) -> bool:
    """A measurement cut short by its budget without ``allow_inconclusive=True``: not a pass either."""
    target = result.get("target") or {}
    return bool(target.get("inconclusive")) and not target.get("inconclusive_allowed")


def swallowed_leaks(report: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(test, result) of each undeclared failing (or unaccepted inconclusive) result of a test that did not fail."""
    return [(t, r) for t in report.get("tests", []) for r in t.get("results", [])
            if t.get("outcome") in QUIET_OUTCOMES and (r.get("verdict") == "FAIL" or is_unaccepted_inconclusive(r))
            and not (t["outcome"] == "xfailed" or r.get("expected"))]


#: How a measurement cut short by its budget (without ``allow_inconclusive=True``) is shown: never "pass".
INCONCLUSIVE = "INCONCLUSIVE"
#: ... and the same when its test declared it (``expect_leak`` or xfail).
EXPECTED_INCONCLUSIVE = "expected inconclusive"


def shown_verdict(outcome: str, result: dict[str, Any]) -> str:
    """The verdict to print for one result of a test with ``outcome``.

    A result within its limit that was cut short by its budget shows as inconclusive, not "pass"
    (issue 23 item 4); the JSON keeps the numeric verdict and the ``target["inconclusive"]`` fact.
    """
    if is_expected_leak(outcome, result):
        return EXPECTED_LEAK
    if result.get("verdict") == "pass" and is_unaccepted_inconclusive(result):
        declared = outcome == "xfailed" or bool(result.get("expected"))
        return EXPECTED_INCONCLUSIVE if declared else INCONCLUSIVE
    return result.get("verdict", "")


#: Where each shown verdict goes when a table lists failures first (issue 24 item 4): leaks, then what did
#: not pass for want of budget, then expected leaks and bare measurements, then passes.
SHOWN_ORDER = {"FAIL": 0, "error": 1, "crashed": 1, INCONCLUSIVE: 2, EXPECTED_LEAK: 3, EXPECTED_INCONCLUSIVE: 3,
               "measured": 4, "pass": 5}


def failures_first(shown: str) -> int:
    """Sort key of a shown verdict (unknown ones sit with the measurements)."""
    return SHOWN_ORDER.get(shown, 4)


def is_redacted(result: dict[str, Any]) -> bool:
    """Whether the result shows a secret from the team's data (or PII) redacted: its evidence line
    ``redaction`` says so (:mod:`pytest_privleak.attacks.redaction`; the PII audit's line too)."""
    return "redacted" in str((result.get("evidence") or {}).get("redaction", ""))


def one_line(remedy: str, limit: int = 200) -> str:
    """The first step of a remedy, for the summary table (the whole text stays in the details): up to its first
    ``;`` or sentence end outside parentheses after the finding, at most ``limit`` characters cut between words
    and never inside a parenthesis, ``…`` when cut."""
    text = " ".join(str(remedy).split())
    depth, cut = 0, len(text)
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0 and i >= 40 and char in ";." and text[i + 1:i + 2] in (" ", ""):
            cut = i
            break
    short = text[:cut]
    if len(short) > limit:
        short = short[:limit].rsplit(" ", 1)[0]
    if short.count("(") > short.count(")"):   # cut inside a parenthesis: end before it opens
        short = short[:short.rfind("(")].rstrip()
    return short if short == text else short.rstrip(",:;.") + " \u2026"


def redaction_banner(count: int) -> str:
    """The line a report shows when it redacted: how many results, how, and how to see the secrets."""
    return (f"Redacted: {count} result(s) show secrets from your data (string_pattern, custom_pattern, secret=, "
            "PII) as <kind hash len=N>, a keyed hash; --privleak-show-secrets (show_pii=True for PII) shows them "
            "as they are.")


def make_test_entry(nodeid: str, outcome: str, duration: float, worker: str | None, device: str | None,
                    seed: int | None, results: Iterable[dict[str, Any]], *, host: str | None = None) -> dict[str, Any]:
    """One test of the report, its results keyed (duplicate keys in one test get ``#2``, ``#3``...)."""
    entries, seen = [], {}
    for data in results:
        key = result_key(nodeid, data)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key}#{seen[key]}"
        target = data.get("target") or {}
        entries.append({**data, "key": key, "name": f"{data['attack']}.{data['metric']}",
                        "device": target.get("device") or device,
                        "seed": target.get("seed", seed),
                        "target_hash": target_hash(target)})
    return {"nodeid": nodeid, "outcome": outcome, "duration": duration, "worker": worker, "host": host,
            "device": device, "seed": seed, "results": entries}


def build_report(tests: list[dict[str, Any]], workers: list[dict[str, Any]], *, seed: int,
                 xdist: bool) -> dict[str, Any]:
    """The whole document (without the baseline part, which the gate adds)."""
    from .. import __version__

    pairs = [(t, r) for t in tests for r in t["results"]]
    expected = [(t, r) for t, r in pairs if is_expected_leak(t["outcome"], r)]
    failing = [(t, r) for t, r in pairs if r.get("verdict") == "FAIL" and not is_expected_leak(t["outcome"], r)]
    summary = {"tests": len(tests), "results": len(pairs),
               "passed": sum(r.get("verdict") == "pass" and not is_unaccepted_inconclusive(r) for _, r in pairs),
               "inconclusive": sum(r.get("verdict") == "pass" and is_unaccepted_inconclusive(r) for _, r in pairs),
               "failed": len(failing),
               "measured": sum(r.get("verdict") == "measured" for _, r in pairs),
               "leaking": sorted({t["nodeid"] for t, _ in failing}),
               "expected_leaks": len(expected),
               "expected_leaking": sorted({t["nodeid"] for t, _ in expected}),
               "redacted": sum(is_redacted(r) for _, r in pairs)}
    created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return encode({"schema": SCHEMA_ID, "version": SCHEMA_VERSION, "plugin_version": __version__,
                   "created": created, "run": {"seed": seed, "xdist": xdist, "workers": workers},
                   "summary": summary, "tests": tests, "baseline": None})


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(encode(report), indent=2, sort_keys=False, allow_nan=False) + "\n"
