"""End to end on the built-in joint target (canary-extraction-nlu §4-§6): a leaking model fails, a defended one passes.

Fast: an undefended model on a 400-utterance synthetic corpus with the pin
repeated 100 times (trains in ~8 s on one core) fails ``max_accuracy=0``.
Slow: on a realistic corpus, six pins each seen once in its own model: the
§6 defences combined (dropout 0.2, early stopping with patience 20, character
embeddings) make the assertion pass where the undefended model fails, and
raise the mean HDT from near 0 towards chance (see the comment above the test).
"""
import pytest
import torch

from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.attacks.cea.assertion import assert_cea_accuracy_at_most
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak import expect_leak

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
    with expect_leak() as info:
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
    a = extract(leaky_model, PIN, method="gradient", trials=1, starts=2, epochs=60, seed=3)
    b = extract(leaky_model, PIN, method="gradient", trials=1, starts=2, epochs=60, seed=3)
    assert a.reconstructed == b.reconstructed and a.losses == b.losses


# canary-extraction-nlu §6 on a realistic corpus: half of each slot's values occur only in
# validation/test (real splits hold unseen entities), so the validation loss turns and early
# stopping (patience 20) can act; each pin is seen once (R = 1, 0.07 % of the corpus, about the
# share of the paper's R = 10 in 13k Snips utterances). HDT is averaged over pins, each in its own
# model, as the paper averages over trials: one pin alone says little, because a model that has
# learnt nothing still guesses the same digits every time (its corpus prior, e.g. "9 _ _ 8"), and
# those match a given pin by luck or not. Against random pins the defended models' guesses score
# HDT 0.887-0.901 (chance 0.9). Measured (2 shared cores): undefended best-of-8 accuracy 1.0 and
# exhaustive rank 1 for pins 0-2, single-start HDT 0.075 / 0.30 / 0.275 (mean 0.22; paper, no
# defence: 0.18-0.48); defended (dropout 0.2 + early stopping + char embeddings, stopped at epoch
# 25, best epoch 5) best-of-8 accuracy 0.0 for pins 0-5, single-start HDT 0.55 / 0.875 / 0.80 /
# 1.0 / 0.75 / 0.775 (mean 0.79; paper ~0.9), exhaustive rank of the true pin 280 / 4387 / 3936 /
# 987 / 105 / 1152 of 10^4 (median ~1070; the pins a model never saw rank at median 3210 in it:
# a weak leak remains, .notes/exp_defended_cross_ranks.py). So the defences stop
# extraction and bring HDT near chance on average, not for every pin; with R >= 5 copies the pin is
# learnt before early stopping's best epoch and the defended model still leaks.
REALISTIC = dict(n_train=1500, n_valid=200, n_test=200, seed=0, unseen_share=0.5)
DEFENCES = dict(epochs=100, dropout=0.2, early_stopping=True, patience=20, char_embeddings=True)
PAPER_ATTACK = dict(method="gradient", trials=10, starts=1, select="single")   # §3.1: one random start per trial


@pytest.mark.slow
def test_defences_stop_the_attack_that_breaks_the_undefended_model(cache):
    hdt = {"undefended": [], "defended": []}
    for pin in [canary("pin", seed=s) for s in range(6)]:
        data = inject_canaries(generate_snips_like(**REALISTIC), pin, repeats=1)
        undefended = train_target("joint-bilstm-crf", data, device="cpu", cache=cache, seed=0, progress=False)
        with expect_leak():
            assert_cea_accuracy_at_most(undefended, pin, 0.0, trials=5)

        defended = train_target("joint-bilstm-crf", data, device="cpu", cache=cache, seed=0, progress=False,
                                **DEFENCES)
        assert defended.stopped_early, "early stopping must act for this to test the paper's defence"
        assert assert_cea_accuracy_at_most(defended, pin, 0.0, trials=5).value == 0.0

        hdt["undefended"].append(extract(undefended, pin, **PAPER_ATTACK).hdt)
        hdt["defended"].append(extract(defended, pin, **PAPER_ATTACK).hdt)
    mean = {k: sum(v) / len(v) for k, v in hdt.items()}
    assert mean["undefended"] <= 0.35, hdt                     # measured 0.22; chance is 0.9
    assert mean["defended"] >= mean["undefended"] + 0.4, hdt   # measured 0.79 vs 0.22 (pins 0-2)
    assert mean["defended"] >= 0.7, hdt                         # measured 0.79; chance 0.9, paper ~0.9
