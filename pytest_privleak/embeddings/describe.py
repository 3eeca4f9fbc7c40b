"""Stable labels and JSON-safe facts of an encoder (and of the defences wrapped around it) for results."""
from __future__ import annotations

from typing import Any


def encoder_facts(encoder: Any) -> dict[str, Any]:
    """``{"class": ..., **encoder.describe()}``; a defence's description nests the wrapped encoder's."""
    describe = getattr(encoder, "describe", None)
    facts = describe() if callable(describe) else {}
    return {"class": type(encoder).__name__, **(facts if isinstance(facts, dict) else {})}


def encoder_label(encoder: Any, what: str) -> str:
    """A label that is the same in every run: class names and defence settings, never a memory address."""
    chain, current = [], encoder
    while current is not None:
        title = getattr(current, "title", None)
        chain.append(title() if callable(title) else type(current).__name__)
        current = getattr(current, "inner", None)
    return f"{' <- '.join(chain)}: {what}"


def check_name(name: Any) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; fix: a stable label such as "
                         "name='minilm citizen ids', used as the result's key in the report and the baseline")


def check_tolerance(tolerance: Any) -> float | None:
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ValueError(f"tolerance must be an accuracy difference >= 0 or None, got {tolerance!r}; fix: e.g. "
                         "tolerance=0.05, or leave it out for the gate's default")
    return float(tolerance)
