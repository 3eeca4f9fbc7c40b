"""The DP-SGD audit on loops it was not written against (issue 32): a plain-torch loop, Opacus, a DP optimizer of
one's own (tests/dp_own_loops.py, written apart from tests/dp_pipelines.py).

- item 1: no silent pass in the white-box path (bias-first parameter groups, a clip step that drops the audit's
  rows);
- item 2: per-batch clipping caught at the default canary count;
- item 3: one framework-neutral contract (plain torch, Opacus, a stand-in) with nothing private;
- item 4: the sampler and accounting audit;
- item 5: the same verdict from a cold and a warm cache.

Claims are (2, 1e-5) unless said.  The counts over many seeds are the slow tests at the bottom; the full counts
(20 seeds a bug, 100 correct) are in .notes/issue32_counts.md.
"""
from __future__ import annotations

import pytest

pytest.importorskip("opacus")

import dp_own_loops as L  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.dp.assertion import assert_dp_training_holds  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.dp.gradient_canaries import AuditHook  # noqa: E402
from pytest_privleak.dp.sampling_audit import assert_dp_sampling_holds, measure_dp_sampling  # noqa: E402
from pytest_privleak.results import expect_leak  # noqa: E402

EPS, DELTA = 2.0, 1e-5


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=300, n_valid=0, n_test=0)


def _white(train, data, eps=EPS, seed=0, **config):
    return assert_dp_training_holds(train, data, eps, DELTA, build=L.build, method="one-run",
                                    threat_model="white-box", config={"epsilon": eps, **config}, seed=seed,
                                    check_seed=False)


# --- item 1: no silent pass ---------------------------------------------------------------------------------------

def test_bias_first_parameter_groups_do_not_hide_noise_off(data):
    # before: canaries placed in the optimizer's order (bias first) and scored in the model's: eps_lcb 0.0 at a
    # claim of 1 with the noise off; now placed and scored in one order
    with expect_leak() as caught:
        _white(L.train_opacus, data, 1.0, bug="noise-off", groups="bias-first")
    assert caught.result.value > 1.0
    assert "Dirac gradient at linear." in caught.result.evidence["canaries that gave it away"]


@pytest.mark.parametrize("train", [L.train_plain, L.train_opacus])
def test_a_clip_step_that_drops_the_audits_rows_is_refused_naming_the_step(data, train):
    # before: a white-box pass at 0.0 while the hook counted "19 of 19 steps"
    with pytest.raises(ValueError, match=r"did not reach the update at step 1: (\d+) of the \1 canaries inserted "
                                         r"before clipping at coordinates no row of the step touches left \[0.0, "
                                         r"0.0, 0.0\]·C in the clipped sum .*dropped the rows the hook appended"):
        _white(train, data, 1.0, bug="drop-rows")


@pytest.mark.parametrize("bug", ["microbatch-clip-noise-off", "microbatch-clip", "per-layer-clip-noise-off"])
def test_a_clip_step_that_shrinks_a_records_effect_is_refused_not_passed(data, bug):
    # held-out probe, session 7: a noise-free loop clipping each 16-row micro-batch's sum as one unit read
    # eps_lcb 0.0 at a claim of 2 in 7 of 8 seeds (and 0.0 with the accountant's noise, true eps 5.58); Opacus's
    # per-layer clipping with the noise off read 1.03-1.44. The canaries' share of the clipped sum (under C)
    # now refuses the white-box audit, naming the step and the fix
    with pytest.raises(ValueError, match=r"at step 1: (\d+) of the \1 canaries inserted before clipping at "
                                         r"coordinates no row of the step touches left .*less than the 1·C .*"
                                         r"threat_model=\"black-box\""):
        _white(L.train_plain, data, 2.0, bug=bug)


# --- item 3: one contract, nothing private ------------------------------------------------------------------------

@pytest.mark.parametrize("train", [L.train_plain, L.train_stand_in])
def test_a_loop_without_opacus_passes_when_correct(data, train):
    result = _white(train, data)
    assert result.passed and result.value < EPS
    assert "canaries inserted in 19 of 19 steps" in result.evidence["gradient canaries"]


def test_the_plain_loop_with_the_noise_off_is_caught(data):
    with expect_leak() as caught:
        _white(L.train_plain, data, bug="noise-off")
    assert caught.result.value > EPS


def test_a_plain_optimizer_is_pointed_to_the_neutral_contract(data):
    import torch

    with pytest.raises(TypeError, match=r"SGD, which has no clip_and_accumulate.*audit_hook.attach\(model, "
                                        r"sample_rate=q, max_grad_norm=C\)"):
        AuditHook([1, 0], seed=0)(torch.optim.SGD(L.build(data).parameters(), lr=1.0), sample_rate=0.2)


# --- item 2: canaries that do not dilute each other ----------------------------------------------------------------

def test_per_batch_clipping_is_caught_at_the_default_count(data):
    # before: 2000 canaries of 10·C, about 210 a step sharing one clipping budget of a batch of 64: eps_lcb 1.4-1.7
    with expect_leak() as caught:
        _white(L.train_plain, data, bug="per-batch-clip")
    result = caught.result
    assert result.value > EPS
    assert "600 of 2000 canaries, about 64 a step" in result.evidence["gradient canaries"]


# --- item 4: the sampler and accounting audit ---------------------------------------------------------------------

def _sampling(train, data, bug, **kwargs):
    return assert_dp_sampling_holds(train, data, build=L.build, config={"bug": bug}, **kwargs)


@pytest.mark.parametrize("train", [L.train_plain, L.train_opacus])
def test_correct_poisson_loaders_pass_the_sampler_audit(data, train):
    result = _sampling(train, data, "none")
    assert result.passed and result.evidence["properties"].endswith("failed: none")
    assert result.evidence["normaliser independent of the dataset size"].startswith("ok (p = ")


