"""A figure over seeds is inconclusive when any seed's run was cut short by its budget (issue 23 item 4 x 26).

Before: only the first seed's result carried the fact, so a later seed cut short let the aggregate pass.
"""
from __future__ import annotations

import pytest

from pytest_privleak.attacks.inconclusive import InconclusiveAuditError, check_covered
from pytest_privleak.attacks.over_seeds import run_over_seeds
from pytest_privleak.results import LeakResult, set_sink
from pytest_privleak.targets.seeds import SeedModels


def planted(model, allow_inconclusive=False):
    """A measurement within its limit; the model named ``short`` ran out of its budget."""
    result = LeakResult(attack="exposure", metric="exposure_bits", value=1.0, threshold=6.0, chance=1.44, label="pin")
    return check_covered(result, complete=model != "short", covered="16 of 1,000 secrets scored",
                         rest="method='exact'", allow_inconclusive=allow_inconclusive)


@pytest.fixture
def sink():
    found = []
    set_sink(found)
    yield found
    set_sink(None)


@pytest.mark.parametrize("models", [["full", "short", "full"], ["short", "full", "full"]])
def test_any_seed_cut_short_makes_the_figure_over_seeds_inconclusive(sink, models):
    with pytest.raises(InconclusiveAuditError, match=r"1 of 3 seeds' runs \(seed \d\) were cut short") as info:
        run_over_seeds(planted, (SeedModels(models, [0, 1, 2]),), {}, [SeedModels(models, [0, 1, 2])])
    assert info.value.result.target["inconclusive"] is True and "method='exact'" in str(info.value)
    assert sink[-1].target["inconclusive_allowed"] is False


def test_every_seed_covered_or_accepted_passes(sink):
    full = SeedModels(["full", "full", "full"], [0, 1, 2])
    assert run_over_seeds(planted, (full,), {}, [full]).passed
    short = SeedModels(["full", "short", "full"], [0, 1, 2])
    accepted = run_over_seeds(planted, (short,), {"allow_inconclusive": True}, [short])
    assert accepted.passed and accepted.target["inconclusive_allowed"] is True
