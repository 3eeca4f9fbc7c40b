"""The default CEA (``method="auto"``) against exhaustive ranks, on corpora other than the one it was tuned on.

Issue 12: on real Snips the old default (gradient, best of 8) passed models
whose true pin was the single most likely of all 10^4. Here the gate's verdict
is checked against the exact rank of each true secret (``method="exhaustive"``,
``budget=None``; rank 1 = the truth is the unique lowest loss): the default
assertion must fail every model that ranks its secret first. Also the
over-budget path (gradient then ranked scoring): its rank is a lower bound, so
it must never exceed the exact rank.

Both slow (see the timings above each). First: one small corpus of another generator seed, a pin and a colour canary
(different pattern, |V0| = 12) in one model. Second: the bundled realistic corpus
(``unseen_share=0.5``), three pins each in its own undefended model, said 1, 3
and 10 times.
"""
import pytest
import torch

from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.attacks.cea.assertion import assert_cea_accuracy_at_most, measure_cea
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.results import PrivacyLeakError, set_sink
from pytest_privleak.targets import train_target


def _exact_ranks(models, canaries):
    report = extract(models, canaries, method="exhaustive", budget=None)
    assert report.ranks_exact == (True,) * len(canaries)
    return report.ranks


def _gate_fails(models, canaries) -> bool:
    """The gate's verdict, its results diverted (a leak found here is this test's evidence, not a swallowed one)."""
    set_sink([])
    try:
        assert_cea_accuracy_at_most(models, canaries, 0.0)
    except PrivacyLeakError:
        return True
    finally:
        set_sink(None)
    return False


def _check_over_budget_bound(models, canaries, exact):
    """auto with a budget below |V0|^n runs gradient + ranked scoring; its rank bound <= the exact rank."""
    report = extract(models, canaries, budget=100, trials=2, starts=4, ranked=64)
    assert set(report.attacks) == {"gradient+ranked"} and report.ranks_exact == (False,) * len(canaries)
    for bound, rank, scored in zip(report.ranks, exact, report.scored):
        assert 1 <= bound <= rank and scored >= 64, (report.ranks, exact)
    return report


@pytest.fixture(scope="module")
def two_patterns_one_model():
    """Another corpus (generator seed 7, 300 utterances) with a pin and a colour canary, each said 10 times."""
    torch.set_num_threads(1)
    pin, color = canary("pin", seed=11), canary("color", seed=11)
    data = inject_canaries(generate_snips_like(300, 60, 60, seed=7, unseen_share=0.5), [pin, color], repeats=10)
    return train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, epochs=10, progress=False), \
        [pin, color]


@pytest.mark.slow   # measured 238 s on the shared 2-core machine (load ~11): 4 exhaustive scorings of 30k secrets
def test_auto_gate_fails_exactly_when_a_secret_ranks_first(two_patterns_one_model):
    model, canaries = two_patterns_one_model
    exact = _exact_ranks(model, canaries)
    assert min(exact) == 1, f"the model memorised neither canary (exact ranks {exact}); the test says nothing"
    assert _gate_fails(model, canaries) == (min(exact) == 1)
    for one, rank in zip(canaries, exact):
        result = measure_cea(model, one)
        assert result.evidence["rank_of_truth"].startswith(f"{rank} of ")
        assert result.value == float(rank == 1)
    _check_over_budget_bound(model, canaries, exact)


@pytest.mark.slow
def test_auto_gate_fails_every_undefended_model_whose_pin_ranks_first_on_the_realistic_corpus():
    """Three pins, each in its own undefended joint BiLSTM-CRF, said 1, 3 and 10 times (§4.2 protocol)."""
    torch.set_num_threads(1)
    pins = [canary("pin", seed=s) for s in (21, 22, 23)]
    models = []
    for pin, repeats in zip(pins, (1, 3, 10)):
        data = inject_canaries(generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=3, unseen_share=0.5),
                               pin, repeats=repeats)
        models.append(train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False))
    exact = _exact_ranks(models, pins)
    assert 1 in exact, f"no model ranks its pin first (exact ranks {exact}); the test says nothing"
    for model, pin, rank in zip(models, pins, exact):
        assert _gate_fails(model, pin) == (rank == 1), (pin.text, rank)
    assert _gate_fails(models, pins)                   # the paper's protocol in one call
    _check_over_budget_bound(models, pins, exact)
