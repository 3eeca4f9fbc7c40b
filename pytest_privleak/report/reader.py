"""Read a stored report.json (a baseline or a shard's report) and check it before anything trusts it."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..distribute.sharding import ShardError
from .json_writer import validate
from .model import SCHEMA_ID, SCHEMA_VERSION, ReportFileError

__all__ = ["durations_from", "load_report", "read_durations"]


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a stored report.json (a baseline); raise :class:`ReportFileError` naming the file and the fix.

    Every problem is reported here, when the file is read (the plugin reads a
    baseline at start-up): a missing or unreadable file, bytes that are not
    UTF-8, text that is not JSON, another document, another version, or a
    structure the gate cannot read (checked by hand, and by the JSON Schema
    when ``jsonschema`` is installed).
    """
    path = Path(path)
    fix = (f"regenerate it on the main branch with `pytest --privleak-save-baseline {path}` "
           "(or point --privleak-baseline at a report.json written by --privleak-report)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReportFileError(f"privleak baseline {path} does not exist; {fix}") from None
    except OSError as exc:
        raise ReportFileError(f"privleak baseline {path} cannot be read ({exc}); {fix}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportFileError(f"privleak baseline {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                              f"{fix}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"privleak baseline {path} is not JSON (line {exc.lineno}: {exc.msg}); "
                              f"{fix}") from None
    except RecursionError:
        raise ReportFileError(f"privleak baseline {path} is nested too deeply to be a report; {fix}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise ReportFileError(f"privleak baseline {path} is not a pytest-privleak report (no "
                              f"\"schema\": \"{SCHEMA_ID}\"); {fix}")
    if data.get("version") != SCHEMA_VERSION:
        raise ReportFileError(f"privleak baseline {path} has report version {data.get('version')!r}, this "
                              f"plugin reads version {SCHEMA_VERSION}; {fix}")
    try:
        validate(data)
    except ValueError as exc:
        raise ReportFileError(f"privleak baseline {path} does not match the report schema ({exc}); "
                              f"fix that entry or {fix}") from None
    return data


# --- test durations for CI shards (``--privleak-shard-durations``), read from a stored report -------


def durations_from(data: object, path: Path) -> dict[str, float]:
    """Test durations (s) by node id from a report.json (:mod:`report.model`) or a pytest-split ``.test_durations``."""
    def bad(why: str) -> ShardError:
        return ShardError(f"--privleak-shard-durations={str(path)!r}: {why}; give a report.json written by "
                          "--privleak-report (e.g. main's merged report) or leave the option out to count one "
                          "unit per test")

    if isinstance(data, dict) and "schema" in data:
        if data.get("schema") != SCHEMA_ID or data.get("version") != SCHEMA_VERSION:
            raise bad(f"not a version-{SCHEMA_VERSION} pytest-privleak report (schema {data.get('schema')!r}, "
                      f"version {data.get('version')!r})")
        try:
            validate(data)
        except ValueError as exc:
            raise bad(f"does not match the report schema ({exc})") from None
        pairs = [(t["nodeid"], t.get("duration")) for t in data["tests"]]
    elif isinstance(data, dict):  # pytest-split: {"nodeid": seconds}
        pairs = list(data.items())
    else:
        raise bad(f"expected a JSON object, got {type(data).__name__}")
    out = {}
    for nodeid, seconds in pairs:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0 \
                or seconds == float("inf"):
            raise bad(f"test {nodeid!r} has duration {seconds!r}, not a finite number of seconds >= 0")
        out[str(nodeid)] = float(seconds)
    return out


def read_durations(path: str | Path) -> tuple[dict[str, float], str]:
    """The durations in ``path`` and the file's SHA-256 (shards compare it to know they split alike)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ShardError(f"--privleak-shard-durations={str(path)!r} cannot be read ({exc.strerror or exc}); give "
                         "the path of a report.json written by --privleak-report, or leave the option out") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ShardError(f"--privleak-shard-durations={str(path)!r} is not JSON ({exc}); give a report.json "
                         "written by --privleak-report, or leave the option out") from None
    return durations_from(data, path), hashlib.sha256(raw).hexdigest()
