"""Bad inputs to membership inference: each a clear error naming the argument and the fix (no silent AUC 0.5)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_privleak.attacks.membership.attack import membership_inference
from pytest_privleak.attacks.membership.references import ReferenceSet, TargetRecipe, train_references
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance
from pytest_privleak.finite import NonFiniteError


def utt(i: int) -> Utterance:
    return Utterance((f"w{i}",), ("O",), "x")


class Returns:
    """A scorer returning a fixed kind of value for every utterance."""

    def __init__(self, value):
        self.value = value

    def score(self, utterances):
        return np.array([self.value] * len(utterances))


class OtherScorer(Returns):
    pass


MEMBERS, NON_MEMBERS = [utt(i) for i in range(5)], [utt(i) for i in range(5, 12)]


def test_complex_scores_are_refused_not_read_as_chance():
    with pytest.raises(TypeError, match=r"Returns.score returned complex128 values .* real numbers"):
        membership_inference(Returns(1 + 2j), MEMBERS, NON_MEMBERS)


def test_string_scores_are_refused():
    with pytest.raises(TypeError, match=r"returned <U3 values .*fix: score\(\) must return real numbers"):
        membership_inference(Returns("low"), MEMBERS, NON_MEMBERS)


def test_nan_scores_of_a_reference_are_refused_by_model():
    refs = ReferenceSet((Returns(float("nan")),), tuple(NON_MEMBERS), np.zeros((1, 7), dtype=bool),
                        tuple(NON_MEMBERS), False, 0)
    with pytest.raises(NonFiniteError, match="the reference 1 model's losses"):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS[:3], references=refs, method="lira")


def test_references_of_another_architecture_are_refused():
    refs = ReferenceSet((OtherScorer(1.0),), tuple(NON_MEMBERS), np.zeros((1, 7), dtype=bool), tuple(NON_MEMBERS),
                        False, 0)
    with pytest.raises(TypeError, match=r"reference 1 is a OtherScorer, the target a Returns.*TargetRecipe"):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS[:3], references=refs, method="rmia")


def test_population_overlapping_the_candidates_is_refused():
    data = generate_snips_like(n_train=10, n_valid=10, n_test=10, seed=0)
    recipe = TargetRecipe(data, kind="lstm-lm")
    with pytest.raises(ValueError, match=r"population shares 1 record\(s\) with the members .*fix: drop the"):
        train_references(recipe, list(data.train), [data.train[0], *data.valid])


def test_more_references_than_the_population_allows():
    data = generate_snips_like(n_train=10, n_valid=10, n_test=10, seed=0)
    recipe = TargetRecipe(data, kind="lstm-lm")
    with pytest.raises(ValueError, match=r"k=4 references need 4 different halves .* 3 records have only 3; fix"):
        train_references(recipe, list(data.train), [utt(100), utt(101), utt(102)], k=4)
    with pytest.raises(ValueError, match=r"k \(the number of reference models\) must be an integer >= 1"):
        train_references(recipe, list(data.train), [utt(100), utt(101)], k=0)


def test_references_trained_on_far_fewer_records_than_the_target_are_refused():
    # the sample project's no-member control took its members from the valid split, which left the default
    # population a handful of records: references trained on 0-5 utterances, against the target's 300
    data = generate_snips_like(n_train=40, n_valid=10, n_test=10, seed=0)
    recipe = TargetRecipe(data, kind="lstm-lm")
    population = [utt(100 + i) for i in range(30)]
    with pytest.raises(ValueError, match=r"each reference would train on 15 record\(s\) \(half of population\), the "
                                         r"target on 40.*fix: pass population= with at least 40 held-out records"):
        train_references(recipe, list(data.test), population, k=2)
    with pytest.raises(ValueError, match=r"half of the candidates and population"):
        train_references(recipe, list(data.test)[:5], population[:20], k=2, online=True)


def test_lira_and_rmia_need_references():
    with pytest.raises(ValueError, match=r"method='rmia' needs references="):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS, method="rmia")
    with pytest.raises(ValueError, match=r"method must be one of auto, loss, reference, lira, rmia"):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS, method="shokri")


def test_records_that_are_not_text_name_their_entry():
    with pytest.raises(TypeError, match=r"non_members\[1\] is int, expected an Utterance, a string, a \(text, label\)"):
        membership_inference(Returns(1.0), MEMBERS, [utt(20), 7])
    with pytest.raises(ValueError, match=r"members\[0\] is an empty text"):
        membership_inference(Returns(1.0), ["  "], NON_MEMBERS)


def test_recipe_needs_a_kind_or_a_training_function():
    data = generate_snips_like(n_train=10, n_valid=10, n_test=10, seed=0)
    with pytest.raises(ValueError, match="exactly one of kind="):
        TargetRecipe(data)


@pytest.mark.parametrize("budget", [0, -5, float("nan"), float("inf"), True, "60"])
def test_time_budget_must_be_positive_seconds(budget):
    data = generate_snips_like(n_train=10, n_valid=10, n_test=10, seed=0)
    recipe = TargetRecipe(data, kind="lstm-lm")
    pattern = (r"time_budget_s \(seconds the reference models may take to train\) must be a positive number or None"
               r".*fix: e\.g\. time_budget_s=600")
    with pytest.raises(ValueError, match=pattern):
        train_references(recipe, list(data.test), [utt(100 + i) for i in range(30)], k=2, time_budget_s=budget)
    with pytest.raises(ValueError, match=pattern):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS, references=recipe, time_budget_s=budget)


def test_time_budget_without_references_to_train_is_refused():
    from pytest_privleak.attacks.membership.assertion import measure_membership

    pattern = r"time_budget_s=60 budgets the training of reference models, but with no references .*fix: pass"
    with pytest.raises(ValueError, match=pattern):
        measure_membership(Returns(1.0), MEMBERS, NON_MEMBERS, time_budget_s=60)
    refs = ReferenceSet((Returns(1.0),), tuple(NON_MEMBERS), np.zeros((1, 7), dtype=bool), tuple(NON_MEMBERS),
                        False, 0)
    with pytest.raises(ValueError, match=r"with references=ReferenceSet nothing is trained"):
        membership_inference(Returns(1.0), MEMBERS, NON_MEMBERS[:3], references=refs, time_budget_s=60)


def test_online_references_train_on_as_many_records_as_the_target():
    # references on 3x the target's records fitted even unseen records and made RMIA the loss attack
    from pytest_privleak.attacks.membership import references as refs

    data = generate_snips_like(n_train=40, n_valid=10, n_test=10, seed=0)
    n = len(dict.fromkeys(data.train))
    recipe = TargetRecipe(data, kind="lstm-lm")
    candidates = [utt(i) for i in range(2 * n + 1)]
    with pytest.raises(ValueError, match=rf"online references train on halves of twice the target's training set "
                                         rf"\({2 * n} records\), but {2 * n + 1} members \+ non-members.*online=False"):
        train_references(recipe, candidates, [utt(5000 + i) for i in range(50)], k=2, online=True)
    pool = refs._online_pool(tuple(candidates[:10]), tuple(utt(5000 + i) for i in range(200)), n)
    assert len(pool) == 2 * n and pool[:10] == tuple(candidates[:10])   # topped up from the population


class Predicts(Returns):
    """A scorer with per-piece predictions (``rows``) and, optionally, a base of the same kind."""

    def __init__(self, rows, base=None):
        super().__init__(1.0)
        self.rows, self.base = rows, base

    def token_predictions(self, utterances):
        return [self.rows for _ in utterances]

    def base_reference(self):
        return self.base


def test_the_base_method_without_a_base_names_the_fix():
    with pytest.raises(ValueError, match=r"method='base' needs the pretrained model .*base=base_model"):
        membership_inference(Predicts((np.array([-1.0]), np.array([True]))), MEMBERS, NON_MEMBERS, method="base")


def test_a_base_that_reads_another_tokenizer_is_refused():
    target = (np.array([-1.0, -2.0]), np.array([True, False]))
    base = Predicts((np.array([-1.0, -2.0, -0.5]), np.array([True, True, True])))
    with pytest.raises(ValueError, match=r"the base scores 3 pieces, the target 2.*base must read the target's "
                                         r"tokenizer"):
        membership_inference(Predicts(target, base=base), MEMBERS, NON_MEMBERS, method="base")


def test_non_finite_piece_log_probabilities_of_the_base_are_refused():
    target = (np.array([-1.0, -2.0]), np.array([True, False]))
    base = Predicts((np.array([-1.0, np.nan]), np.array([True, True])))
    with pytest.raises(NonFiniteError, match=r"the base's piece log-probabilities of utterance 0"):
        membership_inference(Predicts(target, base=base), MEMBERS, NON_MEMBERS, method="base")


def test_a_base_of_another_vocabulary_is_refused_by_the_adapter():
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel

    from helpers_transformers import word_tokenizer
    from pytest_privleak.adapters import from_transformers

    tokenizer = word_tokenizer(["a", "b", "c"])
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=8, n_embd=8, n_layer=1, n_head=1))
    other = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer) + 3, n_positions=8, n_embd=8, n_layer=1, n_head=1))
    with pytest.raises(ValueError, match=r"base has 14 vocabulary rows, the model 11.*resize_token_embeddings"):
        from_transformers(model, tokenizer, base=other)
