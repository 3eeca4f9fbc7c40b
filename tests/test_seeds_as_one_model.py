"""With a default k > 1 every train_target returns SeedModels: code written for one model keeps working.

A public attribute or a call goes to the first seed's model with a OneDrawWarning (once); private and special
names are not forwarded; the helpers of pytest_privleak judge every seed, also of SeedModels given in a list
(one model per canary, the paper's protocol).
"""
import copy
import warnings

import numpy as np
import pytest

from pytest_privleak import assertions, results
from pytest_privleak.attacks.membership.assertion import measure_membership as undispatched_measure
from pytest_privleak.attacks.over_seeds import run_over_seeds, seed_sets
from pytest_privleak.results import LeakResult, record
from pytest_privleak.targets.seeds import OneDrawWarning, SeedModels

MEMBERS = [f"m{i}" for i in range(10)]
NON_MEMBERS = [f"n{i}" for i in range(10)]


class Planted:
    """Members lose i, non-members j + shift - 0.5: the loss attack's AUC grows with shift."""

    def __init__(self, shift: int) -> None:
        self.shift = shift
        self.labels = ("a", "b")

    def score(self, utterances):
        return np.array([float(u.text[1:]) + (0.0 if u.text[0] == "m" else self.shift - 0.5) for u in utterances])

    def __call__(self, x):
        return x * self.shift


@pytest.fixture
def sink():
    found = []
    results.set_sink(found)
    yield found
    results.set_sink(None)


def test_an_attribute_or_a_call_is_the_first_seeds_with_one_warning():
    models = SeedModels([Planted(3), Planted(4)], [7, 8], name="planted")
    with pytest.warns(OneDrawWarning, match=r"model of training seed 7 answered, so what it gives is one draw of 2"):
        assert models.shift == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per object
        assert models.labels == ("a", "b") and models(2) == 6
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        models.missing


def test_one_member_forwards_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SeedModels([Planted(5)], [0]).shift == 5


def test_private_and_special_names_are_not_forwarded():
    models = SeedModels([Planted(3), Planted(4)], [0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(models, "_private") and not hasattr(models, "__array__")
        assert list(copy.copy(models)) == list(models) and len(models) == 2


def test_an_attack_not_dispatched_over_seeds_still_runs_on_one_draw(sink):
    models = SeedModels([Planted(1), Planted(2)], [0, 1])
    alone = undispatched_measure(Planted(1), MEMBERS, NON_MEMBERS, name="p").value
    with pytest.warns(OneDrawWarning, match="used as one model .attribute"):
        assert undispatched_measure(models, MEMBERS, NON_MEMBERS, name="p").value == alone
    over = assertions.measure_membership(models, MEMBERS, NON_MEMBERS, name="p")
    assert over.per_seed[0] == alone and over.per_seed[1] > alone


def _sum_of_shifts(targets, name="s"):
    """A planted helper taking one model per canary, as cea does: its figure is the sum of their shifts."""
    return record(LeakResult(attack="planted", metric="sum", value=float(sum(t.shift for t in targets)), label=name))


def test_seed_models_inside_a_list_are_judged_seed_by_seed(sink):
    first = SeedModels([Planted(1), Planted(2), Planted(3)], [0, 1, 2])
    second = SeedModels([Planted(10), Planted(20), Planted(30)], [0, 1, 2])
    args = ([first, second],)
    assert seed_sets(args, {}) == [first, second]
    over = run_over_seeds(_sum_of_shifts, args, {}, seed_sets(args, {}))
    assert over.per_seed == (11.0, 22.0, 33.0) and over.value == 22.0 and sink == [over]
    with pytest.raises(ValueError, match="must share their seeds"):
        seed_sets(([first, SeedModels([Planted(1), Planted(2), Planted(3)], [5, 6, 7])],), {})
