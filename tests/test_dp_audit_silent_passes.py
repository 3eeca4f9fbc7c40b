"""The DP audit refuses trainings it cannot audit instead of passing them (review session 6, H1-H3).

- H1: a ``train`` taking ``audit_hook`` whose gradient canaries never reach
  an optimizer step (hook never called; a step that bypasses the wrapped
  ``clip_and_accumulate``; Opacus ghost clipping) would be scored on its
  initial weights and pass any claim; the audit counts the insertions, stores
  the count with the cached training, and refuses.
- H2: a ``train`` that ignores the dataset it is given never sees the
  black-box canaries; refused.
- H3: ``sources=`` puts the DP code that lives outside ``train``'s package
  into the cache key, so editing it retrains.

Each pipeline here passed the audit before these fixes (tests/dp_pipelines.py).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("opacus")

import dp_pipelines as P  # noqa: E402
from pytest_privleak.dp.audit import check_sources, measure_dp_training  # noqa: E402
from pytest_privleak.dp.assertion import assert_dp_training_holds  # noqa: E402
from pytest_privleak.cache.targets import TargetCache  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.dp.canaries import draw_inclusion, watch_train_reads  # noqa: E402
from pytest_privleak.dp.gradient_canaries import InsertionTally, check_insertions  # noqa: E402

EPS, DELTA = 1.0, 1e-5
NOISE_OFF = {"epsilon": EPS, "delta": DELTA, "bug": "noise-off"}
CORRECT = {"epsilon": 2.0, "delta": DELTA, "bug": "none"}


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=300, n_valid=0, n_test=0)


def _audit(train, data, epsilon=EPS, **kwargs):
    kwargs = {"build": P.build, "method": "one-run", "threat_model": "white-box", "check_seed": False,
              "canaries": 300, "config": NOISE_OFF, **kwargs}
    return assert_dp_training_holds(train, data, epsilon, DELTA, **kwargs)


def _entries(folder):
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


# --- H1: gradient canaries that never reach a step --------------------------------------------------------------

def test_hook_never_called_is_refused_not_passed(data):
    with pytest.raises(ValueError, match=r"train='train_forgetting_hook' takes audit_hook but never called it.*"
                                         r"fix: call audit_hook\(optimizer, sample_rate=q\) once"):
        _audit(P.train_forgetting_hook, data)


def test_hook_never_called_is_refused_under_auto_with_a_wrap(data):
    # before: the white-box arm read 0, the black-box arm alone decided, and noise-off passed a claim of 4
    with pytest.raises(ValueError, match="takes audit_hook but never called it"):
        _audit(P.train_forgetting_hook, data, 4.0, method="auto", threat_model="auto", wrap=P.Scorer, canaries=None,
               config={**NOISE_OFF, "epsilon": 4.0}, time_budget_s=1.0)


def test_a_step_that_bypasses_the_wrapped_clipping_is_refused(data):
    with pytest.raises(ValueError, match=r"did not reach the update at step 1: before_noise came without "
                                         r"before_clipping.*bypasses the hook"):
        _audit(P.train_bypassing_hook, data)


def test_opacus_ghost_clipping_is_refused(data):
    with pytest.raises(TypeError, match="DPOptimizerFastGradientClipping.*ghost clipping.*fix: audit a run of the "
                                        "same pipeline with grad_sample_mode='hooks'"):
        _audit(P.train_ghost_clipping, data, config={})


def test_the_refusal_holds_for_a_training_loaded_from_the_cache(data, tmp_path):
    cache = TargetCache(tmp_path / "targets")
    for _ in range(2):
        with pytest.raises(ValueError, match="never called it"):
            _audit(P.train_forgetting_hook, data, cache=cache)
    assert len(_entries(tmp_path / "targets")) == 1  # the second run loaded the entry, and refused it too


def test_the_insertion_count_is_stored_with_the_cached_training(data, tmp_path):
    cache = TargetCache(tmp_path / "targets")
    kwargs = dict(build=P.build, method="one-run", threat_model="white-box", check_seed=False, canaries=300,
                  config=CORRECT, cache=cache)
    first = measure_dp_training(P.train, data, 2.0, DELTA, **kwargs)
    (entry,) = _entries(tmp_path / "targets")
    tally = json.loads((tmp_path / "targets" / entry / "target.json").read_text())["facts"]["tally"]
    steps = round(4 / (64 / 300))
    assert tally["calls"] == 1 and tally["steps"] == tally["insertion_steps"] == steps
    coins = draw_inclusion(300, 0)
    assert len(tally["inserted"]) == 300 == len(tally["scores"]) and 100 < coins.sum() < 200
    inserted = np.asarray(tally["inserted"])
    assert not inserted[~coins].any()   # a canary whose coin says out never goes in
    # each included canary is sampled at 64/300 in each of the 19 steps: about 4 insertions each
    assert 3.0 < inserted[coins].mean() < 5.2
    second = measure_dp_training(P.train, data, 2.0, DELTA, **kwargs)
    assert second.value == first.value and _entries(tmp_path / "targets") == [entry]
    assert "canaries inserted in 19 of 19 steps" in second.evidence["gradient canaries"]


def _tally(**kwargs) -> InsertionTally:
    return InsertionTally(**{"calls": 1, "steps": 10, "insertion_steps": 10, "sample_rate": 0.2, "count": 1,
                             "inserted": [2], **kwargs})


@pytest.mark.parametrize("tally, message", [
    (_tally(calls=0, steps=0, insertion_steps=0, inserted=[]), "never called it"),
    (_tally(calls=2), "called audit_hook 2 times"),
    (_tally(insertion_steps=4), "reached only 4 of the 10 steps"),
    (_tally(steps=0, insertion_steps=0), "reached only 0 of the 0 steps"),
    (_tally(failure="step 3: 2 of the 2 canaries"), "did not reach the update at step 3: 2 of the 2"),
])
def test_check_insertions_refuses_each_shortfall(tally, message):
    with pytest.raises(ValueError, match=message):
        check_insertions(tally, train="'t'", included=1)
    check_insertions(_tally(), train="'t'", included=1)


# --- H2: a train that ignores the dataset it is given -----------------------------------------------------------

def test_train_ignoring_its_dataset_is_refused(data):
    with pytest.raises(ValueError, match=r"train='train_own_data' ignores the dataset it is given.*identical with "
                                         r"and without the \d+ audit canaries.*fix: train on dataset.train"):
        _audit(P.train_own_data, data, threat_model="black-box", wrap=P.Scorer)


def test_train_ignoring_its_dataset_is_refused_by_the_distinguishing_audit(data):
    with pytest.raises(ValueError, match="ignores the dataset it is given.*the audit canary"):
        _audit(P.train_own_data, data, threat_model="black-box", wrap=P.Scorer, method="distinguish", runs=2,
               config={**NOISE_OFF, "epochs": 1})


@pytest.mark.parametrize("train", [P.train_logging_then_own_data, P.train_capped])
def test_reading_the_split_is_not_training_on_its_canaries(data, train):
    # review 6b N1: both read dataset.train, so the read check let them skip the weight comparison and pass
    # a claim of 1 without any DP
    with pytest.raises(ValueError, match=r"ignores the dataset it is given.*identical with and without"):
        _audit(train, data, threat_model="black-box", wrap=P.Scorer)


def test_a_correct_train_is_compared_once_and_cached(data, tmp_path):
    cache = TargetCache(tmp_path / "targets")
    _audit(P.train, data, threat_model="black-box", wrap=P.Scorer, config=CORRECT, cache=cache)
    assert len(_entries(tmp_path / "targets")) == 2  # with and without the canaries
    _audit(P.train, data, threat_model="black-box", wrap=P.Scorer, config=CORRECT, cache=cache)
    assert len(_entries(tmp_path / "targets")) == 2


def test_reads_the_check_cannot_see_fall_back_to_comparing_weights(data, tmp_path):
    cache = TargetCache(tmp_path / "targets")
    result = _audit(P.train_reading_unseen, data, threat_model="black-box", wrap=P.Scorer, config=CORRECT,
                    cache=cache)
    assert result.passed and len(_entries(tmp_path / "targets")) == 2  # with and without the canaries


def test_watched_dataset_notes_reads_but_not_len_or_derived_properties(data):
    watched, reads = watch_train_reads(data)
    assert watched.content_hash() == data.content_hash()
    len(watched), len(watched.train), watched.intents, watched.vocabulary, watched.sizes
    assert not reads.read
    list(watched.train)
    assert reads.read and reads.how == "__iter__"
    assert watched == data and watched.train == data.train
    for read in (lambda w: w.train[3], lambda w: w.all_utterances(), lambda w: w.to_json(),
                 lambda w: __import__("pickle").dumps(w)):
        watched, reads = watch_train_reads(data)
        read(watched)
        assert reads.read


# --- H3: sources= ---------------------------------------------------------------------------------------------

def test_changing_a_file_named_in_sources_retrains(data, tmp_path):
    helper = tmp_path / "dp_helper.py"
    helper.write_text("NOISE = 1.0\n")
    cache = TargetCache(tmp_path / "targets")
    kwargs = dict(build=P.build, method="one-run", threat_model="white-box", check_seed=False, canaries=100,
                  config=CORRECT, cache=cache, sources=[helper])
    measure_dp_training(P.train, data, 2.0, DELTA, **kwargs)
    first = _entries(tmp_path / "targets")
    measure_dp_training(P.train, data, 2.0, DELTA, **kwargs)
    assert _entries(tmp_path / "targets") == first  # unchanged: loaded
    helper.write_text("NOISE = 0.0\n")
    measure_dp_training(P.train, data, 2.0, DELTA, **kwargs)
    assert len(_entries(tmp_path / "targets")) == 2  # edited: trained again


def test_sources_takes_modules_and_packages():
    import pytest_privleak.dp as package
    from pytest_privleak.dp import canaries

    assert check_sources([canaries]) == (canaries.__file__,)
    files = check_sources(package)
    assert canaries.__file__ in files and all(f.endswith(".py") for f in files)


def test_hook_counts_steps_under_an_lr_scheduler_made_after_it(data):
    # torch's LR scheduler rewraps optimizer.step (reading step.__func__): the hook's wrappers must survive it
    import torch
    from opacus import PrivacyEngine

    from pytest_privleak.dp.gradient_canaries import AuditHook

    ids, mask, labels = P.encode(data.train[:100], data.intents)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids, mask, labels), batch_size=20)
    model = P.build(data)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), data_loader=loader,
        noise_multiplier=1.0, max_grad_norm=1.0)
    hook = AuditHook([1, 1, 0], seed=0)
    hook(optimizer, sample_rate=0.2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    steps = 0
    for x, m, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x, m), y).backward()
        optimizer.step()
        scheduler.step()
        steps += 1
    assert hook.tally.steps == hook.tally.insertion_steps == steps > 0
    check_insertions(hook.tally, train="'t'", included=3)


def test_virtual_steps_insert_the_canaries_once_per_logical_batch(data):
    # review 6b N2: inserted at every physical batch of BatchMemoryManager, a correct eps=2 pipeline read
    # eps_lcb 4.8 and failed; physical batches of 8 and of 64 (no split) must read the same
    figures = [_audit(P.train_virtual_steps, data, config={"epsilon": EPS, "delta": 1e-5, "physical": size})
               for size in (64, 8)]
    assert figures[0].value == figures[1].value < EPS
    assert figures[1].evidence["gradient canaries"] == figures[0].evidence["gradient canaries"]
