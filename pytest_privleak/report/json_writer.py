"""report.json: the versioned machine-readable report, and its JSON Schema (``schema.json``)."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from .model import dumps
from .structure import check_structure

SCHEMA_FILE = "schema.json"


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema shipped in the package (``pytest_privleak/report/schema.json``)."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def validate(report: dict[str, Any]) -> None:
    """Check ``report``; ``ValueError`` naming the first bad entry or path.

    Always runs the hand-written structural check of the fields the baseline gate
    reads (:func:`structure.check_structure`), so a baseline is checked even where
    ``jsonschema`` (the ``test`` extra) is missing; then the full JSON Schema when
    ``jsonschema`` is installed.
    """
    if not isinstance(report, dict) or report.get("schema") != schema()["properties"]["schema"]["const"]:
        raise ValueError("at (top level): not a pytest-privleak report")
    check_structure(report)
    try:
        import jsonschema
    except ImportError:
        return
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(report))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ValueError(f"at {where}: {error.message}")


def write_json(report: dict[str, Any], path: str | Path) -> Path:
    """Write ``report`` atomically as strict JSON."""
    return write_text_atomic(path, dumps(report))
