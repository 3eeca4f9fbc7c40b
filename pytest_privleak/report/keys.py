"""Result keys the baseline gate can rely on: the same in every run, one result per key.

A key is ``nodeid::attack.metric[label]`` (:func:`model.result_key`). The gate
matches a baseline entry with this run's result of the same key, so a key that
changes between runs (a label holding ``repr(obj)`` with its memory address, or
a pytest temporary folder) makes the old entry look "missing" and the new one
"new" every time, and two results sharing a key in one test would be compared
with whichever came first. Both are errors when a run compares with a baseline
or saves one; the fix is a stable ``name=`` on the assertion.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from .model import result_key

#: Text that differs between two runs of the same test, and what it is.
UNSTABLE_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r" at 0x[0-9a-fA-F]+"), "a memory address"),
    (re.compile(r"\b0x[0-9a-fA-F]{9,}\b"), "a memory address"),
    (re.compile(r"pytest-of-[^/\\\s]+[/\\]pytest-\d+"), "a pytest temporary folder"),
)
NAME_FIX = ("give the assertion (or measure_* call) a stable name= (e.g. name=\"rr-eps1\"), "
            "or give the object a __repr__ without run-specific text")


def unstable_reason(text: str) -> str | None:
    """``"a memory address (' at 0x7f3a...')"`` when ``text`` holds run-specific text, else ``None``."""
    for pattern, what in UNSTABLE_TEXT:
        found = pattern.search(text)
        if found:
            return f"{what} ({found.group(0).strip()!r})"
    return None


def key_problems(tests: Iterable[dict[str, Any]]) -> list[str]:
    """One message per unstable key, per key shared by several results of one test, and per key that several
    tests (two parametrized tests whose ids and labels spell the same text) produce."""
    problems = []
    owners: dict[str, list[str]] = {}
    tests = list(tests)
    for test in tests:
        for key in dict.fromkeys(result_key(test["nodeid"], r) for r in test.get("results", [])):
            owners.setdefault(key, []).append(test["nodeid"])
    for key, nodeids in owners.items():
        if len(nodeids) > 1:
            problems.append(f"tests {', '.join(nodeids)} each recorded a result with the key {key!r}, so the "
                            "baseline gate cannot tell them apart; give the parameters distinct ids (ids=...) "
                            "or the assertions distinct name=")
    for test in tests:
        counts: dict[str, int] = {}
        for result in test.get("results", []):
            key = result_key(test["nodeid"], result)
            counts[key] = counts.get(key, 0) + 1
            reason = unstable_reason(key)
            if reason and counts[key] == 1:
                problems.append(f"result {key!r} of test {test['nodeid']} has a key holding {reason}, which "
                                f"changes every run, so no baseline can ever match it; {NAME_FIX}")
        for key, count in counts.items():
            if count > 1:
                problems.append(f"test {test['nodeid']} recorded {count} results with the same key {key!r}, so "
                                "the baseline gate cannot tell them apart across runs; give each assertion "
                                "its own name= (e.g. name=\"model-a\" and name=\"model-b\")")
    return problems
