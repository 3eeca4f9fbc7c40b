"""Is this run's audit as strong as the baseline's? Compared setting by setting before any figure (issue 36).

Each result carries an audit record (:func:`pytest_privleak.results.audited`): the helper that measured it
and every setting that bounds its power. A figure measured with fewer samples, fewer references, a sampled
instead of an exact rank, another threat model or another confidence is not the same measurement, and
comparing it with main's figure lets a branch pass by weakening its test instead of its leak: LDP audited
with ``samples=1000, confidence=0.999999, replicates=50`` read an ε lower bound of 0.389 ("improved") for a
mechanism whose true ε had doubled. So :data:`ORDER` says, for each setting, which way is stronger:

* ``higher is stronger``: more samples, references, trials, runs, candidates, a larger budget (``None``
  for a time budget or a search budget: no limit, the strongest);
* ``lower is stronger``: ``allow_inconclusive`` (False is stronger than True);
* ``must be equal``: the method and threat model that ran, the seed, the confidence (a bound at another
  confidence is another statistic: higher confidence lowers an ε lower bound), the replicates of the LDP
  bound (it keeps the smallest of them), and every setting that changes what is measured rather than how
  hard.

A setting weaker than the baseline's is WEAKENED; a changed ``must be equal`` setting, a setting the table
does not know, or a record missing on one side is refused (both exit 4, naming the setting and both values);
a stronger audit goes on to the figure comparison. Keys ``attack.setting`` override ``setting``.
"""
from __future__ import annotations

import math
from typing import Any

from ...results import MEASURED_POWER

HIGHER = "higher is stronger"
LOWER = "lower is stronger"
EQUAL = "must be equal"

#: How the gate orders each recorded setting; ``attack.setting`` overrides ``setting``.
ORDER: dict[str, str] = {
    # how many: more is a stronger audit
    "samples": HIGHER, "references": HIGHER, "trials": HIGHER, "runs": HIGHER, "starts": HIGHER,
    "budget": HIGHER, "exact_budget": HIGHER, "ranked": HIGHER, "bootstrap": HIGHER, "beams": HIGHER,
    "max_expansions": HIGHER, "n_train": HIGHER, "n_victims": HIGHER, "steps": HIGHER, "k": HIGHER,
    "train_samples": HIGHER, "val_samples": HIGHER, "full_search": HIGHER, "top": HIGHER,
    "canaries": HIGHER, "time_budget": HIGHER, "time_budget_s": HIGHER, "check_seed": HIGHER,
    "neighbours": HIGHER,
    # measured facts of the result that bound its power (results.MEASURED_POWER)
    "members": HIGHER, "non_members": HIGHER, "canary_count": HIGHER, "inputs_screened": HIGHER,
    "mix-and-match.top_k": HIGHER, "cea.epochs": HIGHER,
    # accepting a partial measurement is weaker than refusing it
    "allow_inconclusive": LOWER,
    # what is measured, or a statistic that is not monotone in the setting: must not change
    "method": EQUAL, "threat_model": EQUAL, "seed": EQUAL, "confidence": EQUAL, "replicates": EQUAL,
    "delta": EQUAL, "c": EQUAL, "classifier": EQUAL, "pairs": EQUAL, "select": EQUAL, "canary_kind": EQUAL,
    "template": EQUAL, "per_class": EQUAL, "class_word_rule": EQUAL, "epochs": EQUAL, "pattern": EQUAL,
    "sub_attacks": EQUAL, "victims": EQUAL, "shadow": EQUAL, "public": EQUAL, "setting": EQUAL,
    "model": EQUAL, "fpr": EQUAL, "fprs": EQUAL, "reference": EQUAL, "population": EQUAL, "online": EQUAL,
    "gamma": EQUAL, "offline_a": EQUAL, "variance": EQUAL, "lira_statistic": EQUAL, "exposed": EQUAL,
    "generator": EQUAL, "top_k": EQUAL, "top_p": EQUAL, "detectors": EQUAL, "extraction": EQUAL,
    "generation": EQUAL, "context": EQUAL, "min_count": EQUAL, "metric": EQUAL, "max_tokens": EQUAL,
    "min_tokens": EQUAL, "min_record_tokens": EQUAL,
    # the CEA's gradient-search options (``**attack``)
    "lr": EQUAL, "lr_decay": EQUAL, "temperature0": EQUAL, "temperature_decay": EQUAL, "init_scale": EQUAL,
    "first_trial": EQUAL,
}
#: Settings for which ``None`` means "no limit": the strongest value of a ``higher is stronger`` setting.
UNLIMITED_WHEN_NONE = frozenset({"time_budget", "time_budget_s", "budget", "exact_budget"})
#: What a setting a helper does not take means (``measure_*`` has no ``allow_inconclusive``: it never accepts).
ABSENT_MEANS: dict[str, Any] = {"allow_inconclusive": False}
_ABSENT = object()


