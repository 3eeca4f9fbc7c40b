"""Reference models budgeted by time (issue 18 item 1): the first references of the unbudgeted run, as many as fit.

A fake recipe "trains" each reference by advancing a fake clock, so the
budget arithmetic is exact and the tests take milliseconds; one test trains
real lstm-lm references.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_privleak.attacks.membership import references as membership_references
from pytest_privleak.attacks.membership.assertion import (assert_membership_auc_at_most, assert_membership_tpr_at_most,
                                                          measure_membership)
from pytest_privleak.attacks.membership.references import TargetRecipe, train_references
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance

RECORDS = [Utterance((f"w{i}",), ("O",), "x") for i in range(1080)]
MEMBERS, NON_MEMBERS, POPULATION = RECORDS[:40], RECORDS[40:1040], RECORDS[1040:]
DIFFICULTY = dict(zip(RECORDS, np.random.default_rng(0).uniform(3.0, 20.0, len(RECORDS))))


class Table:
    """A SequenceScorer reading each utterance's loss from a dict."""

    def __init__(self, losses: dict):
        self.losses = losses

    def score(self, utterances):
        return np.array([self.losses[u] for u in utterances])


def trained_on(split) -> Table:
    """A record's loss is its difficulty, 2 lower in a model trained on it."""
    inside = set(split)
    return Table({u: DIFFICULTY[u] - 2.0 * (u in inside) for u in RECORDS})


TARGET = trained_on(MEMBERS)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


@dataclass(frozen=True)
class FakeRecipe(TargetRecipe):
    """A recipe whose reference ``j`` takes ``seconds[j]`` of the fake clock; it logs what each fit was given."""

    clock: Clock = field(default_factory=Clock)
    seconds: tuple = (10.0,) * 8
    fits: list = field(default_factory=list)

    def fit(self, train_split, seed, label):
        self.fits.append((tuple(train_split), seed, label))
        self.clock.now += self.seconds[len(self.fits) - 1]
        return trained_on(train_split)


@pytest.fixture
def recipe(monkeypatch):
    """A fresh fake recipe (10 s a reference) whose clock is the one train_references reads."""
    data = generate_snips_like(n_train=30, n_valid=10, n_test=10, seed=0)   # online: up to 2 x 30 candidates
    made = FakeRecipe(data, kind="lstm-lm")
    monkeypatch.setattr(membership_references, "time", SimpleNamespace(perf_counter=made.clock.perf_counter))
    return made


def with_seconds(recipe: FakeRecipe, *seconds: float) -> FakeRecipe:
    return FakeRecipe(recipe.dataset, kind="lstm-lm", clock=recipe.clock, seconds=seconds)


def test_training_stops_before_the_reference_that_would_pass_the_budget(recipe):
    refs = train_references(recipe, MEMBERS + NON_MEMBERS, POPULATION, k=4, time_budget_s=25)
    # 10 s, 10 s; the third would end at 30 s > 25 s
    assert refs.k == 2 and refs.k_requested == 4 and len(recipe.fits) == 2
    assert refs.in_pool.shape == (2, len(POPULATION))
    assert refs.note.startswith("2 of k=4 references: reference 3 would pass time_budget_s=25 (each took up to 10 s;"
                                " 20 s spent)")
    assert "time_budget_s=48 or more" in refs.note
    assert "a later run loads these at about no cost and goes on from reference 3" in refs.note


def test_the_budgeted_references_are_the_first_of_the_unbudgeted_run(recipe):
    budgeted = train_references(recipe, MEMBERS + NON_MEMBERS, POPULATION, k=4, seed=3, time_budget_s=25)
    first_two = list(recipe.fits)
    recipe.fits.clear()
    full = train_references(recipe, MEMBERS + NON_MEMBERS, POPULATION, k=4, seed=3)
    assert full.k == 4 and full.note == "" and full.k_requested == 4
    assert recipe.fits[:2] == first_two                           # same halves, seeds and labels (cache keys)
    assert np.array_equal(budgeted.in_pool, full.in_pool[:2])
    assert [fit[1] for fit in recipe.fits] == [3001, 3002, 3003, 3004]


def test_offline_and_online_budgets_count_references_and_pairs(recipe):
    cases = [(False, 35, 3), (False, 45, 4), (True, 25, 2), (True, 35, 2), (True, 45, 4)]
    for online, budget, expected in cases:
        recipe.fits.clear()
        refs = train_references(recipe, MEMBERS[:20] + NON_MEMBERS[:20], POPULATION, k=4, online=online,
                                time_budget_s=budget)
        assert refs.k == expected, (online, budget)
    recipe.fits.clear()
    refs = train_references(recipe, MEMBERS[:20] + NON_MEMBERS[:20], POPULATION, k=6, online=True, time_budget_s=35)
    assert "references 3-4 (a complementary pair) would pass time_budget_s=35" in refs.note
    assert (refs.trained_on(MEMBERS[:20] + NON_MEMBERS[:20]).sum(axis=0) == 1).all()   # each in one of the pair


