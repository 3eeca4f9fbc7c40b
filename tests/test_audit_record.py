"""Every figure carries the strength of the audit behind it, and the gate compares strength first (issue 36 item 1).

The record is made where the result is recorded, by the ``audited`` wrapper of each public ``measure_*`` /
``assert_*`` helper, from the call's own arguments bound to its signature: a parameter added later is
recorded without anyone remembering to, and the walk below fails when it is neither ordered by the gate
(``report.verdict.strength.ORDER``) nor listed, with its reason, as one that cannot change an audit's power
(``results.NOT_POWER``).
"""
from __future__ import annotations

import inspect
import math
from importlib import import_module

import pytest
import torch

from pytest_privleak import results as _results
from pytest_privleak.assertions import _HELPERS
from pytest_privleak.canaries import canary
from pytest_privleak.report.gate import compare, gate_exit, gate_lines
from pytest_privleak.report.verdict.strength import ORDER, audit_problems
from pytest_privleak.results import NOT_POWER, LeakResult, audited
from pytest_privleak.targets.vocab import Vocabulary

PIN = canary("pin", 3, seed=4)


class Ranked:
    """A sequence scorer that ranks the canary's secret ``rank``-th of the 1,000 (lower score = likelier)."""

    def __init__(self, rank: int = 1):
        tokens = (*PIN.pattern.prefix, *PIN.pattern.vocabulary)
        self.vocab = Vocabulary(("<pad>", "<unk>", *sorted(set(tokens))), ("<pad>", "<unk>"),
                                tuple(sorted(set(PIN.tags))), (PIN.intent,))
        self.secret = torch.tensor(self.vocab.token_ids(PIN.tokens, strict=True), dtype=torch.float64)
        self.rank = rank

    def score_token_ids(self, ids, intent, tags):
        weights = torch.tensor([0.0] * (ids.shape[1] - 3) + [1.0, 10.0, 100.0], dtype=torch.float64)
        spread = ((ids.double() * weights).sum(dim=1) * 0.6180339887) % 1.0 + 0.0001
        is_secret = (ids.double() == self.secret).all(dim=1)
        return torch.where(is_secret, torch.full_like(spread, (self.rank - 0.5) / 1000), spread)


def _module_function(name: str):
    """The helper as its own module defines it (not the lazily wrapped name of ``pytest_privleak``)."""
    return getattr(import_module(f"pytest_privleak{_HELPERS[name]}"), name)


def unclassified(function) -> list[str]:
    """Parameters of ``function`` with a default that are neither recorded and ordered nor listed powerless."""
    recorded = getattr(function, "__privleak_audited__", None)
    if recorded is None:
        return ["(the helper is not wrapped by results.audited, so it records no audit)"]
    problems = []
    for param in inspect.signature(inspect.unwrap(function)).parameters.values():
        if param.default is param.empty or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue            # the model, the data, the canaries, the limit: what is audited, not how
        if param.name in NOT_POWER:
            continue
        if param.name not in recorded:
            problems.append(f"{param.name}: not recorded")
        elif param.name not in ORDER:
            problems.append(f"{param.name}: recorded but the gate's ORDER table does not say which way is stronger")
    return problems


@pytest.mark.parametrize("name", sorted(n for n in _HELPERS if n != "check"))
def test_every_parameter_of_every_public_helper_is_recorded_and_ordered_or_listed_as_powerless(name):
    assert unclassified(_module_function(name)) == []


def test_the_walk_finds_a_new_parameter_nobody_classified():
    """Planted: a helper grows ``windows=8``; the walk names it until it is ordered or listed."""
    @audited
    def measure_new(model, *, samples: int = 10, windows: int = 8, name=None):
        return None

    assert unclassified(measure_new) == ["windows: recorded but the gate's ORDER table does not say which way is "
                                         "stronger"]

    def bare(model, *, samples: int = 10):
        return None

    assert unclassified(bare) == ["(the helper is not wrapped by results.audited, so it records no audit)"]


def test_every_powerless_parameter_says_why():
    assert all(isinstance(why, str) and len(why) > 20 for why in NOT_POWER.values())


def _recorded(call) -> list[LeakResult]:
    sink: list[LeakResult] = []
    _results.set_sink(sink)
    try:
        call()
    finally:
        _results.set_sink(None)
    return sink


@pytest.mark.parametrize("path", ["pytest_privleak", "pytest_privleak.attacks.exposure.assertion",
                                  "pytest_privleak.assertions"])
