"""Bad inputs of the LDP auditor: each gives a clear error naming the argument or entry and the fix (issue 12)."""
import math
import warnings

import numpy as np
import pytest
from helpers_ldp import WordRR

from pytest_privleak.finite import NonFiniteError
from pytest_privleak.ldp import KRR, OME, BoxDomain, FiniteDomain, assert_ldp_holds
from pytest_privleak.ldp.assertion import measure_ldp

FAST = dict(samples=10_000, train_samples=1_000, val_samples=2_000, progress=None)
COLOURS = ["red", "green", "cyan"]


class Outputs:
    """A mechanism returning fixed outputs, to feed the auditor what a broken mechanism would."""

    epsilon = 1.0
    domain = BoxDomain(0, 1)

    def __init__(self, value):
        self.value = value

    def __call__(self, inputs, rng):
        x = np.asarray(inputs, dtype=float).reshape(len(inputs), -1)
        return x + rng.random(x.shape) + self.value


class BadProbabilities(KRR):
    def bit_probabilities(self, inputs):
        return np.full((len(np.asarray(inputs)), self.k), np.nan)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.nan, math.inf, "2", True])
def test_bad_epsilon(epsilon):
    with pytest.raises(ValueError, match=r"epsilon must be a positive finite number .*got epsilon=.*fix: pass the ε"):
        assert_ldp_holds(KRR(3, 1.0), epsilon, **FAST)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.2, True, "0.95"])
def test_bad_confidence(confidence):
    with pytest.raises(ValueError, match=r"confidence must lie strictly between 0 and 1, got .*; fix: e.g. confidence=0.95"):
        assert_ldp_holds(KRR(3, 1.0), 1.0, confidence=confidence, **FAST)


@pytest.mark.parametrize("budget", [0, -3.0, math.inf, math.nan, "60", True])
def test_bad_time_budget(budget):
    with pytest.raises(ValueError, match=r"time_budget must be a positive number of seconds or None .*fix: e.g. time_budget=60"):
        assert_ldp_holds(KRR(3, 1.0), 1.0, time_budget=budget, **FAST)


def test_bad_time_budget_in_measure_ldp():
    with pytest.raises(ValueError, match=r"time_budget must be .*fix"):
        measure_ldp(KRR(3, 1.0), time_budget=-1, **FAST)


@pytest.mark.parametrize("progress", [-1, math.nan, "5"])
def test_bad_progress(progress):
    with pytest.raises(ValueError, match=r"progress must be the seconds between progress lines .*fix: e.g. progress=5"):
        assert_ldp_holds(KRR(3, 1.0), 1.0, **{**FAST, "progress": progress})


def test_pair_entry_not_in_the_domain():
    with pytest.raises(ValueError, match=r"pairs\[1\] input a='purple' is not in the mechanism's domain "
                                         r"\(FiniteDomain of 3 inputs: 'red', 'green', 'cyan'\); fix: pass inputs"):
        assert_ldp_holds(WordRR(COLOURS), 1.0, pairs=[("red", "cyan"), ("purple", "red")], **FAST)


