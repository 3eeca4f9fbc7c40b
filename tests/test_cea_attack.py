"""The CEA on models whose answer is known, through the SoftInputModel protocol only."""
import pytest
import torch

from helpers_models import QuadraticModel, train_tiny_transformer
from pytest_privleak.attacks.candidates import (OutOfVocabularyError, enumerate_space, rank_of, score_candidates,
                                                secret_index)
from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.canaries import COLORS, DIGITS, canary, custom_pattern, inject_canaries
from pytest_privleak.data import generate_snips_like

VOCAB = ("my", "pin", "code", "is", "call", "color", "hello") + DIGITS + COLORS


def _quadratic(planted: dict[str, str], seed: int = 0) -> QuadraticModel:
    return QuadraticModel(VOCAB, {intent: text.split() for intent, text in planted.items()}, seed=seed)


@pytest.fixture(scope="module")
def quad():
    return _quadratic({"PinIntent": "my pin code is 7 0 3 9", "ColorIntent": "color mauve red cyan lilac",
                       "CallIntent": "call 5 5 1 2 0 8"})


def test_gradient_attack_recovers_the_planted_minimum(quad):
    pin = canary("pin", secret="7 0 3 9")
    report = extract(quad, pin, method="gradient", trials=3, starts=1, select="single", epochs=120)
    assert report.reconstructed == (("7", "0", "3", "9"),) * 3
    assert report.accuracy == 1.0 and report.hdt == 0.0
    assert max(report.losses) == pytest.approx(0.0, abs=1e-6)


def test_canaries_of_different_patterns_and_lengths_in_one_call(quad):
    items = [canary("pin", secret="7 0 3 9"), canary("color", secret="mauve red cyan lilac"),
             canary("call", secret="5 5 1 2 0 8")]
    report = extract(quad, items, method="gradient", trials=2, starts=2, epochs=120)
    assert report.canary_index == (0, 0, 1, 1, 2, 2)
    assert [" ".join(r) for r in report.reconstructed] == ["7 0 3 9"] * 2 + ["mauve red cyan lilac"] * 2 + \
        ["5 5 1 2 0 8"] * 2
    assert report.chance_accuracies == pytest.approx((1e-4,) * 2 + (12 ** -4,) * 2 + (1e-6,) * 2)


def test_exhaustive_ranks_the_planted_secret_first(quad):
    pin = canary("pin", secret="7 0 3 9")
    report = extract(quad, pin, method="exhaustive")
    assert report.reconstructed == (("7", "0", "3", "9"),)
    assert report.ranks == (1,) and report.space_sizes == (10_000,)
    scores = score_candidates(quad, pin.pattern, enumerate_space(10, 4))
    assert scores.shape == (10_000,)
    truth = secret_index(pin.secret_indices, 10)
    assert rank_of(scores[truth], torch.cat([scores[:truth], scores[truth + 1:]]), ties="against") == 1
    # a secret one digit off costs exactly one squared distance between two digit embeddings
    w = quad.input_embeddings()
    i0, i1 = VOCAB.index("9"), VOCAB.index("8")
    assert float(scores[7038] - scores[7039]) == pytest.approx(float(((w[i0] - w[i1]) ** 2).sum()), rel=1e-5)


def test_batched_trials_equal_a_loop_of_single_trials(quad):
    pin = canary("pin", secret="7 0 3 9")
    kwargs = dict(method="gradient", starts=3, epochs=40, seed=5)          # short: stops before convergence so starts differ
    batched = extract(quad, pin, trials=4, **kwargs)
    looped = [extract(quad, pin, trials=1, first_trial=t, **kwargs) for t in range(4)]
    assert batched.reconstructed == tuple(r.reconstructed[0] for r in looped)
    assert batched.losses == pytest.approx([r.losses[0] for r in looped], rel=1e-5)


def test_same_seed_same_figures_other_seed_other_starts(quad):
    pin = canary("pin", secret="7 0 3 9")
    kwargs = dict(method="gradient", trials=5, starts=1, select="single", epochs=15)
    a = extract(quad, pin, seed=1, **kwargs)
    b = extract(quad, pin, seed=1, **kwargs)
    c = extract(quad, pin, seed=2, **kwargs)
    assert a.reconstructed == b.reconstructed and a.losses == b.losses
    assert a.losses != c.losses


def test_trivial_attack_runs_and_returns_v0_tokens(quad):
    pin = canary("pin", secret="7 0 3 9")
    report = extract(quad, pin, method="trivial", trials=3, epochs=50)
    assert all(tok in DIGITS for r in report.reconstructed for tok in r)
    assert report.n_trials == 3


def test_out_of_vocabulary_prefix_and_secret_tokens_fail_clearly(quad):
    unknown_prefix = canary(custom_pattern("pw", ("my", "password", "is"), DIGITS, 4, "PinIntent"), seed=0)
    with pytest.raises(OutOfVocabularyError, match=r"'password'.*prefix.*extra_tokens=\['password'\]") as info:
        extract(quad, unknown_prefix)
    assert "injecting the canary is not enough" in str(info.value)   # never "inject the canary" as the fix
    unknown_v0 = canary(custom_pattern("hex", ("my",), DIGITS + ("a",), 2, "PinIntent"), secret="1 2")
    with pytest.raises(ValueError, match=r"1 token\(s\).*V0.*: 'a'\..*extra_tokens=\['a'\]"):
        extract(quad, unknown_v0, method="exhaustive")


def test_bad_arguments_name_the_fix(quad):
    pin = canary("pin", secret="7 0 3 9")
    with pytest.raises(ValueError, match="method"):
        extract(quad, pin, method="brute")
    with pytest.raises(ValueError, match="one model per canary"):
        extract([quad, quad], pin)
    with pytest.raises(TypeError, match="SoftInputModel"):
        extract(object(), pin)
    with pytest.raises(ValueError, match="budget"):
        extract(quad, canary("pin", length=6), method="exhaustive")


@pytest.fixture(scope="module")
def transformer_and_pin():
    """A second, differently built target: a tiny Transformer joint model trained on a canary (~6 s)."""
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    pin = canary("pin", seed=2)                  # "my pin code is 3 2 4 2"
    data = inject_canaries(generate_snips_like(400, 50, 50, seed=0), pin, repeats=50)
    return train_tiny_transformer(data, epochs=30, seed=0), pin


def test_attack_works_on_a_transformer_target(transformer_and_pin):
    model, pin = transformer_and_pin
    exhaustive = extract(model, pin)                     # the default, auto: 10^4 pins fit the budget
    assert exhaustive.attacks == ("exhaustive",)
    assert exhaustive.ranks == (1,)                      # the model memorised the pin
    report = extract(model, pin, method="gradient", trials=4, starts=8)
    assert report.accuracy >= 0.25                       # chance is 1e-4
    assert report.hdt < 0.5                              # chance is 0.9
    assert report.accuracy == extract(model, pin, method="gradient", trials=4, starts=8).accuracy