def test_the_record_is_made_whatever_the_import_path(path):
    measure = getattr(import_module(path), "measure_exposure")
    [result] = _recorded(lambda: measure(Ranked(30), PIN, references=64, name="pin"))
    assert result.audit["helper"] == "measure_exposure" and result.audit["version"]
    settings = result.audit["settings"]
    assert settings == {"method": "exact", "references": 64, "exact_budget": 4194304, "seed": 0,
                        "confidence": 0.95, "bootstrap": 30, "canary_count": 1}
    assert result.audit["asked"] == {"method": "auto"}         # what ran is recorded, and what was asked
    assert "name" not in settings and "batch_size" not in settings


def test_an_assertion_records_its_own_settings_and_the_method_that_ran():
    [result] = _recorded(lambda: _module_function("assert_exposure_below")(
        Ranked(30), PIN, 12.0, method="sampled", references=64, allow_inconclusive=True))
    assert result.audit["settings"]["method"] == "sampled" and "asked" not in result.audit
    assert result.audit["settings"]["allow_inconclusive"] is True and result.audit["settings"]["references"] == 64


def test_a_figure_over_seeds_carries_the_audit_of_its_members():
    from pytest_privleak import measure_exposure
    from pytest_privleak.targets.seeds import SeedModels

    models = SeedModels([Ranked(20), Ranked(30), Ranked(40)], [0, 1, 2])
    [result] = _recorded(lambda: measure_exposure(models, PIN, name="pin"))
    assert len(result.per_seed) == 3 and result.audit["settings"]["method"] == "exact"


def test_a_result_built_by_hand_has_no_record():
    [result] = _recorded(lambda: _results.record(LeakResult("toy", "accuracy", 0.1)))
    assert result.audit == {}


def test_audit_values_are_the_same_in_every_run():
    from pytest_privleak.results import audit_value

    class Thing:
        pass

    assert audit_value(Thing()) == "<Thing>"                  # never a repr with a memory address
    assert audit_value(list(range(100))) == {"count": 100}
    assert audit_value(math.inf) == "Infinity" and audit_value((1, "a", None)) == [1, "a", None]


# --- the gate: strength before figures -----------------------------------------------------------


def _report(value: float, audit: dict | None, *, target: dict | None = None, key_label: str = "pin") -> dict:
    result = {"key": f"t.py::t::exposure.exposure_bits[{key_label}]", "attack": "exposure",
              "metric": "exposure_bits", "label": key_label, "value": value, "direction": "at_most",
              "tolerance": 1.0, "target": target or {}}
    if audit is not None:
        result["audit"] = audit
    return {"tests": [{"nodeid": "t.py::t", "results": [result]}]}


def _audit(**settings) -> dict:
    base = {"method": "exact", "references": 4096, "exact_budget": 4194304, "seed": 0, "confidence": 0.95,
            "bootstrap": 30, "allow_inconclusive": False}
    return {"helper": "assert_exposure_below", "version": "0.1.0", "settings": {**base, **settings}}


def test_a_weaker_audit_is_weakened_naming_each_setting_and_both_values():
    comparison = compare(_report(4.0, _audit(method="sampled", references=16, allow_inconclusive=True)),
                         _report(5.0, _audit()), {}, "base.json")
    assert gate_exit(comparison) == pytest.ExitCode.USAGE_ERROR and not comparison["improvements"]
    text = "\n".join(gate_lines(comparison))
    assert "WEAKENED t.py::t exposure.exposure_bits [pin]: allow_inconclusive False -> True (lower is stronger)" in text
    assert "method 'exact' -> 'sampled' (must be equal)" in text
    assert "references 4096 -> 16 (higher is stronger)" in text


def test_a_stronger_audit_under_the_same_key_is_not_weakened_but_compared():
    stronger = _audit(references=65536, exact_budget=None, bootstrap=100)
    assert compare(_report(5.2, stronger), _report(5.0, _audit()), {}, "b")["passed"]
    comparison = compare(_report(9.0, stronger), _report(5.0, _audit()), {}, "b")
    assert not comparison["weakened"] and len(comparison["regressions"]) == 1     # the figure decides
    assert "this run's audit is stronger than the baseline's (bootstrap 30 -> 100, exact_budget 4194304 -> None, " \
           "references 4096 -> 65536)" in "\n".join(comparison["notes"])


