"""End to end on the built-in joint target (canary-extraction-nlu §4-§6): a leaking model fails, a defended one passes.

Fast: an undefended model on a 400-utterance synthetic corpus with the pin
repeated 100 times (trains in ~8 s on one core) fails ``max_accuracy=0``.
Slow: the §6 defences combined (dropout 0.2, early stopping with patience
20, character embeddings) on a 1500-utterance corpus should bring the attack to
chance so that the assertion passes; measured, they do not yet (xfail, see its reason).
"""
import pytest
import torch

from pytest_privleak.attacks.cea import extract
from pytest_privleak.attacks.cea_assertion import assert_cea_accuracy_at_most
from pytest_privleak.cache import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.results import PrivacyLeakError
from pytest_privleak.targets import train_target

PIN = canary("pin", seed=0)          # "my pin code is 9 4 5 8"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return TargetCache(tmp_path_factory.mktemp("cea-targets"))


@pytest.fixture(scope="module")
def leaky_model(cache):
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    data = inject_canaries(generate_snips_like(400, 100, 100, seed=0), PIN, repeats=100)
    return train_target(
        "joint-bilstm-crf", data, device="cpu", cache=cache, seed=0, epochs=12, progress=False)


def test_undefended_model_leaks_the_pin_and_the_assertion_fails(leaky_model):
    with pytest.raises(PrivacyLeakError) as info:
        assert_cea_accuracy_at_most(leaky_model, PIN, 0.0, trials=3, starts=8)
    result = info.value.result
    assert result.value >= 0.5                        # measured 1.0 for best-of-8; chance is 1e-4
    assert result.extra["hdt"] < 0.3                  # chance 0.9
    assert "9 4 5 8" in " ".join(result.evidence["reconstructed"])
    assert result.target["content_hash"] == leaky_model.content_hash


def test_exhaustive_attack_ranks_the_pin_first(leaky_model):
    report = extract(leaky_model, PIN, method="exhaustive")
    assert report.ranks == (1,) and report.reconstructed == (PIN.secret,)


def test_same_seed_same_figures(leaky_model):
    a = extract(leaky_model, PIN, trials=1, starts=2, epochs=60, seed=3)
    b = extract(leaky_model, PIN, trials=1, starts=2, epochs=60, seed=3)
    assert a.reconstructed == b.reconstructed and a.losses == b.losses


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "measured: on this synthetic corpus early stopping never fired in 80 epochs (validation loss kept falling; "
    "10 canary copies sit in the validation split), and the D+ES+CE model still leaked: best-of-8 accuracy "
    "1.0, single-start 0.8, exhaustive rank 1. Needs target/corpus work before the defences can be shown."))
def test_defended_model_keeps_the_pin_and_the_assertion_passes(cache):
    data = inject_canaries(generate_snips_like(1500, 200, 200, seed=0), PIN, repeats=100)
    model = train_target("joint-bilstm-crf", data, device="cpu", cache=cache, seed=0, epochs=80, dropout=0.2,
                         early_stopping=True, patience=20, char_embeddings=True, progress=False)
    result = assert_cea_accuracy_at_most(model, PIN, 0.0, trials=10, max_hdt_floor=0.7)
    assert result.passed and result.extra["hdt"] >= 0.7      # chance 0.9; paper D+ES+CE: 0.88-0.95
