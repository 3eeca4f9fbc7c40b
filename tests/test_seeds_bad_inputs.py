"""Bad inputs to training over seeds are clear errors naming the argument and the fix (issue 26)."""
import numpy as np
import pytest

from pytest_privleak import assertions
from pytest_privleak.plugin.seeds import parse_seed_count, resolve_seeds
from pytest_privleak.targets.seeds import SeedModels, check_seed_count, train_over_seeds


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3", None])
def test_seed_count_below_one_or_not_an_integer(bad):
    with pytest.raises(ValueError, match=r"seeds=.* must be an integer >= 1"):
        check_seed_count(bad)
    with pytest.raises(ValueError, match="seeds="):
        train_over_seeds(lambda s: s, bad)


@pytest.mark.parametrize("bad", ["0", "-1", "three", ""])
def test_option_value(bad):
    with pytest.raises(ValueError, match="--privleak-seeds"):
        parse_seed_count(bad, option="--privleak-seeds")


def test_explicit_seeds_are_checked_and_default_one_keeps_a_plain_model():
    assert resolve_seeds(None, 1) is None and resolve_seeds(None, 3) == 3 and resolve_seeds(1, 3) == 1
    with pytest.raises(ValueError, match="seeds=0"):
        resolve_seeds(0, 3)


def test_seed_models_shape():
    with pytest.raises(ValueError, match="at least one model"):
        SeedModels([], [])
    with pytest.raises(ValueError, match="2 model.*1 seed"):
        SeedModels([1, 2], [0])
    with pytest.raises(ValueError, match="repeat a seed"):
        SeedModels([1, 2], [0, 0])
    with pytest.raises(ValueError, match="seed='0'"):
        train_over_seeds(lambda s: s, 2, seed="0")


class Scorer:
    def score(self, utterances):
        return np.arange(len(utterances), dtype=float)


def test_models_over_different_seeds_in_one_call():
    with pytest.raises(ValueError, match="must share their seeds"):
        assertions.measure_membership(SeedModels([Scorer(), Scorer()], [0, 1]), ["a", "b"], ["c", "d"],
                                      reference=SeedModels([Scorer(), Scorer()], [5, 6]))


@pytest.mark.parametrize("bad", [[0.5, 1.5], [True, False], "01", 3, [0, float("nan")]])
def test_seed_models_refuse_seeds_that_are_not_integers(bad):
    # old: [0.5, 1.5] became (0, 1) and "01" became (0, 1) without a word; 3 was a bare "not iterable"
    with pytest.raises(TypeError, match=r"SeedModels seeds= must be a list of integer training seeds.*fix"):
        SeedModels([object(), object()], bad)
