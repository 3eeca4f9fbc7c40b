"""The DP-SGD audit end to end (issue 25): broken Opacus pipelines are caught, correct ones pass.

Pipelines: tests/dp_pipelines.py (a hashed-bag intent classifier, Opacus
DP-SGD, seeded bugs).  Claims are (2, 1e-5) unless said: the issue's goal is
ε_lcb > ε for every seeded bug at a claimed ε of 4 or less.  Catch rates and
the false-alarm rate over many seeds are the slow tests at the bottom.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("opacus")

import dp_pipelines as P  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.dp.assertion import assert_dp_training_holds  # noqa: E402
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.dp import canaries as C  # noqa: E402
from pytest_privleak.dp.gradient_canaries import AuditHook  # noqa: E402
from pytest_privleak.results import expect_leak  # noqa: E402

EPS, DELTA = 2.0, 1e-5


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=300, n_valid=0, n_test=0)


def _config(bug: str, eps: float = EPS, **extra) -> dict:
    return {"epsilon": eps, "delta": DELTA, "bug": bug, **extra}


def _assert(data, bug, *, threat_model="white-box", eps=EPS, seed=0, **extra):
    return assert_dp_training_holds(P.train, data, eps, DELTA, build=P.build, wrap=P.Scorer, method="one-run",
                                    threat_model=threat_model, config=_config(bug, eps, **extra), seed=seed,
                                    check_seed=False)


# --- canaries ------------------------------------------------------------------------------------------

def test_inclusion_is_a_seeded_fair_coin():
    a, b = C.draw_inclusion(4000, 3), C.draw_inclusion(4000, 3)
    assert np.array_equal(a, b) and not np.array_equal(a, C.draw_inclusion(4000, 4))
    assert abs(a.mean() - 0.5) < 4 * math.sqrt(0.25 / 4000)


def test_mislabelled_canaries_use_only_fresh_tokens(data):
    made = C.mislabelled_canaries(data, 50, seed=1)
    vocabulary = set().union(*(u.tokens for u in data.all_utterances()))
    assert len({u.tokens for u in made}) == 50
    assert all(not set(u.tokens) & vocabulary for u in made)
    counts = {i: sum(u.intent == i for u in data.train) for i in data.intents}
    assert {u.intent for u in made} == {min(sorted(counts), key=counts.get)}


def test_new_token_canaries_end_with_a_token_the_data_never_holds(data):
    made = C.new_token_canaries(data, 30, seed=2)
    vocabulary = set().union(*(u.tokens for u in data.all_utterances()))
    assert all(u.tokens[-1] not in vocabulary and set(u.tokens[:-1]) <= vocabulary for u in made)
    C.check_collisions(data, made, new_tokens=True)


def test_with_canaries_adds_exactly_the_included_ones(data):
    audit = C.make_audit_canaries(data, 40, seed=5)
    trained_on = C.with_canaries(data, audit)
    assert trained_on.train[:len(data.train)] == data.train
    assert list(trained_on.train[len(data.train):]) == [u for u, i in zip(audit.utterances, audit.included) if i]


# --- the white-box hook --------------------------------------------------------------------------------

def _one_opacus_step(data, coins):
    import torch
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    model = P.build(data)
    ids, mask, labels = P.encode(data.train[:8], data.intents)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids, mask, labels), batch_size=8)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), data_loader=loader,
        noise_multiplier=0.0, max_grad_norm=1.0, poisson_sampling=False)
    hook = AuditHook(coins, seed=0)
    hook(optimizer, sample_rate=1.0)   # every included canary goes into every step
    x, m, y = next(iter(loader))
    torch.nn.functional.cross_entropy(model(x, m), y).backward()
    optimizer.step()
    return hook


def test_hook_is_json_and_each_canary_adds_its_clipped_row_to_its_own_coordinate(data):
    hook = _one_opacus_step(data, [1, 1, 0])
    assert json.loads(json.dumps(hook)) == dict(hook)
    tally = hook.tally
    assert tally.steps == tally.insertion_steps == 1 and list(tally.inserted) == [1, 1, 0] and tally.rows == [8]
    assert abs(tally.min_share - 1.0) < 1e-4   # each 10·C canary row clipped to C = 1, as per-sample clipping does
    # noise off: the update is the clipped sum over 8; the same step without canaries differs by exactly 1/8 at the
    # coordinates of the two included canaries and not at the third
    without = _one_opacus_step(data, [0, 0, 0]).tally
    assert tally.coordinates == without.coordinates
    assert np.allclose(tally.sums - without.sums, [1 / 8, 1 / 8, 0.0], atol=1e-6)
    # noise off: the step's evidence for the two included canaries is overwhelming, for the third nothing
    assert tally.scores[0] > 100 and tally.scores[1] > 100 and tally.scores[2] < 0


def test_hook_refuses_a_plain_optimizer(data):
    import torch

    with pytest.raises(TypeError, match="has no clip_and_accumulate.*fix: for a loop without Opacus use audit = "
                                        r"audit_hook.attach\(model"):
        AuditHook([1], seed=0)(torch.optim.SGD(P.build(data).parameters(), lr=1.0), sample_rate=0.1)


# --- end to end: bugs caught, correct pipelines pass ------------------------------------------------------

def test_correct_pipeline_passes_white_box(data):
    result = _assert(data, "none")
    assert 0.0 <= result.value <= EPS and result.passed
    assert result.target["threat_model"] == "white-box" and result.chance == 0.0


def test_correct_pipeline_passes_black_box(data):
    result = _assert(data, "none", threat_model="black-box")
    assert result.value <= EPS and result.evidence["threat model"].startswith("black-box")


@pytest.mark.parametrize("bug, extra", [("noise-off", {}), ("noise-div10", {}), ("clip-off", {"lr": 0.5}),
                                        ("per-batch-clip", {})])
def test_noise_and_clipping_bugs_are_caught_white_box(data, bug, extra):
    with expect_leak() as caught:
        _assert(data, bug, **extra)
    result = caught.value.result
    assert result.value > EPS and result.threshold == EPS
    message = str(caught.value)
    for part in ("dp-training.epsilon_lcb", "violates the limit", "CI", "chance", "canaries that gave it away",
                 "Dirac gradient at", "remedy", "epsilon_lcb_steinke", "white-box"):
        assert part in message, part


@pytest.mark.slow
def test_misreported_sampling_rate_is_caught_at_epsilon_1_in_9_of_10_seeds(data):
    # issue 32 scores each canary by its per-step likelihood ratio: seeds 1-9 read 1.31-1.86, seed 0 0.963 (it read
    # 1.26 under the sum-of-updates score, seed 1 1.10 against 1.31 now); a claim of 1 is at the edge of this bug
    values = [measure_dp_training(P.train, data, 1.0, DELTA, build=P.build, method="one-run",
                                  threat_model="white-box", config=_config("rate-misreported", 1.0), seed=seed,
                                  check_seed=False).value for seed in range(10)]
    assert sum(v > 1.0 for v in values) >= 9, values


def test_noise_off_is_caught_black_box(data):
    # the sound (eps, delta) reading of the one-run bound proves 1.87 here (the Gaussian reading said 2.72,
    # which the audit no longer gates on): a claim of 1 is refuted, one of 2 is not
    with expect_leak() as caught:
        _assert(data, "noise-off", threat_model="black-box", eps=1.0)
    assert caught.value.result.value > 1.0
    assert "-> " in caught.value.result.evidence["canaries that gave it away"]


def test_measure_is_deterministic_and_unthresholded(data):
    kwargs = dict(build=P.build, wrap=P.Scorer, method="one-run", threat_model="white-box",
                  config=_config("noise-div10"), check_seed=False, canaries=300)
    first = measure_dp_training(P.train, data, EPS, DELTA, **kwargs)
    second = measure_dp_training(P.train, data, EPS, DELTA, **kwargs)
    assert first.threshold is None and first.value == second.value and first.extra == {
        **second.extra, "seconds": first.extra["seconds"]}


def test_trains_once_per_content_hash(data, tmp_path):
    from pytest_privleak.cache.targets import TargetCache

    cache = TargetCache(tmp_path / "targets")
    kwargs = dict(build=P.build, wrap=P.Scorer, method="one-run", threat_model="white-box",
                  config=_config("none"), check_seed=False, canaries=200, cache=cache)
    first = measure_dp_training(P.train, data, EPS, DELTA, **kwargs)
    entries = sorted(p.name for p in (tmp_path / "targets").rglob("*") if p.is_dir())
    second = measure_dp_training(P.train, data, EPS, DELTA, **kwargs)
    assert second.value == first.value
    assert sorted(p.name for p in (tmp_path / "targets").rglob("*") if p.is_dir()) == entries


def test_budget_spent_is_inconclusive_not_a_pass(data):
    with expect_leak(match="INCONCLUSIVE") as leak:
        assert_dp_training_holds(P.train, data, EPS, DELTA, build=P.build, method="distinguish",
                                 threat_model="white-box", config=_config("none"), time_budget_s=1e-6, runs=10)
    assert isinstance(leak.value, InconclusiveAuditError) and leak.result.passed


def test_auto_names_what_ran_and_why(data):
    result = measure_dp_training(P.train, data, EPS, DELTA, build=P.build, wrap=P.Scorer, config=_config("none"),
                                 check_seed=False, time_budget_s=1.0)
    why = result.evidence["why this audit"]
    assert "distinguish skipped" in why and "Bonferroni" in why
    assert {"epsilon_lcb_white_box_one_run", "epsilon_lcb_black_box_one_run"} <= set(result.extra)


# --- slow: distinguishing, catch rates and false alarms over seeds -----------------------------------------

@pytest.mark.slow
def test_distinguish_catches_noise_off_and_passes_the_correct_pipeline(data):
    # 30 runs per side: each half of 15 can certify up to about 1.8 at 95% (cross-fitted Clopper-Pearson)
    kwargs = dict(build=P.build, method="distinguish", threat_model="white-box", runs=30)
    with expect_leak():
        assert_dp_training_holds(P.train, data, 1.0, DELTA, config=_config("noise-off", 1.0), **kwargs)
    assert assert_dp_training_holds(P.train, data, 1.0, DELTA, config=_config("none", 1.0), **kwargs).passed


#: (bug, threat model, claimed ε, config): the bugs the audit catches in >= 19 of 20 seeds with the sound
#: (ε, δ) reading of the one-run bound; the sampler and normalisation bugs are not caught (see the notes), so
#: they are not listed. Black-box noise-off was caught in only 4 of 20 seeds at a claimed ε of 2 once the
#: Gaussian reading stopped being gated on, so its claim here is 1.
CAUGHT = [("noise-off", "white-box", EPS, {}), ("noise-div10", "white-box", EPS, {}),
          ("clip-off", "white-box", EPS, {"lr": 0.5}), ("per-batch-clip", "white-box", EPS, {}),
          ("rate-misreported", "white-box", 1.0, {}), ("noise-off", "black-box", 1.0, {})]


@pytest.mark.slow
@pytest.mark.parametrize("bug, threat_model, eps, extra", CAUGHT)
def test_catch_rate_over_20_seeds(data, bug, threat_model, eps, extra):
    caught = 0
    for seed in range(20):
        result = measure_dp_training(P.train, data, eps, DELTA, build=P.build, wrap=P.Scorer, method="one-run",
                                     threat_model=threat_model, config=_config(bug, eps, **extra), seed=seed,
                                     check_seed=False)
        caught += result.value > eps
    assert caught >= 19, f"{bug} ({threat_model}) caught in {caught} of 20 seeds"


@pytest.mark.slow
@pytest.mark.parametrize("threat_model", ["white-box", "black-box"])
def test_correct_pipeline_never_flagged_over_100_seeds(data, threat_model):
    values = [measure_dp_training(P.train, data, EPS, DELTA, build=P.build, wrap=P.Scorer, method="one-run",
                                  threat_model=threat_model, config=_config("none"), seed=seed,
                                  check_seed=False).value for seed in range(100)]
    assert max(values) <= EPS, f"false alarms at seeds {[s for s, v in enumerate(values) if v > EPS]}"


def test_a_claim_the_canaries_cannot_refute_is_inconclusive_not_a_pass(data):
    # 20 white-box canaries prove at most about 1.1 even if every guess is right: a claim of 8 cannot fail
    with expect_leak(match="can prove at most epsilon") as leak:
        assert_dp_training_holds(P.train, data, 8.0, DELTA, build=P.build, wrap=P.Scorer, method="one-run",
                                 threat_model="white-box", config=_config("none", 8.0), canaries=20,
                                 check_seed=False)
    assert isinstance(leak.value, InconclusiveAuditError) and leak.result.passed
    result = assert_dp_training_holds(P.train, data, 8.0, DELTA, build=P.build, wrap=P.Scorer, method="one-run",
                                      threat_model="white-box", config=_config("none", 8.0), canaries=20,
                                      check_seed=False, allow_inconclusive=True)
    assert result.extra["one_run_ceiling"] < 8.0
