"""Read a stored report.json (a baseline or a shard's report) and check it before anything trusts it.

A report is untrusted data: it may come from the branch under review (a shard's report) or be edited on
its way. :func:`read_json_file` reads one without trusting its path or its text: only a regular file
(a FIFO would block the reader forever, a device or folder is no report), at most
:data:`MAX_REPORT_BYTES`, and strict JSON: a key twice in one object (which value would the gate see?),
``NaN``/``Infinity`` literals (a report writes non-finite figures as strings), and numbers too large for
a float (``10**400`` crashed the comparison) are refused, each naming the file.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from ..distribute.sharding import ShardError
from .json_writer import validate
from .model import SCHEMA_ID, SCHEMA_VERSION, ReportFileError

__all__ = ["durations_from", "load_report", "read_durations", "read_json_file", "UntrustedJSONError"]

#: The largest report read (a report of 10,000 results is about 20 MB).
MAX_REPORT_BYTES = 256 * 1024 * 1024


class UntrustedJSONError(ValueError):
    """A stored JSON file that is not what a report can be; the message says what, not where (the caller)."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise UntrustedJSONError(f"the key {key!r} appears twice in one object, so which value counts is "
                                     "unclear")
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise UntrustedJSONError(f"it holds the bare literal {name}, which is not JSON (a report writes non-finite "
                             "figures as the strings \"Infinity\" and \"NaN\")")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UntrustedJSONError(f"the number {text[:40]} is too large for a float")
    return value


def _float_sized_int(text: str) -> int:
    if len(text) > 400:
        raise UntrustedJSONError(f"the integer {text[:40]}... ({len(text)} digits) is too large for a float")
    value = int(text)
    try:
        float(value)
    except OverflowError:
        raise UntrustedJSONError(f"the integer {text[:40]}... is too large for a float") from None
    return value


def parse_untrusted(text: str) -> object:
    """Strict JSON: :class:`UntrustedJSONError` for duplicate keys, bare NaN/Infinity and oversized numbers."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
                      parse_float=_finite_float, parse_int=_float_sized_int)


def read_json_file(path: str | Path) -> bytes:
    """The bytes of the regular file ``path`` (opened without blocking, so a FIFO cannot hang the reader).

    Raises ``FileNotFoundError``, ``OSError``, or :class:`UntrustedJSONError` for something that is not a
    regular file or is larger than :data:`MAX_REPORT_BYTES`.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else "a folder"
                    if stat.S_ISDIR(info.st_mode) else "a device or socket")
            raise UntrustedJSONError(f"it is {kind}, not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise UntrustedJSONError(f"it holds {info.st_size:,} bytes, more than a report can "
                                     f"({MAX_REPORT_BYTES:,})")
        chunks, left = [], MAX_REPORT_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        raw = b"".join(chunks)
        if len(raw) > MAX_REPORT_BYTES:
            raise UntrustedJSONError(f"it holds more than {MAX_REPORT_BYTES:,} bytes, more than a report can")
        return raw
    finally:
        os.close(fd)


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
        raw = read_json_file(path)
    except FileNotFoundError:
        raise ReportFileError(f"privleak baseline {path} does not exist; {fix}") from None
    except UntrustedJSONError as exc:
        raise ReportFileError(f"privleak baseline {path} cannot be a report: {exc}; {fix}") from None
    except OSError as exc:
        raise ReportFileError(f"privleak baseline {path} cannot be read ({exc}); {fix}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportFileError(f"privleak baseline {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                              f"{fix}") from None
    try:
        data = parse_untrusted(text)
    except UntrustedJSONError as exc:
        raise ReportFileError(f"privleak baseline {path} is not strict JSON: {exc}; {fix}") from None
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
        raw = read_json_file(path)
    except UntrustedJSONError as exc:
        raise ShardError(f"--privleak-shard-durations={str(path)!r} cannot be read: {exc}; give the path of a "
                         "report.json written by --privleak-report, or leave the option out") from None
    except OSError as exc:
        raise ShardError(f"--privleak-shard-durations={str(path)!r} cannot be read ({exc.strerror or exc}); give "
                         "the path of a report.json written by --privleak-report, or leave the option out") from None
    try:
        data = parse_untrusted(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, UntrustedJSONError) as exc:
        raise ShardError(f"--privleak-shard-durations={str(path)!r} is not JSON ({exc}); give a report.json "
                         "written by --privleak-report, or leave the option out") from None
    return durations_from(data, path), hashlib.sha256(raw).hexdigest()
