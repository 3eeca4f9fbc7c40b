"""Bad inputs and broken models given to the canary extraction attack (issue 12).

Each case asserts the error type and that the message names the argument (or
what the model returned) and the fix. Before issue 12 a NaN model guessed
"0 0 0 0" and passed ``max_accuracy=0.0``; the other cases raised without a fix,
with another type, or told the user to inject a canary that was injected.
"""
import pytest
import torch

from helpers_models import QuadraticModel
from pytest_privleak.attacks.candidates import OutOfVocabularyError
from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.attacks.cea.assertion import assert_cea_accuracy_at_most, measure_cea
from pytest_privleak.canaries import DIGITS, canary, custom_pattern
from pytest_privleak.finite import NonFiniteError

VOCAB = ("my", "pin", "code", "is") + DIGITS
PIN = canary("pin", secret="7 0 3 9")


def _model():
    return QuadraticModel(VOCAB, {"PinIntent": "my pin code is 7 0 3 9".split()})


class _LossTimes(QuadraticModel):
    """A model whose loss is multiplied by ``factor`` (NaN or inf: a diverged model)."""

    def __init__(self, factor):
        super().__init__(VOCAB, {"PinIntent": "my pin code is 7 0 3 9".split()})
        self.factor = factor

    def loss_from_embeddings(self, embeddings, intents, tags):
        return super().loss_from_embeddings(embeddings, intents, tags) * self.factor


class _MeanLoss(QuadraticModel):
    """Returns the batch mean (one number) where the protocol wants one loss per row."""

    def loss_from_embeddings(self, embeddings, intents, tags):
        return super().loss_from_embeddings(embeddings, intents, tags).mean()


class _FlatEmbeddings(QuadraticModel):
    def input_embeddings(self):
        return self._w.reshape(-1)


