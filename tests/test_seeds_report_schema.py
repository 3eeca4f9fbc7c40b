"""report.json over seeds validates against schema.json, and every field the writer emits is documented there.

Real reports from pytest runs: a shard's run over 5 seeds saving a signed baseline, a run whose figures over
seeds regress against it (the gate's seed fields), and the merge of the shard's report.
"""
import json

import jsonschema
import pytest

from pytest_privleak.report.json_writer import schema

TEST_FILE = """
import os

import numpy as np
from pytest_privleak import assert_membership_auc_at_most, expect_leak, measure_membership
from pytest_privleak.targets.seeds import train_over_seeds

MEMBERS, NON_MEMBERS = [f"m{i}" for i in range(10)], [f"n{i}" for i in range(10)]


class Planted:
    def __init__(self, shift):
        self.shift = shift

    def score(self, utterances):
        return np.array([float(u.text[1:]) + (0.0 if u.text[0] == "m" else self.shift - 0.5) for u in utterances])


def test_auc(privleak_seed, privleak_seeds):
    worse = float(os.environ.get("PLANTED_WORSE", "0"))
    models = train_over_seeds(lambda s: Planted(1 + s % 2 + worse), privleak_seeds, seed=privleak_seed, name="p")
    measure_membership(models, MEMBERS, NON_MEMBERS, name="planted")
    with expect_leak():
        assert_membership_auc_at_most(models, MEMBERS, NON_MEMBERS, 0.5, name="declared")
"""


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def undocumented(doc, node: dict, path: str = "") -> list[str]:
    """Paths of object keys in ``doc`` that the schema (at the matching place) does not name."""
    node = _resolve(node)
    for alt in node.get("oneOf", ()):
        alt = _resolve(alt)
        if (isinstance(doc, dict) and "properties" in alt) or (isinstance(doc, list) and "items" in alt):
            return undocumented(doc, alt, path)
    found = []
    if isinstance(doc, dict) and "properties" in node:
        for key, value in doc.items():
            if key not in node["properties"]:
                found.append(f"{path}/{key}")
            else:
                found += undocumented(value, node["properties"][key], f"{path}/{key}")
    elif isinstance(doc, list) and "items" in node:
        for value in doc:
            found += undocumented(value, node["items"], f"{path}[]")
    return found


def test_the_walker_finds_an_undocumented_field():
    assert undocumented({"schema": "x", "surprise": 1, "tests": [{"results": [{"per_seed": [], "odd": 2}]}]},
                        schema()) == ["/surprise", "/tests[]/results[]/odd"]


def _check(path):
    report = json.loads(path.read_text())
    jsonschema.Draft202012Validator(schema()).validate(report)
    assert undocumented(report, schema()) == [], path
    return report


def test_reports_over_seeds_validate_and_document_every_field(pytester, monkeypatch):
    monkeypatch.setenv("PRIVLEAK_CACHE_HMAC_KEY", "k" * 32)
    pytester.makepyfile(test_planted=TEST_FILE)
    run = lambda *a: pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-seeds", "5", *a)  # noqa
    assert run("--privleak-shard=1/1", "--privleak-report=shard1", "--privleak-save-baseline=base.json").ret == 0
    monkeypatch.setenv("PLANTED_WORSE", "1")
    assert run("--privleak-baseline=base.json", "--privleak-report=worse").ret == 1
    merged = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-merge-reports", "shard1",
                                           "--privleak-report=merged")
    assert merged.ret == 0, merged.stdout.str()
    saved = _check(pytester.path / "base.json")
    assert set(saved["signature"]) == {"hmac", "covers"}
    shard = _check(pytester.path / "shard1" / "report.json")
    (planted, declared) = shard["tests"][0]["results"]
    assert planted["per_seed"] == [0.55, 0.64, 0.55, 0.64, 0.55] and declared["expected"] is True
    assert shard["run"]["shard"]["index"] == 1
    worse = _check(pytester.path / "worse" / "report.json")
    regression = worse["baseline"]["regressions"][0]
    assert regression["before_seeds"] == planted["per_seed"] and regression["p_value"] < regression["alpha"]
    assert {c["outcome"] for c in worse["baseline"]["seeds"]} == {"regression"}
    assert _check(pytester.path / "merged" / "report.json")["run"]["merged_from"][0]["shard"] == "1/1"


def test_the_baseline_signature_covers_the_per_seed_figures(monkeypatch, tmp_path):
    # the gate over seeds reads per_seed (Welch t test): an unsigned per_seed let an edited baseline pass
    from pytest_privleak.report.baseline_file import check_signature, sign
    from pytest_privleak.report.model import ReportFileError

    monkeypatch.setenv("PRIVLEAK_CACHE_HMAC_KEY", "k" * 32)
    entry = {"key": "t::membership.auc", "attack": "membership", "metric": "auc", "direction": "lower",
             "value": 0.6, "tolerance": 0.05, "per_seed": [0.55, 0.65]}
    signed = sign({"tests": [{"nodeid": "t", "results": [entry]}]})
    check_signature(signed, tmp_path / "base.json")
    signed["tests"][0]["results"][0]["per_seed"] = [0.95, 0.25]
    with pytest.raises(ReportFileError, match="signature does not match"):
        check_signature(signed, tmp_path / "base.json")
