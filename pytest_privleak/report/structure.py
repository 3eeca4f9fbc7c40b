"""A hand-written structural check of a stored report: the fields the baseline gate reads.

``jsonschema`` is a test extra only, so a baseline must be checked without it:
this module checks, with plain Python, every field :mod:`pytest_privleak.report.gate`
reads (tests, node ids, result keys, attack and metric names, values, directions,
labels, tolerances, audit records). It is deliberately open: unknown keys, and attack or metric
names it has never heard of, are accepted, so a newer writer's additions do not
break an older reader. ``json_writer.validate`` runs it always, then the full
JSON Schema when ``jsonschema`` is installed.

Each problem is a :class:`StructureError` whose ``where`` names the entry
(``tests[0].results[2] (key 't.py::t::cea.accuracy[pin]')``) and whose message
says what was expected.
"""
from __future__ import annotations

import math
from typing import Any

NONFINITE_STRINGS = ("Infinity", "-Infinity")
DIRECTIONS = ("at_most", "at_least")


class StructureError(ValueError):
    """One structural problem: ``where`` names the entry, ``problem`` what is wrong with it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"at {where}: {problem}")
        self.where = where
        self.problem = problem


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def comparable_figure(value: Any) -> float | None:
    """The float of a stored figure the gate can compare, or ``None`` if it is not one.

    Numbers and ``"Infinity"``/``"-Infinity"`` (an infinite exposure) are figures;
    ``"NaN"``, NaN, booleans and any other string are not: no comparison with them means anything.
    """
    if _is_number(value):
        value = float(value)
        return None if math.isnan(value) else value
    if value in NONFINITE_STRINGS:
        return math.inf if value == "Infinity" else -math.inf
    return None


def valid_tolerance(value: Any) -> float | None:
    """A stored tolerance as a float when it is a finite number >= 0, else ``None``."""
    if not _is_number(value) or not math.isfinite(float(value)) or float(value) < 0:
        return None
    return float(value)


def _check_result(result: Any, where: str) -> None:
    if not isinstance(result, dict):
        raise StructureError(where, f"expected an object, got {type(result).__name__}")
    key = result.get("key")
    if isinstance(key, str) and key:
        where = f"{where} (key {key!r})"
    else:
        raise StructureError(where, f"'key' must be a non-empty string, got {key!r}")
    for name in ("attack", "metric"):
        if not isinstance(result.get(name), str) or not result[name]:
            raise StructureError(where, f"{name!r} must be a non-empty string, got {result.get(name)!r}")
    if not isinstance(result.get("label", ""), str):
        raise StructureError(where, f"'label' must be a string, got {result.get('label')!r}")
    if result.get("direction") not in DIRECTIONS:
        raise StructureError(where, f"'direction' must be 'at_most' or 'at_least', got {result.get('direction')!r}")
    if comparable_figure(result.get("value")) is None:
        raise StructureError(where, f"'value' must be a number (or \"Infinity\"), got {result.get('value')!r}")
    tolerance = result.get("tolerance")
    if tolerance is not None and valid_tolerance(tolerance) is None:
        raise StructureError(where, f"'tolerance' must be a finite number >= 0 or null, got {tolerance!r}")
    audit = result.get("audit")
    if audit is not None and (not isinstance(audit, dict) or not isinstance(audit.get("settings", {}), dict)):
        raise StructureError(where, f"'audit' must be an object whose 'settings' is an object, got {audit!r}")


def check_structure(report: Any) -> None:
    """Raise :class:`StructureError` at the first field the gate reads that is missing or malformed."""
    if not isinstance(report, dict):
        raise StructureError("(top level)", f"expected a JSON object, got {type(report).__name__}")
    tests = report.get("tests")
    if not isinstance(tests, list):
        raise StructureError("tests", f"expected a list of tests, got {type(tests).__name__}")
    for i, test in enumerate(tests):
        where = f"tests[{i}]"
        if not isinstance(test, dict):
            raise StructureError(where, f"expected an object, got {type(test).__name__}")
        if not isinstance(test.get("nodeid"), str) or not test["nodeid"]:
            raise StructureError(where, f"'nodeid' must be a non-empty string, got {test.get('nodeid')!r}")
        where = f"{where} (nodeid {test['nodeid']!r})"
        results = test.get("results")
        if not isinstance(results, list):
            raise StructureError(where, f"'results' must be a list, got {type(results).__name__}")
        for j, result in enumerate(results):
            _check_result(result, f"tests[{i}].results[{j}]")
