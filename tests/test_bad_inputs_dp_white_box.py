"""Bad inputs to the framework-neutral white-box contract and the sampler audit (issue 32) get a clear error
naming the argument and the fix."""
from __future__ import annotations

import pytest
import torch

import dp_own_loops as L
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.dp.gradient_canaries import AuditHook
from pytest_privleak.dp.sampling_audit import measure_dp_sampling


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=60, n_valid=0, n_test=0)


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


@pytest.mark.parametrize("rate", [0, 1.5, True, "0.2", float("nan")])
def test_attach_refuses_a_sampling_rate_outside_0_1(rate):
    with pytest.raises(ValueError, match=r"sample_rate must be the Poisson sampling rate in \(0, 1\]"):
        AuditHook([1, 0], seed=0).attach(_model(), sample_rate=rate, max_grad_norm=1.0)


@pytest.mark.parametrize("norm", [0, -1.0, float("nan"), float("inf"), "1"])
def test_attach_refuses_a_clipping_norm_that_is_not_positive(norm):
    with pytest.raises(ValueError, match="max_grad_norm must be the clipping norm C > 0"):
        AuditHook([1, 0], seed=0).attach(_model(), sample_rate=0.5, max_grad_norm=norm)


def test_attach_refuses_what_is_not_a_parameter():
    with pytest.raises(TypeError, match=r"params\[1\] is a str, not a tensor; fix: pass the model"):
        AuditHook([1, 0], seed=0).attach([torch.zeros(2), "bias"], sample_rate=0.5, max_grad_norm=1.0)
    with pytest.raises(ValueError, match="no trainable parameters; fix: pass the model being trained"):
        AuditHook([1, 0], seed=0).attach([], sample_rate=0.5, max_grad_norm=1.0)


def test_more_canaries_than_coordinates_are_refused():
    with pytest.raises(ValueError, match="10 gradient canaries need 10 distinct coordinates, but the parameters given "
                                         "to the audit hold only 8; fix: pass fewer canaries"):
        AuditHook([1] * 10, seed=0).attach(_model(), sample_rate=0.5, max_grad_norm=1.0)


def test_per_example_gradients_must_match_the_parameters_told_to_attach():
    model = _model()
    audit = AuditHook([1, 0], seed=0).attach(model, sample_rate=0.5, max_grad_norm=1.0)
    with pytest.raises(ValueError, match=r"before_clipping: no tensor for parameter\(s\) \['bias'\].*fix"):
        audit.before_clipping({"weight": torch.zeros(4, 2, 3)})
    with pytest.raises(ValueError, match=r"parameter weight has shape \(2, 3\), got \(4, 3, 2\); fix: pass "
                                         r"per-example rows \[rows, \*shape\]"):
        audit.before_clipping({"weight": torch.zeros(4, 3, 2), "bias": torch.zeros(4, 2)})
    with pytest.raises(ValueError, match=r"different numbers of rows \[4, 5\]"):
        audit.before_clipping({"weight": torch.zeros(4, 2, 3), "bias": torch.zeros(5, 2)})
    with pytest.raises(ValueError, match="got 1 tensors for the 2 parameters told to attach"):
        audit.before_clipping([torch.zeros(4, 2, 3)])


def test_a_dict_needs_named_parameters():
    audit = AuditHook([1, 0], seed=0).attach(list(_model().parameters()), sample_rate=0.5, max_grad_norm=1.0)
    with pytest.raises(TypeError, match="got a dict, but attach was given unnamed parameters; fix"):
        audit.before_clipping({"weight": torch.zeros(4, 2, 3), "bias": torch.zeros(4, 2)})


def test_record_batch_refuses_indices_outside_the_population():
    hook = AuditHook((), seed=0)
    with pytest.raises(ValueError, match=r"index 10 is outside 0 .. 9; fix: pass positions in the training data"):
        hook.record_batch([1, 10], population=10)
    with pytest.raises(ValueError, match="population must be the number of training records, got 0"):
        hook.record_batch([1], population=0)
    hook.record_batch([1], population=10)
    with pytest.raises(ValueError, match="population 11 differs from the 10 of earlier steps"):
        hook.record_batch([1], population=11)


def test_watch_loader_needs_a_batching_loader():
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 1)), batch_size=None)
    with pytest.raises(TypeError, match="needs a DataLoader that batches through a batch sampler.*record_batch"):
        AuditHook((), seed=0).watch_loader(loader)


def test_the_sampler_audit_needs_the_accounted_rate(data):
    with pytest.raises(ValueError, match="reported its batches but not the sampling rate its accountant uses; fix: "
                                         r"audit_hook.watch_loader\(loader, sample_rate=q\)"):
        measure_dp_sampling(L.train_batches_without_rate, data, build=L.build, neighbours=False)


@pytest.mark.parametrize("argument, value, error, message", [
    ("confidence", 1.0, ValueError, r"confidence must be a number in \(0, 1\), got 1.0"),
    ("seed", -1, ValueError, "seed must be an integer >= 0"),
    ("config", {"audit_hook": 1}, ValueError, "config must not hold audit_hook"),
    ("config", [1], TypeError, "config must be a dict of keyword arguments for train"),
    ("name", " ", ValueError, "name must be a non-empty string or None"),
])
def test_sampler_audit_options(data, argument, value, error, message):
    with pytest.raises(error, match=message):
        measure_dp_sampling(L.train_batches_without_rate, data, build=L.build, **{argument: value})
