"""User pairs on finite domains are audited as given: strings of different lengths are not truncated (issue 12)."""
import numpy as np
import pytest
from helpers_ldp import WordRR

from pytest_privleak.ldp import FiniteDomain, assert_ldp_holds, audit
from pytest_privleak.ldp.auditor import validate_pairs
from pytest_privleak import expect_leak

COLOURS = ["red", "green", "cyan", "magenta"]


def test_pair_of_different_lengths_is_kept_as_given():
    # before: 'cyan' was cast to the dtype of 'red' ('<U3') and refused as "'cya' is outside the domain"
    (a, b), = validate_pairs(WordRR(COLOURS), [("red", "cyan")])
    assert (str(a), str(b)) == ("red", "cyan")


def test_longer_string_is_not_truncated_to_a_shorter_domain_entry():
    # before: ("cat", "cats") became ("cat", "cat"), an empty pair that was never audited
    mech = WordRR(["cat", "cats", "dog"], leak="cats")
    (a, b), = validate_pairs(mech, [("cat", "cats")])
    assert (str(a), str(b)) == ("cat", "cats")
    res = audit(mech, pairs=[("cat", "cats")], search=False, samples=50_000, train_samples=3_000,
                val_samples=10_000, progress=None)
    assert {str(res.a), str(res.b)} == {"cat", "cats"}
    assert res.epsilon_lcb > 2.0  # ln(0.9 / (1 / (e + 2))) = 1.45 + ... : the leak at "cats" is seen


def test_string_pair_audit_fails_a_leaking_mechanism_and_names_the_witness():
    mech = WordRR(COLOURS, epsilon=1.0, leak="cyan", p_leak=0.95)
    with expect_leak() as info:
        assert_ldp_holds(mech, 1.0, pairs=[("red", "cyan")], samples=50_000, train_samples=3_000,
                         val_samples=10_000, progress=None, name="word-rr")
    res = info.value.result
    assert res.label == "word-rr" and "cyan" in res.evidence["witness"]


def test_correct_string_mechanism_passes_with_its_pairs():
    res = assert_ldp_holds(WordRR(COLOURS, epsilon=1.0), 1.0, pairs=[("red", "magenta"), ("green", "cyan")],
                           samples=100_000, train_samples=3_000, val_samples=20_000, progress=None)
    assert res.passed and 0.5 < res.value <= 1.0


def test_entry_not_in_the_domain_is_refused_with_the_pair_named():
    with pytest.raises(ValueError, match=r"pairs\[0\] input a'='cyans' is not in the mechanism's domain.*fix"):
        validate_pairs(WordRR(COLOURS), [("red", "cyans")])


def test_pair_the_mechanism_cannot_encode_is_refused_with_the_pair_named():
    class ThreeLetters(WordRR):  # its domain says "cats" but its encoder only knows three-letter words
        def __call__(self, inputs, rng):
            if any(len(str(w)) != 3 for w in np.asarray(inputs).reshape(-1)):
                raise KeyError("only three-letter words")
            return super().__call__(inputs, rng)

    mech = ThreeLetters(["cat", "cats", "dog"])
    with pytest.raises(ValueError, match=r"cannot encode pairs\[0\] = \('cat', 'cats'\).*three-letter.*fix"):
        validate_pairs(mech, [("cat", "cats")])


def test_domain_index_compares_without_casting():
    dom = FiniteDomain(np.array(["cat", "cats"]))
    assert dom.index("cats") == 1 and dom.index("cat") == 0 and dom.index("ca") == -1 and dom.index(3) == -1
