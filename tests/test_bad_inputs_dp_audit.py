"""Bad inputs to the DP-SGD audit (issue 25) get a clear error naming the argument and the fix."""
from __future__ import annotations

import pytest

pytest.importorskip("opacus")

import dp_pipelines as P  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.dp.assertion import assert_dp_training_holds  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402
from pytest_privleak.dp.canaries import CanaryCollisionError, check_collisions, make_audit_canaries  # noqa: E402
from pytest_privleak.finite import NonFiniteError  # noqa: E402

CONFIG = {"epsilon": 2.0, "delta": 1e-5, "bug": "none"}


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=120, n_valid=5, n_test=5)


def _audit(data, train=P.train, epsilon=2.0, delta=1e-5, **kwargs):
    kwargs = {"build": P.build, "wrap": P.Scorer, "method": "one-run", "threat_model": "white-box",
              "config": CONFIG, "canaries": 100, **kwargs}
    return assert_dp_training_holds(train, data, epsilon, delta, **kwargs)


@pytest.mark.parametrize("epsilon", [0, -1.0, float("nan"), float("inf"), "4", True])
def test_epsilon_must_be_positive(data, epsilon):
    with pytest.raises(ValueError, match=r"epsilon must be a number in \(0, inf\).*fix: pass the ε"):
        _audit(data, epsilon=epsilon)


@pytest.mark.parametrize("delta", [0, 1, 1.5, -1e-5, float("nan")])
def test_delta_must_be_in_open_unit_interval(data, delta):
    with pytest.raises(ValueError, match=r"delta must be a number in \(0, 1\).*fix"):
        measure_dp_training(P.train, data, 2.0, delta, build=P.build, config=CONFIG)


def test_train_that_ignores_its_seed_is_refused(data):
    with pytest.raises(ValueError, match="ignores its seed.*fix: seed every random generator"):
        _audit(data, train=P.train_ignoring_seed, check_seed=True, threat_model="black-box")


def test_train_returning_nan_weights_is_refused(data):
    with pytest.raises(NonFiniteError, match="the weights train=train_nan returned.*NaN"):
        _audit(data, train=P.train_nan, check_seed=False, threat_model="black-box")


def test_canary_that_is_in_the_data_is_refused(data):
    own = [Utterance(("zzqq", "xxkk"), ("O", "O"), data.intents[0]), data.test[0]]
    with pytest.raises(CanaryCollisionError, match=r"canary 1 .* is also test\[0\] of the dataset.*fix"):
        _audit(data, canaries=own, threat_model="black-box")


def test_duplicate_canaries_are_refused(data):
    twice = [Utterance(("zzqq",), ("O",), data.intents[0])] * 2
    with pytest.raises(CanaryCollisionError, match="canaries 0 and 1 are the same text"):
        make_audit_canaries(data, twice, seed=0)


def test_new_token_canary_whose_token_is_in_the_data_is_refused(data):
    clash = [Utterance(data.train[0].tokens[:1] + data.train[1].tokens[:1], ("O", "O"), data.intents[0])]
    with pytest.raises(CanaryCollisionError, match="new-token canary 0 ends with .* which the dataset already holds"):
        check_collisions(data, clash, new_tokens=True)


@pytest.mark.parametrize("argument, value, message", [
    ("method", "many-runs", "method='many-runs' is not one of auto, one-run, distinguish"),
    ("threat_model", "grey-box", "threat_model='grey-box' is not one of"),
    ("runs", 1, "runs must be an integer >= 2"),
    ("confidence", 1.0, r"confidence must be a number in \(0, 1\)"),
    ("canaries", 1, "canaries must be an integer >= 2"),
])
def test_bad_options(data, argument, value, message):
    with pytest.raises(ValueError, match=message):
        _audit(data, **{argument: value})


def test_white_box_without_a_hook_says_how_to_add_one(data):
    with pytest.raises(ValueError, match="needs a train function that takes audit_hook"):
        _audit(data, train=P.train_ignoring_seed)


def test_black_box_without_wrap_says_what_to_pass(data):
    with pytest.raises(ValueError, match="needs wrap="):
        _audit(data, threat_model="black-box", wrap=None)
