"""Reference models from the target's recipe, RMIA as the default, records as teams have them, end to end."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_privleak.attacks.membership.attack import membership_inference
from pytest_privleak.attacks.membership.assertion import assert_membership_tpr_at_most, measure_membership
from pytest_privleak.attacks.membership.methods import DistributionShiftWarning
from pytest_privleak.attacks.membership.records import as_utterances, redacted
from pytest_privleak.attacks.membership.references import ReferenceSet, TargetRecipe, half_masks, train_references
from pytest_privleak.data.types import Utterance
from pytest_privleak import expect_leak


def test_records_as_teams_have_them():
    u = Utterance(("book", "a", "table"), ("O", "O", "O"), "book")
    got = as_utterances("members", [u, "play some jazz", ("wake me at six", "alarm"),
                                    {"text": "what is the weather", "label": "weather"}])
    assert got[0] is u
    assert got[1].tokens == ("play", "some", "jazz") and got[1].tags == ("O", "O", "O")
    assert (got[2].text, got[2].intent) == ("wake me at six", "alarm")
    assert (got[3].text, got[3].intent) == ("what is the weather", "weather")
    assert redacted(u).startswith("sha256:") and "(3 tokens)" in redacted(u) and "book" not in redacted(u)


def test_online_halves_put_each_record_in_half_of_the_references():
    masks = half_masks(9, 4, np.random.default_rng(0), complementary=True)
    assert (masks[0] ^ masks[1]).all() and (masks[2] ^ masks[3]).all()
    assert (masks.sum(axis=0) == 2).all()
    offline = half_masks(10, 3, np.random.default_rng(0), complementary=False)
    assert (offline.sum(axis=1) == 5).all()


@pytest.fixture(scope="module")
def lm_setup(tmp_path_factory):
    """The built-in lstm-lm trained 40 epochs on 100 utterances, its recipe and a cache (about 10 s)."""
    import torch

    from pytest_privleak.cache.targets import TargetCache
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets import train_target

    torch.set_num_threads(1)
    cache = TargetCache(tmp_path_factory.mktemp("targets"))
    data = generate_snips_like(n_train=100, n_valid=200, n_test=1200, seed=3)
    model = train_target("lstm-lm", data, cache=cache, epochs=40, progress=False)
    recipe = TargetRecipe(data, kind="lstm-lm", config={"epochs": 40, "progress": False}, cache=cache)
    members = list(dict.fromkeys(data.train))
    seen = set(members)
    unseen = [u for u in dict.fromkeys(data.test) if u not in seen]
    population = [u for u in dict.fromkeys(data.valid) if u not in seen and u not in set(unseen)]
    return model, recipe, members, unseen, population, cache


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_references_are_cached_targets_trained_once(lm_setup):
    model, recipe, members, unseen, population, cache = lm_setup
    first = train_references(recipe, members + unseen[:50], population, k=2, seed=7)
    entries = sorted(p.name for p in cache.root.iterdir())
    second = train_references(recipe, members + unseen[:50], population, k=2, seed=7)
    assert sorted(p.name for p in cache.root.iterdir()) == entries            # nothing retrained
    probe = unseen[:20]
    for a, b in zip(first.models, second.models):
        assert np.array_equal(a.score(probe), b.score(probe))
    assert not first.online and not first.in_pool.any(axis=0).all() and first.in_pool.sum(axis=1).tolist() == [
        len(population) // 2] * 2
    # offline: no reference trained on a candidate
    assert not first.trained_on(members + unseen[:50]).any()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_overfit_target_fails_the_default_tpr_gate_and_says_rmia_ran(lm_setup):
    model, recipe, members, unseen, population, _ = lm_setup
    with expect_leak() as err:
        assert_membership_tpr_at_most(model, members, unseen[:1000], max_tpr=0.05, references=recipe, k=2,
                                      population=population, redact=True)
    result = err.value.result
    assert result.metric == "tpr_at_fpr_0.001" and result.value > 0.5 and result.chance == 0.001
    message = str(err.value)
    assert "auto: 2 reference model(s), so every method that reads them runs" in message
    assert "5 methods ran on the same scores" in result.evidence["auto"]          # loss, LiRA, RMIA, zlib, Min-K%
    assert "TPR at FPR 0.1%" in result.evidence["auto"] and "Bonferroni" in result.evidence["auto"]
    assert result.confidence == pytest.approx(1 - 0.05 / 5)
    assert "most exposed members" in message and "sha256:" in message
    exposed, = [v for key, v in result.evidence.items() if key.startswith("most exposed members")]
    assert members[0].text not in exposed


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_no_member_control_passes_the_same_gate(lm_setup):
    model, recipe, _, unseen, population, _ = lm_setup
    # "members" the model never saw: any TPR above chance would be a false alarm
    result = assert_membership_tpr_at_most(model, unseen[1000:1100], unseen[:1000], max_tpr=0.05,
                                           references=recipe, k=2, population=population)
    assert result.passed and result.value <= 0.05
    assert result.label.startswith("LSTMLanguageModel auto:") and "5 methods ran" in result.evidence["auto"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_each_method_by_name_and_auto_without_references(lm_setup):
    model, recipe, members, unseen, population, _ = lm_setup
    loss = measure_membership(model, members, unseen[:300], method="loss")
    assert loss.evidence["attack"].startswith("loss threshold") and "asked for" in loss.evidence["why this attack"]
    auto = measure_membership(model, members, unseen[:300])        # no references: loss, zlib and Min-K% contest
    assert "reference-free statistics of a language model" in auto.evidence["why this attack"]
    assert "3 methods ran" in auto.evidence["auto"] and auto.value >= loss.value
    min_k = measure_membership(model, members, unseen[:300], method="min-k")
    assert min_k.evidence["attack"].startswith("Min-K% Prob") and min_k.value > 0.8
    lira = measure_membership(model, members, unseen[:300], method="lira", references=recipe, k=2)
    assert lira.evidence["attack"] == "LiRA (Carlini et al. 2022)"
    assert "offline, 2 reference(s)" in lira.evidence["LiRA"]
    assert lira.value > 0.8
    pairs = measure_membership(model, [(u.text, u.intent) for u in members], [u.text for u in unseen[:300]],
                               method="loss")
    assert pairs.value == pytest.approx(loss.value, rel=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_shifted_non_members_are_flagged(lm_setup):
    model, recipe, members, unseen, population, _ = lm_setup
    # "non-members" from another distribution: the held-out utterances reversed word by word
    odd = [Utterance(tuple(reversed(u.tokens)), u.tags, u.intent) for u in unseen[:200]]
    odd = [u for u in odd if u not in set(members)]
    with pytest.warns(DistributionShiftWarning, match="another distribution than members"):
        m = membership_inference(model, unseen[300:400], odd, references=recipe, k=2, population=population)
    assert m.shift and "another distribution" in m.shift


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_own_model_references_come_from_its_training_function(tmp_path):
    import torch

    from membership_own_model import bow
    from pytest_privleak.cache.targets import TargetCache
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets.own_model import train_own_model

    torch.set_num_threads(1)
    cache = TargetCache(tmp_path)
    data = generate_snips_like(n_train=150, n_valid=300, n_test=400, seed=5)
    model = train_own_model(bow.train, data, build=bow.untrained, wrap=bow.Scorer, cache=cache, epochs=200)
    recipe = TargetRecipe(data, train=bow.train, build=bow.untrained, wrap=bow.Scorer, cache=cache,
                          config={"epochs": 200})
    seen = set(data.train)
    members = list(dict.fromkeys(data.train))
    unseen = [u for u in dict.fromkeys(data.test) if u not in seen]
    result = measure_membership(model, members, unseen, references=recipe, k=2)
    assert result.label.startswith("Scorer auto:") and "3 methods ran" in result.evidence["auto"]
    assert "offline, 2 reference(s)" in result.evidence["RMIA"] and "offline, 2 reference(s)" in result.evidence["LiRA"]
    rmia = measure_membership(model, members, unseen, references=recipe, k=2, method="rmia")
    assert rmia.label.startswith("Scorer RMIA:") and result.value >= rmia.value
    assert result.value > 0.6 and result.interval[0] > 0.5


class Table:
    """A SequenceScorer reading each utterance's loss from a dict."""

    def __init__(self, losses: dict):
        self.losses = losses

    def score(self, utterances):
        return np.array([self.losses[u] for u in utterances])


