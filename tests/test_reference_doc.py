"""docs/reference.md lists every public assertion and every fixture of the plugin (issue 34 item 4).

The README sends readers there for the arguments; a helper or fixture added without its row is a name a
user cannot look up (``assert_membership_tpr_at_most`` was missing for a while).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_privleak import assertions

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def missing_from(doc: str, names: set[str]) -> list[str]:
    """The names ``doc`` does not show as code: `` `name(...)` `` or `` `name` `` (also ``a`, `name``)."""
    return sorted(n for n in names if not re.search(rf"`{re.escape(n)}(\(|`)", doc))


def plugin_fixtures(request: pytest.FixtureRequest) -> set[str]:
    """Every fixture the plugin (``pytest_privleak.plugin`` and its modules) defines, read from pytest's registry."""
    names = set()
    for definition in request.session._fixturemanager._get_all_fixture_defs():
        module = getattr(getattr(definition, "func", None), "__module__", "") or ""
        if module.startswith("pytest_privleak.plugin"):
            names.add(definition.argname)
    return names


def public_helpers() -> set[str]:
    return set(assertions._HELPERS)


def test_every_public_assertion_and_measure_helper_has_a_row():
    assert missing_from(REFERENCE.read_text(encoding="utf-8"), public_helpers()) == []


def test_every_plugin_fixture_has_a_row(request):
    fixtures = plugin_fixtures(request)
    assert {"canary", "train_target", "privleak_seeds"} <= fixtures  # the registry was read, not an empty set
    assert missing_from(REFERENCE.read_text(encoding="utf-8"), fixtures) == []


def test_the_check_finds_a_helper_the_doc_lacks_and_accepts_the_forms_the_tables_use():
    doc = "| `assert_exposure_below(target, canary, max_bits)` / `measure_exposure(...)` |\n| `privleak_device`, `privleak_seed` |"
    assert missing_from(doc, {"assert_exposure_below", "measure_exposure", "privleak_device", "privleak_seed"}) == []
    assert missing_from(doc, {"assert_membership_tpr_at_most", "measure_exposure"}) == ["assert_membership_tpr_at_most"]
    # a name inside another name's text is not a row of its own
    assert missing_from("`measure_exposure_extra(...)`", {"measure_exposure"}) == ["measure_exposure"]