def test_pair_that_is_not_a_pair():
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a pair \(a, a'\) of two inputs, got \(0.5,\); fix"):
        assert_ldp_holds(Outputs(0.0), 1.0, pairs=[(0.5,)], **FAST)


def test_pair_of_the_same_input_twice():
    with pytest.raises(ValueError, match=r"pairs\[0\] = \('red', 'red'\) holds the same input twice.*fix: pass two"):
        assert_ldp_holds(WordRR(COLOURS), 1.0, pairs=[("red", "red")], **FAST)


def test_pair_of_text_on_a_real_domain():
    with pytest.raises(ValueError, match=r"pairs\[0\] input a='low' is not a number, but the mechanism's domain is "
                                         r"BoxDomain.*fix: pass real inputs of shape \(1,\)"):
        assert_ldp_holds(Outputs(0.0), 1.0, pairs=[("low", 1.0)], **FAST)


def test_pair_outside_a_box_domain():
    with pytest.raises(ValueError, match=r"pairs\[0\] input a'=\[11.0\] is outside .*fix: .*within \[-10, 10\]"):
        assert_ldp_holds(OME(10, 1.0), 1.0, pairs=[(0.0, 11.0)], **FAST)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_mechanism_outputs(value):
    with pytest.raises(NonFiniteError, match=r"outputs of mechanism Outputs\(epsilon=1, value=.*\): .* NaN or infinite.*"
                                             r"Fix: the mechanism must return finite numbers"):
        assert_ldp_holds(Outputs(value), 1.0, **FAST)


@pytest.mark.parametrize("value", [1e300, 1e200, 1e39])
def test_outputs_that_overflow_the_classifier(value):
    # refused with the fix where the overflow arises, without numpy's overflow RuntimeWarnings (issue 24 item 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(NonFiniteError, match=r"mechanism Outputs.*NaN or infinite.*Fix: the mechanism's outputs "
                                                 r"overflow the classifier"):
            assert_ldp_holds(Outputs(value), 1.0, **FAST)


def test_non_finite_bit_probabilities():
    with pytest.raises(NonFiniteError, match=r"bit_probabilities of mechanism BadProbabilities: .*NaN or infinite.*"
                                             r"Fix: return Pr\[bit = 1 \| input\]"):
        assert_ldp_holds(BadProbabilities(3, 1.0), 1.0, **FAST)


@pytest.mark.parametrize("name", ["", "   ", 3])
def test_bad_name(name):
    with pytest.raises(ValueError, match=r"name must be a non-empty string or None, got .*; fix: a stable label"):
        assert_ldp_holds(KRR(3, 1.0), 1.0, name=name, **FAST)


def test_bad_classifier():
    with pytest.raises(ValueError, match=r"classifier must be 'logistic' or 'mlp', got 'svm'; fix: classifier="):
        assert_ldp_holds(KRR(3, 1.0), 1.0, classifier="svm", **FAST)


@pytest.mark.parametrize("kwargs,match", [
    (dict(replicates=0), r"replicates must be an integer >= 1, got 0; fix: replicates=2"),
    (dict(full_search=-1), r"full_search must be an integer >= 0 .*got -1; fix: e.g. full_search=1000"),
    (dict(samples=10), r"samples must be an integer >= 1000 .*got 10; fix: e.g. samples=1_000_000"),
    (dict(delta=1.0), r"delta must lie in \[0, 1\), got 1.0; fix: delta=0"),
    (dict(c=2.0), r"c must lie in \(0, 1\) or be None \(adaptive\), got 2.0; fix: c=None"),
    (dict(tolerance=-0.1), r"tolerance must be a finite number >= 0 \(in ε\) or None, got -0.1; fix"),
])
def test_bad_option(kwargs, match):
    with pytest.raises(ValueError, match=match):
        assert_ldp_holds(KRR(3, 1.0), 1.0, **{**FAST, **kwargs})


def test_not_a_mechanism():
    with pytest.raises(ValueError, match=r"mechanism 'function' is not a mechanism: it needs `domain` .*fix: see"):
        assert_ldp_holds(lambda inputs, rng: inputs, 1.0, **FAST)


def test_unknown_domain_type():
    class Odd(KRR):
        domain = ["a", "b"]

    mech = Odd(3, 1.0)
    mech.domain = ["a", "b"]
    with pytest.raises(ValueError, match=r"mechanism.domain must be a BoxDomain or FiniteDomain .*fix: e.g. domain = "
                                         r"FiniteDomain"):
        assert_ldp_holds(mech, 1.0, **FAST)


def test_finite_domain_of_one_value():
    with pytest.raises(ValueError, match="FiniteDomain needs at least two values"):
        FiniteDomain(np.array(["only"]))


@pytest.mark.parametrize("allow", [1, "yes", None])
def test_bad_allow_inconclusive(allow):
    with pytest.raises(ValueError, match=r"allow_inconclusive must be True or False, got .*; fix: leave it out"):
        assert_ldp_holds(KRR(3, 1.0), 1.0, allow_inconclusive=allow, **FAST)