@pytest.mark.parametrize("train, bug, failed", [
    (L.train_plain, "fixed-batches", "batch sizes Binomial(N, q), equal per-record frequencies, independent steps"),
    (L.train_plain, "weighted-sampler", "each record at most once per step"),
    (L.train_plain, "normalise-actual", "normaliser independent of the batch"),
])
def test_broken_samplers_fail_naming_the_property(data, train, bug, failed):
    with expect_leak(match="dp-sampling.p_value") as caught:
        _sampling(train, data, bug, neighbours=False)
    assert failed in caught.result.evidence["properties"]
    assert caught.result.evidence["accounted q"] == "0.2133"


def test_opacus_fixed_batches_name_the_accounted_and_the_measured_rate(data):
    with expect_leak() as caught:
        _sampling(L.train_opacus, data, "fixed-batches", neighbours=False)
    evidence = caught.result.evidence
    assert "sampling rate, batch sizes Binomial(N, q)" in evidence["properties"]
    assert "accounted q 0.25, measured 0.2133" in evidence["sampling rate"]


def test_opacus_default_normaliser_int_n_q_moves_with_the_dataset_size(data):
    # opacus 819: make_private divides by int(N / len(loader)) = 60 for N = 300, 59 for N = 299
    with expect_leak() as caught:
        _sampling(L.train_opacus, data, "normalise-floor")
    assert "failed: normaliser independent of the dataset size" in caught.result.evidence["properties"]
    assert "one record removed (N = 299): noise scale x1.01" in caught.result.evidence[
        "normaliser independent of the dataset size"]


def test_a_train_that_reports_no_batches_is_refused(data):
    with pytest.raises(ValueError, match="did not report its batches to audit_hook.*watch_loader"):
        measure_dp_sampling(L.train_stand_in, data, build=L.build, neighbours=False)


# --- item 5: the same verdict cold or warm -------------------------------------------------------------------------

def test_cold_and_warm_caches_reach_the_same_verdict(data, tmp_path):
    from pytest_privleak.cache.targets import TargetCache

    cache = TargetCache(tmp_path / "targets")
    kwargs = dict(build=L.build, method="auto", threat_model="white-box", config={"epsilon": EPS}, runs=2,
                  check_seed=False, cache=cache, time_budget_s=1e-3)
    cold = measure_dp_training(L.train_plain, data, EPS, DELTA, **kwargs)
    warm = measure_dp_training(L.train_plain, data, EPS, DELTA, **kwargs)
    # the distinguishing method's budget comes from the recorded training time (stored with the cache entry), so
    # the warm run, which only loads, decides as the cold one did: before, the warm run's load times fitted it in
    assert "distinguish skipped" in cold.evidence["why this audit"]
    assert warm.evidence["why this audit"] == cold.evidence["why this audit"] and warm.value == cold.value


# --- slow: counts over seeds (the full 20 / 100 counts: .notes/issue32_counts.md) ----------------------------------

#: (train, config, claimed eps): each caught in all of 5 seeds here; a true catch rate below 0.55 gives 5 of 5
#: with probability 0.55^5 < 0.05, so the test shows the rate is at least 0.55 (the notes' 20 seeds show more)
CAUGHT = [(L.train_plain, {"bug": "noise-off"}, 2.0), (L.train_plain, {"bug": "noise-off"}, 1.0),
          (L.train_plain, {"bug": "noise-div10"}, 2.0), (L.train_plain, {"bug": "per-batch-clip"}, 2.0),
          (L.train_opacus, {"bug": "noise-off", "groups": "bias-first"}, 1.0),
          (L.train_opacus, {"bug": "noise-off"}, 2.0)]


@pytest.mark.slow
@pytest.mark.parametrize("train, config, eps", CAUGHT)
def test_each_bug_caught_in_5_of_5_seeds(data, train, config, eps):
    values = [measure_dp_training(train, data, eps, DELTA, build=L.build, method="one-run", threat_model="white-box",
                                  config={"epsilon": eps, **config}, seed=seed, check_seed=False).value
              for seed in range(5)]
    assert min(values) > eps, values


@pytest.mark.slow
@pytest.mark.parametrize("train", [L.train_plain, L.train_opacus])
def test_correct_loops_pass_in_20_of_20_seeds(data, train):
    # 0 false alarms in 20: a false-alarm rate above 0.14 gives that with probability below 0.05
    values = [measure_dp_training(train, data, EPS, DELTA, build=L.build, method="one-run", threat_model="white-box",
                                  config={"epsilon": EPS}, seed=seed, check_seed=False).value for seed in range(20)]
    assert max(values) <= EPS, values


@pytest.mark.slow
@pytest.mark.parametrize("train, bug", [(L.train_plain, "fixed-batches"), (L.train_plain, "weighted-sampler"),
                                        (L.train_plain, "normalise-actual"), (L.train_plain, "normalise-floor"),
                                        (L.train_opacus, "fixed-batches"), (L.train_opacus, "weighted-sampler"),
                                        (L.train_opacus, "normalise-floor")])
def test_sampler_bugs_caught_in_5_of_5_seeds(data, train, bug):
    values = [measure_dp_sampling(train, data, build=L.build, config={"bug": bug}, seed=seed).value
              for seed in range(5)]
    assert max(values) <= 0.001, values


@pytest.mark.slow
@pytest.mark.parametrize("train", [L.train_plain, L.train_opacus])
def test_correct_loaders_pass_the_sampler_audit_in_20_of_20_seeds(data, train):
    values = [measure_dp_sampling(train, data, build=L.build, config={"bug": "none"}, seed=seed).value
              for seed in range(20)]
    assert min(values) > 0.001, values