def rule_for(attack: str, setting: str) -> str | None:
    """The ordering of ``setting`` for results of ``attack`` (``None``: unknown, so refused)."""
    return ORDER.get(f"{attack}.{setting}", ORDER.get(setting))


def shown(value: Any) -> str:
    """A setting's value as the gate prints it."""
    if value is _ABSENT:
        return "(not given)"
    if value is None:
        return "None"
    return repr(value) if isinstance(value, str) else str(value).replace("'", "")


def _magnitude(setting: str, value: Any) -> float | None:
    """How large a setting is, for ordering: numbers, booleans, sizes of lists; ``None`` when not orderable."""
    if value is None:
        return math.inf if setting in UNLIMITED_WHEN_NONE else None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("Infinity", "-Infinity"):
        return math.inf if value == "Infinity" else -math.inf
    if isinstance(value, list):
        return float(len(value))
    if isinstance(value, dict) and isinstance(value.get("count"), int) and len(value) == 1:
        return float(value["count"])
    return None


def _settings(audit: Any) -> dict[str, Any]:
    settings = audit.get("settings") if isinstance(audit, dict) else None
    return settings if isinstance(settings, dict) else {}


def compare_setting(attack: str, setting: str, before: Any, after: Any) -> dict[str, Any] | None:
    """``{"setting", "before", "after", "rule", "problem"}`` when ``after`` is weaker than or not comparable
    with ``before`` (``problem``: weakened, changed or unknown); ``None`` when as strong or stronger."""
    rule = rule_for(attack, setting)
    before = ABSENT_MEANS.get(setting, before) if before is _ABSENT else before
    after = ABSENT_MEANS.get(setting, after) if after is _ABSENT else after
    found = {"setting": setting, "before": shown(before), "after": shown(after), "rule": rule or "unknown"}
    if rule is None:
        return {**found, "problem": "unknown"}
    if before == after:
        return None
    if before is _ABSENT and setting in MEASURED_POWER:
        return None      # a baseline saved before these facts were recorded: judged on them from its next save
    if rule == EQUAL or before is _ABSENT or after is _ABSENT:
        return {**found, "problem": "changed"}
    old, new = _magnitude(setting, before), _magnitude(setting, after)
    if old is None or new is None:
        return {**found, "problem": "changed"}
    weaker = new < old if rule == HIGHER else new > old
    return {**found, "problem": "weakened"} if weaker else None


def audit_problems(attack: str, before: Any, after: Any) -> list[dict[str, Any]]:
    """Every setting of this run's audit record ``after`` that is weaker than (or not comparable with) the
    baseline's ``before``; an empty list when the run's audit is at least as strong.

    Both records absent (a result built by hand on both sides): nothing to compare. One absent: refused,
    since a figure with a record cannot be told apart from one without.
    """
    has_before, has_after = bool(before), bool(after)
    if not has_before and not has_after:
        return []
    if not has_before:
        return [{"setting": "(audit record)", "before": "(none)", "after": "recorded", "rule": EQUAL,
                 "problem": "unaudited baseline"}]
    if not has_after:
        return [{"setting": "(audit record)", "before": "recorded", "after": "(none)", "rule": EQUAL,
                 "problem": "unaudited result"}]
    old, new = _settings(before), _settings(after)
    problems = []
    for setting in sorted(set(old) | set(new)):
        found = compare_setting(attack, setting, old.get(setting, _ABSENT), new.get(setting, _ABSENT))
        if found is not None:
            problems.append(found)
    return problems


def stronger_settings(attack: str, before: Any, after: Any) -> list[str]:
    """The ordered settings where this run's audit is stronger than the baseline's (said in a note)."""
    old, new = _settings(before), _settings(after)
    out = []
    for setting in sorted(set(old) & set(new)):
        rule = rule_for(attack, setting)
        if rule in (HIGHER, LOWER) and old[setting] != new[setting]:
            a, b = _magnitude(setting, old[setting]), _magnitude(setting, new[setting])
            if a is not None and b is not None and ((b > a) if rule == HIGHER else (b < a)):
                out.append(f"{setting} {shown(old[setting])} -> {shown(new[setting])}")
    return out


def describe_problem(problem: dict[str, Any]) -> str:
    """``samples 20000 -> 1000 (higher is stronger)``, or why the setting cannot be compared."""
    what = problem["problem"]
    if what == "unaudited baseline":
        return ("the baseline entry carries no audit record (saved by a plugin before issue 36), so the strength "
                "of this run's audit cannot be checked against it; re-save the baseline on the main branch")
    if what == "unaudited result":
        return ("this run's result carries no audit record although the baseline's does: it was recorded by "
                "hand, not by a measure_*/assert_* helper, so how it was measured is unknown")
    head = f"{problem['setting']} {problem['before']} -> {problem['after']}"
    if what == "unknown":
        return f"{head}: a setting this gate does not know, so it cannot say which way is stronger"
    return f"{head} ({problem['rule']})"
