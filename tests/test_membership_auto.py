"""``auto`` is the strongest attack on the model at hand (issue 33 item 2): once references exist every method
that reads them runs on the same scores, the figure is the strongest's, its interval at a Bonferroni share of
the confidence, and the evidence says which won and by how much."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_privleak import expect_leak
from pytest_privleak.attacks.membership.assertion import assert_membership_tpr_at_most, measure_membership
from pytest_privleak.attacks.membership.attack import measure_methods, membership_inference, pick
from pytest_privleak.attacks.membership.references import ReferenceSet, half_masks
from pytest_privleak.data.types import Utterance


class Table:
    """A SequenceScorer reading each utterance's loss from a dict."""

    def __init__(self, losses: dict):
        self.losses = losses

    def score(self, utterances):
        return np.array([self.losses[u] for u in utterances])


def planted(n_candidates: int = 400, n_population: int = 400, k: int = 4, seed: int = 3):
    """Records of planted difficulty; the target's loss is the difficulty minus 2 on members, plus noise; offline
    references (trained on halves of the population) see each record at its difficulty. The bare loss is blind
    (difficulty varies 3..20), the calibrated methods see membership."""
    rng = np.random.default_rng(seed)
    records = [Utterance((f"w{i}",), ("O",), "x") for i in range(n_candidates + n_population)]
    candidates, population = records[:n_candidates], records[n_candidates:]
    difficulty = dict(zip(records, rng.uniform(3.0, 20.0, len(records))))
    masks = half_masks(n_population, k, rng, complementary=False)
    refs = [Table({u: difficulty[u] + rng.normal(0, 0.3) - (0.5 * masks[j, i - n_candidates]
                                                            if i >= n_candidates else 0.0)
                   for i, u in enumerate(records)}) for j in range(k)]
    members = candidates[:n_candidates // 4]
    target = Table({u: difficulty[u] - 2.0 * (u in set(members)) + rng.normal(0, 0.3) for u in records})
    reference_set = ReferenceSet(tuple(refs), tuple(population), masks, tuple(population), False, 0)
    return target, members, candidates[n_candidates // 4:], reference_set


def test_auto_runs_every_method_on_the_references_and_keeps_the_strongest():
    target, members, non_members, refs = planted()
    ran = measure_methods(target, members, non_members, references=refs)
    assert [m.method for m in ran] == ["loss", "lira", "rmia"]
    assert all(m.confidence == pytest.approx(1 - 0.05 / 3) for m in ran)          # Bonferroni over 3
    best = pick(ran, "auc")
    assert best.auc == max(m.auc for m in ran) and best.method != "loss"
    figures = dict(best.contest)
    assert figures["loss"] < 0.8 < best.auc                                      # difficulty hides it from the loss
    runner_up = sorted(m.auc for m in ran)[-2]
    assert f"{best.auc - runner_up:+.3f} over the next" in best.detail["auto"]
    assert "3 methods ran on the same scores" in best.detail["auto"] and "98.33% confidence" in best.detail["auto"]
    by_tpr = pick(ran, 0.01)
    assert by_tpr.point(0.01).tpr == max(m.point(0.01).tpr for m in ran)
    named = membership_inference(target, members, non_members, references=refs, method=best.method)
    assert named.auc == best.auc and named.confidence == 0.95 and not named.contest     # alone: the full 95 %


def test_auto_gates_on_the_strongest_tpr_and_names_it_in_a_stable_label():
    target, members, non_members, refs = planted(n_candidates=1400)
    with expect_leak(match=r"tpr_at_fpr_0.01 \[Table auto: 350 members vs 1050 non-members\].*violates") as err:
        assert_membership_tpr_at_most(target, members, non_members, 0.05, fpr=0.01, references=refs)
    result = err.value.result
    each = {m.method: m.point(0.01).tpr for m in measure_methods(target, members, non_members, references=refs)}
    assert result.value == max(each.values())
    assert "TPR at FPR 1.0%" in result.evidence["auto"] and "Bonferroni" in result.evidence["auto"]
    measured = measure_membership(target, members, non_members, references=refs)
    assert measured.label == "Table auto: 350 members vs 1050 non-members"


def test_a_single_method_keeps_its_own_label_and_the_full_confidence():
    target, members, non_members, refs = planted()
    alone = measure_membership(target, members, non_members, method="lira", references=refs)
    assert alone.label == "Table LiRA: 100 members vs 300 non-members" and alone.confidence == 0.95
    assert "auto" not in alone.evidence