def test_at_least_one_reference_or_pair_trains_and_the_note_says_it_passed_the_budget(recipe):
    refs = train_references(recipe, MEMBERS + NON_MEMBERS, POPULATION, k=4, time_budget_s=5)
    assert refs.k == 1
    assert refs.note.startswith("1 of k=4 references: the first reference alone took 10 s, over time_budget_s=5; at "
                                "least one reference always trains")
    recipe.fits.clear()
    pair = train_references(recipe, MEMBERS[:20] + NON_MEMBERS[:20], POPULATION, k=4, online=True, time_budget_s=5)
    assert pair.k == 2 and "the first pair alone took 20 s, over time_budget_s=5" in pair.note


def test_cached_references_cost_nothing_so_a_later_run_trains_the_rest(recipe):
    # a second run: references 1-2 come from the cache (0 s), so reference 3 is estimated at 0 s and trains
    later = with_seconds(recipe, 0.0, 0.0, 10.0, 10.0)
    refs = train_references(later, MEMBERS + NON_MEMBERS, POPULATION, k=4, time_budget_s=15)
    assert refs.k == 3 and "reference 4 would pass time_budget_s=15" in refs.note
    everything = train_references(with_seconds(recipe, 0.0, 0.0, 0.0, 0.0), MEMBERS + NON_MEMBERS, POPULATION, k=4,
                                  time_budget_s=15)
    assert everything.k == 4 and everything.note == "all k=4 references within time_budget_s=15 (0 s)"
    # the cached first reference gave no estimate of the second, which trained and passed the budget: said so
    over = train_references(with_seconds(recipe, 0.0, 10.0), MEMBERS + NON_MEMBERS, POPULATION, k=2, time_budget_s=5)
    assert over.k == 2 and over.note.startswith("all k=2 references in 10 s, over time_budget_s=5")


def test_measure_membership_says_how_many_references_ran_and_why(recipe):
    result = measure_membership(TARGET, MEMBERS, NON_MEMBERS, references=recipe, population=POPULATION, k=4,
                                time_budget_s=25)
    assert result.extra["n_references"] == 2 and result.extra["k_requested"] == 4
    assert result.evidence["references"].startswith("2 of k=4 references: reference 3 would pass time_budget_s=25")
    assert "offline, 2 reference(s)" in result.evidence["RMIA"]
    assert "auto: 2 reference model(s)" in result.evidence["why this attack"]
    assert "2 of k=4 references" in result.explain()
    assert result.value > 0.9                                   # still a measurement: the members are found


def test_both_gates_pass_the_budget_through(recipe):
    from pytest_privleak import expect_leak

    with expect_leak(match="1 of k=4 references: the first reference alone took 10 s"):
        assert_membership_tpr_at_most(TARGET, MEMBERS, NON_MEMBERS, max_tpr=0.05, references=recipe,
                                      population=POPULATION, time_budget_s=5)
    recipe.fits.clear()
    # a pass with 3 of the 4 references asked for is inconclusive (review L5), as every budgeted audit's
    with expect_leak(match=r"3 of k=4 reference models trained within time_budget_s"):
        assert_membership_auc_at_most(TARGET, MEMBERS, NON_MEMBERS, max_auc=1.0, method="lira",
                                      references=recipe, population=POPULATION, k=4, time_budget_s=35)
    recipe.fits.clear()
    lira = assert_membership_auc_at_most(TARGET, MEMBERS, NON_MEMBERS, max_auc=1.0, method="lira",
                                         references=recipe, population=POPULATION, k=4, time_budget_s=35,
                                         allow_inconclusive=True)
    assert lira.extra["n_references"] == 3 and "offline, 3 reference(s)" in lira.evidence["LiRA"]
    assert "reference 4 would pass time_budget_s=35" in lira.evidence["references"]
    assert lira.target["inconclusive_allowed"] is True


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_real_lstm_references_within_a_budget_then_from_the_cache(tmp_path):
    import torch

    from pytest_privleak.cache.targets import TargetCache

    torch.set_num_threads(1)
    cache = TargetCache(tmp_path)
    data = generate_snips_like(n_train=40, n_valid=120, n_test=60, seed=4)
    recipe = TargetRecipe(data, kind="lstm-lm", config={"epochs": 2, "progress": False}, cache=cache)
    seen = set(data.train)
    candidates = [u for u in dict.fromkeys(data.test) if u not in seen]
    population = [u for u in dict.fromkeys(data.valid) if u not in seen and u not in set(candidates)]
    # a budget no training fits: exactly one reference, and the note says it passed the budget
    one = train_references(recipe, candidates, population, k=3, time_budget_s=1e-6)
    assert one.k == 1 and "the first reference alone took" in one.note and "over time_budget_s=1e-06" in one.note
    def keys() -> set[str]:
        return {p.name.split(".")[0] for p in cache.root.iterdir()}

    before = keys()
    full = train_references(recipe, candidates, population, k=3)
    assert full.k == 3 and len(before) == 1 and len(keys() - before) == 2       # reference 1 came from the cache
    probe = candidates[:10]
    assert np.array_equal(one.models[0].score(probe), full.models[0].score(probe))
    assert math.isfinite(float(full.models[2].score(probe).sum()))
