"""Exposure end to end on the synthetic corpora: LSTM language model and joint NLU model.

A pin repeated 100 times must fail ``assert_exposure_below`` and a pin never
inserted must pass; exposure grows with the number of repetitions (Secret
Sharer; d-exposure-discriminative eq. 1), measured as the mean over canaries.
"""
import numpy as np
import pytest

from pytest_privleak.attacks.exposure.attack import compute_exposure as measure_exposure
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak import expect_leak

LM = dict(epochs=3, hidden_dim=64)
PINS = [canary("pin", 4, seed=s) for s in range(4)]
NEVER_INSERTED = canary("pin", 4, seed=77)   # 2 9 2 4: shares no position with PINS[0]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus():
    return generate_snips_like(n_train=800, n_valid=80, n_test=0, seed=0)


def lm(corpus, repeats, pins=PINS[:1]):
    return train_target("lstm-lm", inject_canaries(corpus, pins, repeats=repeats), seed=0, progress=False, **LM)


def test_repeated_pin_fails_and_a_pin_never_inserted_passes(corpus):
    model = lm(corpus, 100)
    with expect_leak() as info:
        assert_exposure_below(model, PINS[0], 8.0)
    assert info.value.result.value > 12.0
    assert "exposure_bits" in str(info.value) and PINS[0].text in str(info.value)
    absent = assert_exposure_below(model, NEVER_INSERTED, 8.0)
    assert absent.evidence["method"] == "exact" and absent.value < 4.0


def test_exact_and_extrapolated_agree_within_one_bit_on_a_real_model(corpus):
    """Canaries seen 3 times sit at moderate exposure, where the skew-normal tail is trustworthy."""
    model = lm(corpus, 3, PINS)
    exact = [measure_exposure(model, c, method="exact") for c in PINS]
    extrapolated = [measure_exposure(model, c, method="extrapolated", references=3000, bootstrap=0) for c in PINS]
    moderate = [(e.value, x.value) for e, x in zip(exact, extrapolated) if e.value <= 8.0]
    assert len(moderate) >= 2
    for e, x in moderate:
        assert abs(e - x) <= 1.0, (e, x)


@pytest.mark.slow
def test_exposure_grows_with_repetitions(corpus):
    means = {}
    for repeats in (1, 10, 100):
        model = lm(corpus, repeats, PINS)
        means[repeats] = float(np.mean([measure_exposure(model, c).value for c in PINS]))
    assert means[1] < means[10] < means[100], means
    assert means[100] > 10.0


@pytest.mark.slow
def test_joint_nlu_pin_exposure_uses_the_training_loss(corpus):
    """Exposure of the joint intent+slot model: score = training loss with the canary's intent and tags."""
    small = dict(epochs=8, embedding_dim=32, hidden_dim=32)
    leaky = train_target("joint-bilstm-crf", inject_canaries(corpus, PINS[0], repeats=100), progress=False, **small)
    with expect_leak():
        assert_exposure_below(leaky, PINS[0], 8.0)
    clean = train_target("joint-bilstm-crf", inject_canaries(corpus, PINS[1], repeats=1), progress=False, **small)
    assert assert_exposure_below(clean, NEVER_INSERTED, 8.0).passed


def test_users_view_through_the_plugin(pytester):
    """A user's test file: fixtures build, inject and train; the leaking test fails with the figures."""
    pytester.makepyfile(test_user="""
        from pytest_privleak import assert_exposure_below

        def test_pin_is_not_memorised(canary, inject_canaries, train_target):
            from pytest_privleak.data.synthetic import generate_snips_like
            pin = canary("pin", length=4, seed=0, count=8)
            data = inject_canaries(generate_snips_like(n_train=800, n_valid=80, n_test=0), pin, repeats=100)
            model = train_target("lstm-lm", data, epochs=3, hidden_dim=64, progress=False)
            assert_exposure_below(model, pin, 8.0)
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--privleak-device=cpu",
                                          f"--privleak-cache-dir={pytester.path / 'cache'}")
    result.assert_outcomes(failed=1)
    # a canary set (issue 37): 8 pins, each ranked among the 9,993 secrets that are not pins
    # of the set, and the figure is their mean
    result.stdout.fnmatch_lines(["*exposure.mean_exposure_bits [[]8 pin canaries: my pin code is _ _ _ _[]]*"
                                 "violates the limit (at most 8.000)*",
                                 "*rank*ranks * of 9,993 secrets (the 7 other canaries of the set left out)*",
                                 "*remedy*"])


def test_a_custom_prefix_outside_the_vocabulary_is_refused_and_extra_tokens_fixes_it(corpus):
    """Before issue 12 the unknown prefix word was scored as <unk> and a figure reported."""
    from pytest_privleak.attacks.candidates import OutOfVocabularyError
    from pytest_privleak.canaries import custom_pattern

    badge = canary(custom_pattern("badge", ("my", "badge", "is"), tuple("0123456789"), 2, "GetWeather"), seed=3)
    small = corpus.with_train(corpus.train[:120])
    plain = train_target("lstm-lm", small, seed=0, progress=False, epochs=1, hidden_dim=16)
    with pytest.raises(OutOfVocabularyError, match=r"'badge'.*extra_tokens=\['badge'\]"):
        measure_exposure(plain, badge)
    fixed = train_target("lstm-lm", small, seed=0, progress=False, epochs=1, hidden_dim=16, extra_tokens=["badge"])
    assert 0.0 <= measure_exposure(fixed, badge).value <= np.log2(100)
