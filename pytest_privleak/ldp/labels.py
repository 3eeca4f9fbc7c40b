"""Stable, readable labels for mechanisms: the key a result is stored and compared under.

``repr(obj)`` of a class without its own ``__repr__`` holds a memory address
(``<Leaky object at 0x7f...>``), which changes every run, so the baseline gate
would never find last run's result.  The label is the user's ``name=`` when
given, else the mechanism's own ``repr`` when it has a stable one, else its
class name with its simple parameters (``Leaky(epsilon=1, p=0.5)``).
"""
from __future__ import annotations

import math
import re
from typing import Any

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_SIMPLE = (bool, int, float, str)


def check_name(name: Any) -> str | None:
    """``name`` as given, or ``None``; a non-string or blank name is refused with the fix."""
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string or None, got {name!r}; fix: a stable label such as "
                         "name='my-encoder eps=1', used as the result's key in the report and the baseline")
    return name


def _param_text(value: Any) -> str | None:
    if isinstance(value, bool) or isinstance(value, str):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    return None


def mechanism_label(mechanism: Any, name: str | None = None) -> str:
    """``name``, else a stable ``repr``, else ``ClassName(param=value, ...)`` from simple attributes."""
    if name is not None:
        return name
    cls = type(mechanism)
    if cls.__repr__ is not object.__repr__:
        text = repr(mechanism)
        if not _ADDRESS.search(text):
            return text
    params: dict[str, str] = {}
    attrs = dict(getattr(mechanism, "__dict__", {}))
    if "epsilon" not in attrs and hasattr(mechanism, "epsilon"):
        attrs = {"epsilon": getattr(mechanism, "epsilon"), **attrs}
    for key, value in attrs.items():
        if key.startswith("_") or not isinstance(value, _SIMPLE):
            continue
        text = _param_text(value)
        if text is not None and not _ADDRESS.search(text):
            params[key] = text
    inner = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{cls.__name__}({inner})"
