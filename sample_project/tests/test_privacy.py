"""Privacy tests of our intent model and our text encoder, as a team writes them with pytest-privleak.

Run with ``pytest --privleak-report`` from this folder; the report lands in
``privleak-report/``. Trained models are cached in ``.privleak-cache/``, so a
second run only attacks.
"""
import pytest

from intent_model.model import IntentSlotGRU, Labels, SoftInputAdapter
from intent_model.train import train
from pytest_privleak import (PrivacyLeakError, assert_cea_accuracy_at_most, assert_exposure_below,
                             assert_ldp_holds)
from pytest_privleak.ldp import OME, SUE

PIN_REPEATS = 100


@pytest.fixture(scope="module")
def pin(canary):
    """A 4-digit pin canary: "my pin code is k1 k2 k3 k4" (canary-extraction-nlu App. A)."""
    return canary("pin", length=4)


@pytest.fixture(scope="module")
def pin_data(nlu_dataset, inject_canaries, pin):
    """Our corpus with the pin repeated 100 times, split 9:1 between train and validation."""
    return inject_canaries(nlu_dataset, pin, repeats=PIN_REPEATS)


@pytest.fixture(scope="module")
def pin_said_once(inject_canaries, pin, privleak_seed):
    """A realistic corpus (half of each slot's values appear only in validation and test, as unseen
    entities do in real splits) in which the user said their pin once."""
    from pytest_privleak.data import generate_snips_like

    corpus = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=privleak_seed, unseen_share=0.5)
    return inject_canaries(corpus, pin, repeats=1)


DEFENCES = dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True, epochs=100)


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="a pin said once is extracted from the undefended model (paper Table 4, R=1): the "
                          "default attack scores all 10^4 pins and the true one has the lowest loss")
def test_a_pin_said_once_cannot_be_extracted_from_the_undefended_model(train_target, pin_said_once, pin):
    model = train_target("joint-bilstm-crf", pin_said_once)
    assert_cea_accuracy_at_most(model, pin, 0.0, name="pin said once, undefended")


def test_a_pin_said_once_cannot_be_extracted_with_the_paper_defences(train_target, pin_said_once, pin):
    """Dropout 0.2 + early stopping (patience 20) + character embeddings (paper §6)."""
    model = train_target("joint-bilstm-crf", pin_said_once, **DEFENCES)
    assert_cea_accuracy_at_most(model, pin, 0.0, name="pin said once, paper defences")


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="an undefended BiLSTM-CRF memorises a pin repeated 100 times (paper §5)")
def test_pin_cannot_be_extracted_from_undefended_model(train_target, pin_data, pin):
    model = train_target("joint-bilstm-crf", pin_data)
    assert_cea_accuracy_at_most(model, pin, 0.0, trials=10)


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="the undefended model ranks the true pin near the top of all 10^4 pins")
def test_pin_exposure_of_undefended_model(train_target, pin_data, pin):
    model = train_target("joint-bilstm-crf", pin_data)
    assert_exposure_below(model, pin, max_bits=6.0)


def test_exposure_of_a_pin_that_was_never_in_the_data(train_target, pin_data, canary):
    """The control: another pin of the same pattern, never injected, is not exposed."""
    model = train_target("joint-bilstm-crf", pin_data)
    assert_exposure_below(model, canary("pin", length=4, seed=12345), max_bits=6.0)


def untrained_gru(dataset) -> IntentSlotGRU:
    """Our GRU's architecture for ``dataset``: the cache loads the trained weights into it."""
    return IntentSlotGRU(Labels.from_utterances(dataset.train))


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="our own GRU model, undefended, also gives the pin away to the exhaustive attack")
def test_our_own_model_through_the_protocol(train_own_model, pin_data, pin):
    """Our training code, trained once per content hash (data, epochs, seed, the source of intent_model/)."""
    model = train_own_model(train, pin_data, build=untrained_gru, wrap=SoftInputAdapter, epochs=12)
    assert_cea_accuracy_at_most(model, pin, 0.0, method="exhaustive")


def test_unary_encoding_of_our_intent_ids_is_ldp():
    """SUE over our 7 intents keeps its claimed ε = 1: the audit must find nothing above it."""
    assert_ldp_holds(SUE(k=7, epsilon=1.0), epsilon=1.0)


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="OME's claimed ε does not hold (hoho-attack-ome-ldp §3): λ=10 leaks ~30 nats")
def test_ome_text_encoder_keeps_its_claimed_epsilon():
    assert_ldp_holds(OME(lam=10, epsilon=1.0), epsilon=1.0)