def test_online_references_use_each_records_in_and_out_fits():
    # 40 candidates (20 members) + 40 population records; a record's loss is its difficulty, minus 2 in a model
    # trained on it. 4 online references on complementary halves of candidates + population.
    rng = np.random.default_rng(3)
    records = [Utterance((f"w{i}",), ("O",), "x") for i in range(80)]
    candidates, population = records[:40], records[40:]
    difficulty = dict(zip(records, rng.uniform(3.0, 20.0, 80)))
    masks = half_masks(80, 4, rng, complementary=True)
    refs = [Table({u: difficulty[u] - 2.0 * masks[j, i] + rng.normal(0, 0.1) for i, u in enumerate(records)})
            for j in range(4)]
    member = {u: i < 20 for i, u in enumerate(candidates)}
    target = Table({u: difficulty[u] - 2.0 * member.get(u, False) + rng.normal(0, 0.1) for u in records})
    reference_set = ReferenceSet(tuple(refs), tuple(records), masks, tuple(population), True, 0)
    for method in ("lira", "rmia"):
        m = membership_inference(target, candidates[:20], candidates[20:], method=method, references=reference_set)
        assert m.auc == 1.0, method
        assert "online" in m.detail["LiRA" if method == "lira" else "RMIA"]
    assert "offline a" not in membership_inference(target, candidates[:20], candidates[20:], method="rmia",
                                                   references=reference_set).detail["RMIA"]
    loss = membership_inference(target, candidates[:20], candidates[20:], method="loss")
    assert loss.auc < 0.8                                  # difficulty hides membership from the bare loss
