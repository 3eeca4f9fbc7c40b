"""Every re-exported helper given ``SeedModels`` measures each member and records one figure over seeds."""
import numpy as np
import pytest
import torch

from pytest_privleak import assertions, results
from pytest_privleak.results import PrivacyLeakError
from pytest_privleak.targets.seeds import SeedIgnoredWarning, SeedModels, train_over_seeds

MEMBERS = [f"m{i}" for i in range(10)]
NON_MEMBERS = [f"n{i}" for i in range(10)]


class Planted:
    """A loss scorer: members lose i, non-members j + shift - 0.5, so the loss attack's AUC grows with shift."""

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def score(self, utterances):
        return np.array([float(u.text[1:]) + (0.0 if u.text[0] == "m" else self.shift - 0.5) for u in utterances])


@pytest.fixture
def sink():
    found = []
    results.set_sink(found)
    yield found
    results.set_sink(None)


def test_measure_over_seeds_records_one_result_with_each_seed(sink):
    alone = [assertions.measure_membership(Planted(s), MEMBERS, NON_MEMBERS, name="p").value for s in (1, 2, 3)]
    sink.clear()
    over = assertions.measure_membership(SeedModels([Planted(s) for s in (1, 2, 3)], [0, 1, 2]), MEMBERS,
                                         NON_MEMBERS, name="p")
    assert sink == [over]  # the members' own results are not recorded
    assert over.per_seed == tuple(alone) and alone[0] < alone[1] < alone[2]
    assert over.value == pytest.approx(np.mean(alone)) and over.label == "p"
    assert over.target["seeds"] == [0, 1, 2]


def test_assert_over_seeds_fails_on_the_upper_bound(sink):
    models = SeedModels([Planted(s) for s in (1, 2, 3)], [0, 1, 2])
    worst = max(assertions.measure_membership(Planted(s), MEMBERS, NON_MEMBERS, name="p").value for s in (1, 2, 3))
    sink.clear()
    with pytest.raises(PrivacyLeakError) as caught:  # every seed is within worst + 0.001; the bound is not
        assertions.assert_membership_auc_at_most(models, MEMBERS, NON_MEMBERS, worst + 0.001, name="p")
    assert caught.value.result is sink[0] and len(sink) == 1
    assert caught.value.result.extra["share_over_limit"] == 0
    assert "upper bound over seeds" in str(caught.value)
    passed = assertions.assert_membership_auc_at_most(models, MEMBERS, NON_MEMBERS, 0.99, name="p")
    assert passed.passed and passed.value > passed.extra["mean"]


def test_one_seed_says_one_draw(sink):
    one = assertions.measure_membership(SeedModels([Planted(2)], [5]), MEMBERS, NON_MEMBERS, name="p")
    assert one.per_seed == () and "one draw" in one.explain() and "training seed 5" in one.explain()


def test_plain_models_pass_straight_through(sink):
    r = assertions.measure_membership(Planted(2), MEMBERS, NON_MEMBERS, name="p")
    assert r.per_seed == () and "over seeds" not in r.evidence


def test_seeds_train_in_order_and_seed_ignoring_training_warns():
    def honest(seed):
        torch.manual_seed(seed)
        return torch.nn.Linear(2, 2)

    models = train_over_seeds(honest, 3, seed=4, name="honest")
    assert models.seeds == (4, 5, 6) and len(models) == 3
    assert not torch.equal(models[0].weight, models[1].weight)

    def ignores_seed(seed):
        torch.manual_seed(0)
        return torch.nn.Linear(2, 2)

    with pytest.warns(SeedIgnoredWarning, match="ignores_seed.*identical weights"):
        train_over_seeds(ignores_seed, 3, name="ignores_seed")


def test_xdist_workers_start_at_different_seeds(monkeypatch):
    order = []
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    models = train_over_seeds(lambda s: order.append(s) or torch.nn.Linear(1, 1), 3, seed=0)
    assert order == [1, 2, 0] and models.seeds == (0, 1, 2)


@pytest.mark.parametrize("worker, count, k, first", [
    ("gw0", "2", 7, 0), ("gw1", "2", 7, 3),               # 2 workers, 7 seeds: start 7 // 2 = 3 apart
    ("gw1", "3", 7, 2), ("gw2", "3", 7, 4),               # 3 workers: 7 // 3 = 2, 14 // 3 = 4
    ("gw1", "2", 2, 1), ("gw3", "8", 2, 1), ("gw4", "8", 2, 0),  # more workers than seeds: worker number mod k
])
def test_workers_start_evenly_spread_over_the_seeds(monkeypatch, worker, count, k, first):
    order = []
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", count)
    train_over_seeds(lambda s: order.append(s) or torch.nn.Linear(1, 1), k, seed=10)
    assert order == [10 + (first + i) % k for i in range(k)]
