"""LiRA and RMIA maths against hand-derived values and planted score distributions."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_privleak.attacks.membership.attack import auc_from_statistics
from pytest_privleak.attacks.membership.lira import fit_gaussians, lira_offline, lira_online, logit_confidence
from pytest_privleak.attacks.membership.rmia import log_marginal, log_ratio, rmia_scores
from pytest_privleak.finite import NonFiniteError


def test_logit_confidence_by_hand():
    # p = exp(-loss): loss log 2 -> p = 1/2 -> phi = 0; loss -log 0.9 -> phi = log 9; loss -log 0.1 -> -log 9
    phi = logit_confidence(np.array([math.log(2), -math.log(0.9), -math.log(0.1)]))
    assert phi == pytest.approx([0.0, math.log(9), -math.log(9)], abs=1e-12)
    # near 0 loss keeps resolution: phi ~ -log(loss) for tiny loss
    assert logit_confidence(np.array([1e-12]))[0] == pytest.approx(-math.log(1e-12), rel=1e-9)
    assert np.isfinite(logit_confidence(np.array([0.0]))).all()
    with pytest.raises(ValueError, match="lira_statistic='loss'"):
        logit_confidence(np.array([-0.5]))


def test_per_record_gaussian_fit_by_hand():
    # 4 references, 2 records; record 0 in refs 0,1 (stats 4, 6) out in 2,3 (stats 0, 2)
    stats = np.array([[4.0, 10.0], [6.0, 10.0], [0.0, 9.0], [2.0, 11.0]])
    mask = np.array([[True, False], [True, False], [False, True], [False, True]])
    fit = fit_gaussians(stats, mask, "per-record")
    assert fit.mu_in == pytest.approx([5.0, 10.0]) and fit.mu_out == pytest.approx([1.0, 10.0])
    assert fit.var_in == pytest.approx([2.0, 2.0]) and fit.var_out[0] == pytest.approx(2.0)
    # record 1: out stats (10, 10) have variance 0 -> floored, not 0
    assert fit.var_out[1] > 0
    # online score of phi = 5 on record 0: log N(5; 5, 2) - log N(5; 1, 2) = 16 / (2 * 2) = 4
    score = lira_online(np.array([5.0, 10.0]), stats, mask, "per-record")
    assert score[0] == pytest.approx(4.0, rel=1e-12)


def test_global_variance_pools_all_references_and_records():
    stats = np.array([[4.0, 10.0], [6.0, 10.0], [0.0, 9.0], [2.0, 11.0]])
    mask = np.array([[True, False], [True, False], [False, True], [False, True]])
    fit = fit_gaussians(stats, mask, "global")
    assert fit.variance == "global"
    assert fit.var_in == pytest.approx([np.var([4, 6, 9, 11], ddof=1)] * 2)
    assert fit.var_out == pytest.approx([np.var([0, 2, 10, 10], ddof=1)] * 2)
    # auto: 2 references per side < 64 -> global
    assert fit_gaussians(stats, mask).variance == "global"


def test_offline_lira_is_a_z_value_over_out_references():
    out = np.array([[1.0, 0.0], [3.0, 4.0]])         # record 0: mean 2, var 2; record 1: mean 2, var 8
    z = lira_offline(np.array([4.0, 4.0]), out, "per-record")
    assert z == pytest.approx([2 / math.sqrt(2), 2 / math.sqrt(8)], rel=1e-12)


def test_single_reference_online_fills_the_missing_side_with_the_global_shift():
    # 1 reference: record 0 in (stat 5), record 1 out (stat 1). shift = 5 - 1 = 4
    fit = fit_gaussians(np.array([[5.0, 1.0]]), np.array([[True, False]]), "global")
    assert fit.mu_in == pytest.approx([5.0, 5.0]) and fit.mu_out == pytest.approx([1.0, 1.0])


def test_planted_per_record_difficulty_loss_is_blind_lira_sees():
    # each record has its own difficulty d_n ~ N(0, 10); members sit at d_n + 1, non-members at d_n (sd 0.3)
    rng = np.random.default_rng(0)
    n, k = 400, 16
    difficulty = rng.normal(0, 10, n)
    member = np.arange(n) < n // 2
    mask = np.zeros((k, n), dtype=bool)
    for j in range(0, k, 2):                           # balanced halves: each record in k/2 references
        half = rng.permutation(n) < n // 2
        mask[j], mask[j + 1] = half, ~half
    refs = difficulty + mask * 1.0 + rng.normal(0, 0.3, (k, n))
    target = difficulty + member * 1.0 + rng.normal(0, 0.3, n)
    loss_auc = auc_from_statistics(target[member], target[~member])
    online = lira_online(target, refs, mask)
    out_only = refs.T[~mask.T].reshape(n, k // 2).T     # each record's k/2 references trained without it
    offline = lira_offline(target, out_only)
    lira_auc = auc_from_statistics(online[member], online[~member])
    assert abs(loss_auc - 0.5) < 0.1                   # difficulty swamps the 1.0 shift
    assert lira_auc > 0.95                             # shift / sd = 1 / 0.3: near-perfect per record
    assert auc_from_statistics(offline[member], offline[~member]) > 0.9


def test_rmia_marginal_and_offline_approximation_by_hand():
    losses = np.array([[math.log(2), math.log(2)], [math.log(4), math.log(2)]])   # p: (1/2, 1/4), (1/2, 1/2)
    assert np.exp(log_marginal(losses)) == pytest.approx([0.375, 0.5], rel=1e-12)
    # offline a = 0.3: 1/2 (1.3 * 0.375 + 0.7) = 0.59375
    assert np.exp(log_marginal(losses, 0.3))[0] == pytest.approx(0.59375, rel=1e-12)
    # a = 1: Pr(x) = Pr_OUT(x)
    assert np.exp(log_marginal(losses, 1.0)) == pytest.approx([0.375, 0.5], rel=1e-12)
    # target p = 0.75 on record 0 -> ratio log(0.75 / 0.375) = log 2
    ratio = log_ratio(np.array([-math.log(0.75), math.log(2)]), losses)
    assert ratio == pytest.approx([math.log(2), 0.0], abs=1e-12)


def test_rmia_score_counts_population_records_dominated_at_gamma():
    z = np.array([-1.0, 0.0, 0.5, 1.0])
    # x ratio log 2, gamma 2: LR >= 2 <=> ratio(z) <= 0 -> 2 of 4
    scores = rmia_scores(np.array([math.log(2), 10.0, -5.0]), z, gamma=2.0)
    assert scores.score == pytest.approx([0.5, 1.0, 0.0])
    # gamma 1: ratio(z) <= log 2 = 0.69 -> 3 of 4
    assert rmia_scores(np.array([math.log(2)]), z, gamma=1.0).score == pytest.approx([0.75])


def test_rmia_ranking_breaks_score_ties_by_the_ratio():
    scores = rmia_scores(np.array([5.0, 7.0, 7.0, -9.0]), np.array([0.0]), gamma=1.0)
    assert scores.score.tolist() == [1.0, 1.0, 1.0, 0.0]
    ranks = scores.ranking()
    assert ranks[3] < ranks[0] < ranks[1] == ranks[2]


def test_planted_population_shift_rmia_beats_loss():
    # record log-probabilities = -difficulty (+1 when member); references see the difficulty
    rng = np.random.default_rng(1)
    n = 600
    difficulty = rng.exponential(3.0, n)
    member = np.arange(n) < 200
    population = np.arange(n) >= 400
    target_loss = difficulty - 1.0 * member + rng.normal(0, 0.2, n)
    refs = difficulty + rng.normal(0, 0.2, (2, n))
    ratio = log_ratio(target_loss, refs, offline_a=1.0)
    candidates = ~population
    s = rmia_scores(ratio[candidates], ratio[population])
    stat = s.ranking()
    m = member[candidates]
    assert auc_from_statistics(stat[m], stat[~m]) > 0.95
    assert auc_from_statistics(-target_loss[member], -target_loss[~member & ~population]) < 0.75


def test_nan_scores_are_refused_by_name():
    with pytest.raises(NonFiniteError, match="ref_stats"):
        fit_gaussians(np.array([[np.nan, 1.0]]), np.array([[True, False]]))
    with pytest.raises(NonFiniteError, match="target_losses"):
        log_ratio(np.array([np.nan]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="gamma must be a positive number"):
        rmia_scores(np.array([0.0]), np.array([0.0]), gamma=0)
    with pytest.raises(ValueError, match="population="):
        rmia_scores(np.array([0.0]), np.array([]))


def test_offline_a_is_tuned_on_the_references_own_members():
    # 4 references on halves of 400 population records. Records' log-probabilities are -difficulty (+1 when a
    # reference trained on them); difficulties of many nats make Pr_OUT tiny, so a small a reads only the loss.
    from pytest_privleak.attacks.membership.rmia import tune_offline_a

    rng = np.random.default_rng(2)
    n, k = 400, 4
    difficulty = rng.uniform(2.0, 30.0, n)
    mask = np.stack([rng.permutation(n) < n // 2 for _ in range(k)])
    losses = difficulty - 1.0 * mask + rng.normal(0, 0.1, (k, n))
    a = tune_offline_a(losses, mask)
    assert a == 1.0                                   # a = 1: Pr(x) = Pr_OUT(x), the ratio removes the difficulty
    ratio = lambda a_: log_ratio(losses[0], losses[1:], a_)
    offline = ~mask[1:].any(axis=0)
    m, nm = offline & mask[0], offline & ~mask[0]
    assert auc_from_statistics(ratio(1.0)[m], ratio(1.0)[nm]) > auc_from_statistics(ratio(0.3)[m], ratio(0.3)[nm])
    with pytest.raises(ValueError, match="at least 2 references"):
        tune_offline_a(losses[:1], mask[:1])
