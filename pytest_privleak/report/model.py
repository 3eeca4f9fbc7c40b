"""The report document: one JSON-safe dict, built once and rendered as JSON, HTML and Markdown.

Shape (versioned by :data:`SCHEMA_VERSION`, described by ``schema.json``)::

    {"schema": "pytest-privleak/report", "version": 1, "plugin_version": ..., "created": ...,
     "run": {"seed", "xdist", "workers": [{"id", "device", "gpu", "status", "error", "crashed_test"}]},
     "summary": {"tests", "results", "passed", "failed", "measured", "leaking"},
     "tests": [{"nodeid", "outcome", "duration", "worker", "device", "seed",
                "results": [{"key", "name", LeakResult fields..., "device", "seed", "target_hash"}]}],
     "baseline": null | {"path", "regressions", "improvements", "new", "vanished", "passed"}}

Non-finite floats (an infinite exposure, say) are written as the strings
``"Infinity"``, ``"-Infinity"``, ``"NaN"`` so the file is strict JSON.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any, Iterable

SCHEMA_ID = "pytest-privleak/report"
SCHEMA_VERSION = 1
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
# LeakResult fields that hold figures (numbers or None), decoded back to floats on load.
FIGURE_FIELDS = ("value", "threshold", "confidence", "chance", "ceiling", "tolerance")


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


def encode(obj: Any) -> Any:
    """Make ``obj`` strict-JSON safe: non-finite floats become strings, tuples lists, others ``str``."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if hasattr(obj, "tolist"):
        return encode(obj.tolist())
    return str(obj)


def figure(value: Any) -> float | None:
    """Decode a figure written by :func:`encode` back to a float (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return _NONFINITE.get(value, math.nan)
    return float(value)


def make_test_entry(nodeid: str, outcome: str, duration: float, worker: str | None, device: str | None,
               seed: int | None, results: Iterable[dict[str, Any]]) -> dict[str, Any]:
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
    return {"nodeid": nodeid, "outcome": outcome, "duration": duration, "worker": worker, "device": device,
            "seed": seed, "results": entries}


def build_report(tests: list[dict[str, Any]], workers: list[dict[str, Any]], *, seed: int,
                 xdist: bool) -> dict[str, Any]:
    """The whole document (without the baseline part, which the gate adds)."""
    from .. import __version__

    results = [r for t in tests for r in t["results"]]
    leaking = sorted({t["nodeid"] for t in tests for r in t["results"] if r.get("verdict") == "FAIL"})
    summary = {"tests": len(tests), "results": len(results),
               "passed": sum(r.get("verdict") == "pass" for r in results),
               "failed": sum(r.get("verdict") == "FAIL" for r in results),
               "measured": sum(r.get("verdict") == "measured" for r in results),
               "leaking": leaking}
    created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return encode({"schema": SCHEMA_ID, "version": SCHEMA_VERSION, "plugin_version": __version__,
                   "created": created, "run": {"seed": seed, "xdist": xdist, "workers": workers},
                   "summary": summary, "tests": tests, "baseline": None})


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(encode(report), indent=2, sort_keys=False, allow_nan=False) + "\n"


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a stored report.json (a baseline); raise :class:`ReportFileError` naming the file and the fix."""
    path = Path(path)
    fix = (f"regenerate it on the main branch with `pytest --privleak-save-baseline {path}` "
           "(or point --privleak-baseline at a report.json written by --privleak-report)")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportFileError(f"privleak baseline {path} does not exist; {fix}") from None
    except OSError as exc:
        raise ReportFileError(f"privleak baseline {path} cannot be read ({exc}); {fix}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"privleak baseline {path} is not JSON (line {exc.lineno}: {exc.msg}); "
                              f"{fix}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise ReportFileError(f"privleak baseline {path} is not a pytest-privleak report (no "
                              f"\"schema\": \"{SCHEMA_ID}\"); {fix}")
    if data.get("version") != SCHEMA_VERSION:
        raise ReportFileError(f"privleak baseline {path} has report version {data.get('version')!r}, this "
                              f"plugin reads version {SCHEMA_VERSION}; {fix}")
    try:
        from .json_writer import validate

        validate(data)
    except ValueError as exc:
        raise ReportFileError(f"privleak baseline {path} does not match the report schema ({exc}); {fix}") from None
    return data
