"""Results of attacks the report has no special code for go through it unchanged, in a subprocess run:
membership inference (a real ``assert_membership_auc_at_most`` on a loss table), a CEA result with the
``method="auto"`` extra fields, and an attack and metric no module knows yet. Each shows in the terminal
summary, index.html and summary.md, matches the JSON schema, is saved in a baseline with a tolerance and is
gated against it, so a new attack needs no change in the plugin.
"""
from __future__ import annotations

import json

import pytest

from pytest_privleak.report.json_writer import validate

SUITE = '''
import json, pathlib
import numpy as np
from pytest_privleak.assertions import check
from pytest_privleak.attacks.membership.assertion import assert_membership_auc_at_most
from pytest_privleak.results import LeakResult

V = json.loads(pathlib.Path(__file__).with_name("values.json").read_text())
MEMBERS = [f"member {i}" for i in range(20)]
HELD_OUT = [f"held out {i}" for i in range(20)]


class LossTable:
    """A SequenceScorer whose loss per utterance is looked up; held-out losses are shifted by V["gap"]."""

    def score(self, utterances):
        losses = {**{u: 1.0 + 0.1 * i for i, u in enumerate(MEMBERS)},
                  **{u: 1.0 + V["gap"] + 0.1 * i for i, u in enumerate(HELD_OUT)}}
        return np.array([losses[u] for u in utterances])


def test_membership():
    assert_membership_auc_at_most(LossTable(), MEMBERS, HELD_OUT, max_auc=1.0, name="loss-table")


def test_cea_auto():
    check(LeakResult(attack="cea", metric="accuracy", value=V["acc"], threshold=1.0, interval=(0.0, 0.3),
                     confidence=0.95, chance=1e-4, label="pin",
                     evidence={"method": "exhaustive", "rank_of_truth": [3, 1]},
                     extra={"hdt": 0.5, "hdt_chance": 0.9, "correct": 0.0, "n_trials": 10.0,
                            "best_rank_of_truth": 1.0}))


def test_future_attack():
    check(LeakResult(attack="embedding-inversion", metric="reconstruction_f1", value=V["f1"], threshold=0.9,
                     chance=0.01, label="minilm", extra={"top1": 0.2, "top1_chance": 0.01}))
'''


@pytest.fixture
def project(pytester: pytest.Pytester):
    pytester.makepyfile(test_new=SUITE)
    pytester.path.joinpath("values.json").write_text(json.dumps({"gap": 0.0, "acc": 0.0, "f1": 0.2}))
    result = pytester.runpytest_subprocess("--privleak-save-baseline=base.json", "--privleak-report=rep")
    result.assert_outcomes(passed=3)
    return pytester, result


def test_new_attacks_show_in_every_view_and_match_the_schema(project):
    pytester, result = project
    result.stdout.fnmatch_lines(["*test_cea_auto*cea.accuracy*pin*0.000*0.000..0.300*",
                                 "*test_future_attack*embedding-inversion.reconstruction_f1*minilm*0.200*",
                                 "*test_membership*membership.auc*loss-table*0.500*"])
    report = json.loads(pytester.path.joinpath("rep", "report.json").read_text())
    validate(report)  # the full JSON Schema (jsonschema is installed for the tests)
    results = {r["name"]: r for t in report["tests"] for r in t["results"]}
    assert set(results) == {"membership.auc", "cea.accuracy", "embedding-inversion.reconstruction_f1"}
    assert results["membership.auc"]["value"] == pytest.approx(0.5) and results["membership.auc"]["chance"] == 0.5
    assert results["cea.accuracy"]["extra"]["best_rank_of_truth"] == 1.0
    html = pytester.path.joinpath("rep", "index.html").read_text()
    md = pytester.path.joinpath("rep", "summary.md").read_text()
    for name in results:
        assert name in html and f"`{name}`" in md
    assert "best_rank_of_truth" in html and "top1" in html  # the extras are in the details
    saved = json.loads(pytester.path.joinpath("base.json").read_text())
    stored = {r["name"]: (r["tolerance"], r["tolerance_source"]) for t in saved["tests"] for r in t["results"]}
    assert stored == {"membership.auc": (0.05, "built-in default"), "cea.accuracy": (0.05, "built-in default"),
                      "embedding-inversion.reconstruction_f1": (0.05, "built-in default")}


def test_new_attacks_are_gated_against_the_baseline(project):
    pytester, _ = project
    pytester.path.joinpath("values.json").write_text(json.dumps({"gap": 5.0, "acc": 0.3, "f1": 0.4}))
    result = pytester.runpytest_subprocess("--privleak-baseline=base.json")
    result.assert_outcomes(passed=3)  # each within its own limit...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ...but each leaks more than in the baseline
    result.stdout.fnmatch_lines([
        "privleak baseline gate FAILED: 3 result(s) leak more than in base.json beyond tolerance",
        "*REGRESSION test_new.py::test_cea_auto cea.accuracy [[]pin[]]: before 0.000, after 0.300*",
        "*REGRESSION test_new.py::test_future_attack embedding-inversion.reconstruction_f1 [[]minilm[]]: "
        "before 0.200, after 0.400*",
        "*REGRESSION test_new.py::test_membership membership.auc [[]loss-table[]]: before 0.500, after 1.000*",
    ])