@pytest.mark.parametrize("change, line", [
    ({"seed": 3}, "seed 0 -> 3 (must be equal)"),
    ({"confidence": 0.999999}, "confidence 0.95 -> 0.999999 (must be equal)"),
    ({"windows": 8}, "windows (not given) -> 8: a setting this gate does not know"),
])
def test_a_changed_must_be_equal_or_unknown_setting_is_refused_not_compared(change, line):
    comparison = compare(_report(1.0, _audit(**change)), _report(5.0, _audit()), {}, "b")
    assert gate_exit(comparison) == pytest.ExitCode.USAGE_ERROR and not comparison["improvements"]
    assert line in "\n".join(gate_lines(comparison))


def test_a_missing_or_unknown_record_on_either_side_is_refused_and_two_hand_made_results_are_compared():
    old_baseline = compare(_report(5.0, _audit()), _report(5.0, None), {}, "b")
    assert gate_exit(old_baseline) == pytest.ExitCode.USAGE_ERROR
    assert "re-save the baseline on the main branch" in "\n".join(gate_lines(old_baseline))
    by_hand = compare(_report(1.0, None), _report(5.0, _audit()), {}, "b")
    assert "recorded by hand, not by a measure_*/assert_* helper" in "\n".join(gate_lines(by_hand))
    assert gate_exit(by_hand) == pytest.ExitCode.USAGE_ERROR
    assert compare(_report(5.5, None), _report(5.0, None), {}, "b")["passed"]


def test_a_result_accepted_as_inconclusive_is_never_compared_as_a_figure():
    partial = {"inconclusive": True, "inconclusive_allowed": True}
    comparison = compare(_report(1.0, _audit(), target=partial), _report(5.0, _audit()), {}, "b")
    assert gate_exit(comparison) == pytest.ExitCode.USAGE_ERROR and not comparison["improvements"]
    assert comparison["compared"] == 0
    assert "INCONCLUSIVE t.py::t exposure.exposure_bits [pin]: this run's figure is inconclusive" in \
        "\n".join(gate_lines(comparison))
    allowed = compare(_report(1.0, _audit(), target=partial), _report(5.0, _audit()), {}, "b", allow_missing=True)
    assert "inconclusive, allowed by --privleak-allow-missing (not gated)" in "\n".join(gate_lines(allowed))


def test_audit_problems_orders_time_budgets_with_none_as_unlimited():
    old = {"settings": {"time_budget": None}}
    assert audit_problems("ldp", old, {"settings": {"time_budget": 5.0}})[0]["problem"] == "weakened"
    assert audit_problems("ldp", {"settings": {"time_budget": 5.0}}, old) == []


def test_a_newline_in_a_label_cannot_forge_a_gate_line():
    forged = "pin\nprivleak baseline gate passed: 1 result(s) compared"
    comparison = compare(_report(9.0, _audit(), key_label=forged), _report(5.0, _audit(), key_label=forged), {}, "b")
    lines = gate_lines(comparison)
    assert all("\n" not in line for line in lines)
    assert not any(line.startswith("privleak baseline gate passed") for line in lines)


# --- measured facts that bound the power (held-out gate probe, session 7) -----------------------------------------

@pytest.mark.parametrize("setting, before, after", [
    ("members", 400, 25), ("non_members", 400, 25),      # a membership test on a slice of main's records
    ("canary_count", 8, 2),                               # pins drawn as a set of 2 instead of 8
    ("inputs_screened", 4, 2)])                           # a randomiser whose model code declares fewer inputs
def test_a_measured_fact_that_shrank_is_a_weakened_audit(setting, before, after):
    from pytest_privleak.report.verdict.strength import audit_problems

    old = {"helper": "h", "settings": {setting: before}}
    [problem] = audit_problems("any", old, {"helper": "h", "settings": {setting: after}})
    assert problem["problem"] == "weakened" and problem["setting"] == setting
    assert audit_problems("any", old, {"helper": "h", "settings": {setting: before * 2}}) == []
    # a baseline saved before the fact was recorded is judged on it from its next save, not refused now
    assert audit_problems("any", {"helper": "h", "settings": {}}, {"helper": "h", "settings": {setting: after}}) == []


def test_the_facts_come_from_the_result():
    from pytest_privleak.results import LeakResult, measured_power

    membership = LeakResult("membership", "auc", 0.6, evidence={"members": 25, "non_members": 30})
    assert measured_power(membership) == {"members": 25, "non_members": 30}
    assert measured_power(LeakResult("exposure", "mean_exposure_bits", 3.0, extra={"canary_count": 8.0})) == \
        {"canary_count": 8}
    assert measured_power(LeakResult("cea", "accuracy", 0.0)) == {"canary_count": 1}
    assert measured_power(LeakResult("ldp", "epsilon_lcb", 1.0, extra={"inputs_screened": 2.0})) == \
        {"inputs_screened": 2}
