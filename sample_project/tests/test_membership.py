"""Can an attacker tell which utterances our intent model was trained on?

Membership inference (RMIA, Zarifzadeh et al. 2024) against our own GRU: reference models are trained by our
own training function on halves of a population, each cached like the target. Members and non-members are
disjoint and come from one distribution; 1000 non-members resolve a 1 % false-positive rate. The references
train on halves of 600 held-out utterances: 300 each, as many as our model.
"""
import pytest

from intent_model.model import IntentSlotGRU, Labels, SoftInputAdapter
from intent_model.train import train
from pytest_privleak import PrivacyLeakError, TargetRecipe, assert_membership_tpr_at_most
from pytest_privleak.data import generate_snips_like


def untrained_gru(dataset) -> IntentSlotGRU:
    return IntentSlotGRU(Labels.from_utterances(dataset.train))


@pytest.fixture(scope="module")
def corpus(privleak_seed):
    return generate_snips_like(n_train=300, n_valid=900, n_test=1200, seed=privleak_seed + 3)


@pytest.fixture(scope="module")
def our_model(train_own_model, corpus):
    return train_own_model(train, corpus, build=untrained_gru, wrap=SoftInputAdapter, epochs=12)


@pytest.fixture(scope="module")
def recipe(corpus, privleak_cache):
    """How our model was trained, so that reference models can be trained the same way."""
    return TargetRecipe(corpus, train=train, build=untrained_gru, wrap=SoftInputAdapter, config={"epochs": 12},
                        cache=privleak_cache)


def disjoint(records, others):
    seen = set(others)
    return [u for u in dict.fromkeys(records) if u not in seen]


@pytest.fixture(scope="module")
def held_out(corpus):
    """Utterances our model never trained on, in three disjoint parts: 1000 non-members, the control's 200
    "members", and the references' population."""
    records = disjoint([*corpus.test, *corpus.valid], corpus.train)
    return {"non_members": records[:1000], "never_seen": records[1000:1200], "population": records[1200:1800]}


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="trained 12 epochs on 300 utterances, our GRU gives its members away at 1 % FPR")
def test_our_model_hides_who_it_was_trained_on(our_model, corpus, recipe, held_out):
    members = list(dict.fromkeys(corpus.train))
    assert_membership_tpr_at_most(our_model, members, held_out["non_members"], fpr=0.01, max_tpr=0.03,
                                  references=recipe, population=held_out["population"], k=4, redact=True,
                                  name="our GRU, its training utterances")


def test_utterances_it_never_saw_are_not_flagged(our_model, recipe, held_out):
    """The control: the same gate, with "members" our model never trained on."""
    assert_membership_tpr_at_most(our_model, held_out["never_seen"], held_out["non_members"], fpr=0.01,
                                  max_tpr=0.03, references=recipe, population=held_out["population"], k=4,
                                  redact=True, name="our GRU, utterances it never saw")