def _nan_weights():
    model = _model()
    model._w = model._w.clone()
    model._w[VOCAB.index("3")] = float("nan")
    return model


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(method="brute"), r"method must be one of .*'brute'.*fix: 'auto'"),
    (dict(trials=0), r"trials must be an integer >= 1, got 0; fix: .*trials=10"),
    (dict(method="gradient", starts=0), r"starts must be an integer >= 1, got 0; fix: e\.g\. starts="),
    (dict(budget=0), r"budget must be an integer >= 1 or None, got 0; fix: the largest secret space"),
    (dict(ranked=0), r"ranked must be an integer >= 1, got 0; fix: the number of most probable secrets"),
    (dict(method="gradient", select="best"), r"select must be one of .*'best'.*fix: 'best_loss'"),
    (dict(method="gradient", lr=float("nan")), r"lr must be a finite number > 0, got nan; fix: e\.g\. lr=0\.0065"),
])
def test_bad_attack_arguments_name_the_argument_and_the_fix(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        extract(_model(), PIN, **kwargs)


def test_out_of_vocabulary_canary_token_names_it_and_extra_tokens_not_injection():
    pw = canary(custom_pattern("pw", ("my", "password", "is"), DIGITS, 4, "PinIntent"), seed=0)
    with pytest.raises(OutOfVocabularyError, match=r"1 token\(s\) of the prefix .*: 'password'\..*"
                                                   r"Fix: train the target with .*extra_tokens=\['password'\]"):
        assert_cea_accuracy_at_most(_model(), pw, 0.0)


@pytest.mark.parametrize("method", ["auto", "gradient", "exhaustive", "trivial"])
def test_nan_weights_are_refused_by_every_path(method):
    with pytest.raises(NonFiniteError, match=r"input embeddings of target 0 .*: 8 of 112 value\(s\) are NaN or infinite.*"
                                              r"Fix: .*retrain the model"):
        assert_cea_accuracy_at_most(_nan_weights(), PIN, 0.0, method=method, trials=1, starts=1, epochs=5)


@pytest.mark.parametrize("factor, method, what", [
    (float("nan"), "gradient", r"loss of target 0 .* at the soft inputs of the gradient attack"),
    (float("inf"), "gradient", r"loss of target 0 .* at the soft inputs of the gradient attack"),
    (float("nan"), "auto", r"loss of target 0 .* on the 10000 secrets of the exhaustive attack"),
    (float("inf"), "trivial", r"loss of target 0 .* at the inputs of the trivial attack"),
])
def test_nan_or_inf_loss_is_refused_and_never_passes_the_gate(factor, method, what):
    with pytest.raises(NonFiniteError, match=what + r".*Fix: .*retrain the model"):
        assert_cea_accuracy_at_most(_LossTimes(factor), PIN, 0.0, method=method, trials=1, starts=1, epochs=5,
                                    max_hdt_floor=0.9)


def test_nan_loss_is_refused_by_measure_cea_too():
    with pytest.raises(NonFiniteError, match=r"exhaustive attack.*Fix: "):
        measure_cea(_LossTimes(float("nan")), PIN)


def test_embeddings_of_the_wrong_shape_name_the_protocol_and_the_fix():
    with pytest.raises(TypeError, match=r"input_embeddings\(\) of target 0 .* returned \(112,\); .*"
                                        r"fix: return the embedding matrix"):
        extract(_FlatEmbeddings(VOCAB, {"PinIntent": "my pin code is 7 0 3 9".split()}), PIN)


def test_a_batch_mean_loss_names_the_protocol_and_the_fix():
    with pytest.raises(TypeError, match=r"loss_from_embeddings returned \(\) for .* input rows.*"
                                        r"fix: return the per-row loss"):
        extract(_MeanLoss(VOCAB, {"PinIntent": "my pin code is 7 0 3 9".split()}), PIN)


def test_a_list_of_models_not_aligned_with_the_canaries():
    with pytest.raises(ValueError, match=r"targets: got a list of 2 model\(s\) for 3 canary\(ies\); fix: .*"
                                         r"one model per canary"):
        assert_cea_accuracy_at_most([_model(), _model()], [PIN, PIN, PIN], 0.0)


def test_a_name_that_is_not_a_string():
    with pytest.raises(TypeError, match=r"name must be a string or None, got int 3; fix: a stable label"):
        measure_cea(_model(), PIN, name=3)
    with pytest.raises(ValueError, match=r"name must be a non-empty string or None, got ' '; fix: "):
        assert_cea_accuracy_at_most(_model(), PIN, 0.0, name=" ")


def test_a_tolerance_that_is_not_a_number():
    with pytest.raises(ValueError, match=r"tolerance must be a number >= 0 or None, got 'loose'; fix: "):
        assert_cea_accuracy_at_most(_model(), PIN, 0.0, tolerance="loose")


def test_a_built_in_target_with_nan_lstm_weights_is_refused():
    """The brief's case: a joint BiLSTM-CRF whose weights went NaN (embeddings fine, loss NaN)."""
    from pytest_privleak.canaries import inject_canaries
    from pytest_privleak.data import generate_snips_like
    from pytest_privleak.targets import train_target

    torch.set_num_threads(1)
    data = inject_canaries(generate_snips_like(60, 10, 10, seed=0), PIN, repeats=1)
    model = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, epochs=1, progress=False)
    with torch.no_grad():
        model.net.lstm.weight_hh_l0.fill_(float("nan"))
    for method in ("auto", "gradient"):
        with pytest.raises(NonFiniteError, match=r"loss of target 0 \(JointNLUTarget.*Fix: "):
            assert_cea_accuracy_at_most(model, PIN, 0.0, method=method, trials=1, starts=1, epochs=3,
                                        max_hdt_floor=0.9)


def test_the_papers_single_start_under_auto_is_refused_not_silently_exhaustive():
    """Before: extract(..., select="single") ran the exhaustive attack once and reported it as the paper's."""
    with pytest.raises(ValueError, match=r"select='single'.*fix: pass method='gradient', select='single'"):
        extract(_model(), PIN, trials=10, select="single")
    report = extract(_model(), PIN, method="gradient", select="single", trials=2, epochs=20)
    assert report.select == "single" and report.n_trials == 2
