"""Read a stored report.json (a baseline or a shard's report) and check it before anything trusts it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .json_writer import validate
from .model import SCHEMA_ID, SCHEMA_VERSION, ReportFileError

__all__ = ["load_report"]


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
