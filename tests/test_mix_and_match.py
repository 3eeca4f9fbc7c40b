"""Mix And Match (mix-and-match-text-classifiers §4.3) on the project's tiny BERT, CPU, end to end.

One classifier is fine-tuned (cached by content hash) from the tiny BERT on
the Snips-like intents with five organic canaries "i bought new <thing> ."
that differ by the target alone and carry contradicting labels (§5.3), each
repeated 10 times: a canary in the training data ranks near the top and fails
the gate, one never injected passes, and Mix And Match reaches the
exhaustive search's rank while pruning far fewer candidates (both printed).
"""
from __future__ import annotations

import math

import pytest
import torch

from pytest_privleak.attacks.mix_and_match.attack import frankenstein, mid_rank, mix_and_match
from pytest_privleak.attacks.mix_and_match.assertion import (assert_mix_and_match_rank_at_least,
                                                             measure_mix_and_match)
from pytest_privleak.attacks.mix_and_match.canaries import (contradicting_canaries, inject_mask_canaries,
                                                            mask_canary, organic_canary, random_canary)
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak import expect_leak

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
CANARIES = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
TOWELS = CANARIES[0]
NEVER = mask_canary("i bought new umbrella .", "AddToPlaylist")    # never in the training data


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=800, n_valid=100, n_test=100)


@pytest.fixture(scope="module")
def model(data, privleak_cache):
    torch.set_num_threads(1)
    from pytest_privleak.targets import train_target

    injected = inject_mask_canaries(data, CANARIES, repeats=10)
    # no early stopping: the test needs a model that memorised its canaries
    return train_target("transformer-classifier", injected, cache=privleak_cache, early_stopping=False)


def test_mid_rank_by_hand():
    scores = torch.tensor([0.5, 0.1, 0.5, 0.9, 0.5])
    assert mid_rank(scores, 0, lower_is_better=True) == (3.0, 2, 4)     # one lower, two tied
    assert mid_rank(scores, 3, lower_is_better=True) == (5.0, 5, 5)
    assert mid_rank(scores, 3, lower_is_better=False) == (1.0, 1, 1)


def test_frankenstein_joins_fine_tuned_encoder_and_base_head(model):
    franken = frankenstein(model.classifier, model.generator)
    enc = franken.base_model.embeddings.word_embeddings.weight
    assert torch.equal(enc, model.classifier.base_model.embeddings.word_embeddings.weight)
    assert torch.equal(franken.get_output_embeddings().weight, model.generator.get_output_embeddings().weight)
    assert not torch.equal(franken.get_output_embeddings().weight, enc)   # fine-tuning moved the embeddings


def test_repeated_canary_ranks_first_and_fails(model):
    with expect_leak() as info:
        assert_mix_and_match_rank_at_least(model, TOWELS, min_rank=10, name="towels")
    result = info.value.result
    print("\n" + result.explain())
    assert result.value == 1.0
    assert result.extra["exposure_bits"] == pytest.approx(math.log2(result.extra["vocabulary"]), rel=1e-9)
    message = str(info.value)
    for part in ("rank = 1", "threshold  : at least 10", "chance", "towels", "remedy", "exhaustive search"):
        assert part in message


def test_never_injected_canary_ranks_near_chance_and_passes(model):
    result = assert_mix_and_match_rank_at_least(model, NEVER, min_rank=10, name="never injected")
    print("\n" + result.explain())
    assert result.value > result.extra["vocabulary"] / 4


def test_mix_and_match_needs_far_fewer_candidates(model):
    exhaustive = mix_and_match(model, TOWELS, method="exhaustive").rankings[0]
    runs = {}
    for generator in ("base", "frankenstein"):
        needed = math.ceil(mix_and_match(model, TOWELS, generator=generator).rankings[0].candidates_needed)
        runs[generator] = mix_and_match(model, TOWELS, method="mix-and-match", budget=needed,
                                        generator=generator).rankings[0]
    print(f"\nexhaustive: rank {exhaustive.rank:g} after scoring {exhaustive.scored} candidates "
          f"({exhaustive.seconds:.2f}s)")
    for generator, mm in runs.items():
        print(f"Mix And Match ({generator} LM candidates): rank {mm.rank:g} after scoring {mm.scored} candidates "
              f"({mm.seconds:.2f}s): {exhaustive.scored / mm.scored:.1f}x fewer")
        assert mm.rank == exhaustive.rank == 1.0
    # on the tiny BERT, fine-tuning at lr 1e-3 moves the encoder away from the base head, so the pretrained LM
    # proposes the secret far earlier than the Frankenstein model (§5.2 compares both; .notes/mix_and_match.md)
    assert exhaustive.scored / runs["base"].scored >= 10
    assert runs["frankenstein"].scored < exhaustive.scored


def test_top_k_accuracy_over_canaries_with_chance(model):
    result = measure_mix_and_match(model, [*CANARIES, NEVER], top_k=5, name="six canaries")
    print("\n" + result.explain())
    assert result.verdict == "measured" and result.label == "six canaries"
    hits = result.extra["top5_accuracy"] * 6
    assert hits >= 4                                   # the injected ones, against a chance of 5 / |V|
    assert result.extra["top5_chance"] == pytest.approx(5 / result.extra["vocabulary"])
    assert result.extra["top5_ci_low"] < hits / 6 < result.extra["top5_ci_high"]


def test_same_numbers_twice(model):
    first = mix_and_match(model, [TOWELS, NEVER]).rankings
    second = mix_and_match(model, [TOWELS, NEVER]).rankings
    assert [(r.rank, r.candidates_needed) for r in first] == [(r.rank, r.candidates_needed) for r in second]


def test_band_canaries_use_training_words(data):
    low = organic_canary(data, "RateBook", frequency="low", seed=1)
    high = random_canary(data, "PlayMusic", frequency="high", seed=2)
    counts = {t for u in data.train for t in u.tokens}
    assert low.tokens[-1] == "." and low.position == len(low.tokens) - 2 and low.target in counts
    assert len(high.tokens) == 6 and all(t in counts for t in high.tokens[:-1])


def test_tied_generator_scores_do_not_lose_the_secret(model, monkeypatch):
    """Every candidate tied in the generator's logits: the mid-rank is half the vocabulary and the attack runs."""
    from pytest_privleak.attacks.mix_and_match.attack import MixAndMatchModel, as_attack_model

    attack = as_attack_model(model)
    monkeypatch.setattr(MixAndMatchModel, "generation_scores",
                        lambda self, ids, position, generator="frankenstein": torch.zeros(len(self.candidate_ids)))
    ranking = mix_and_match(attack, TOWELS).rankings[0]
    assert ranking.candidates_needed == (ranking.vocabulary + 1) / 2
    assert ranking.rank == 1.0 and ranking.mix_and_match_rank == 1.0


# --------------------------------------------------------------------------- exposure from the rank (§4.3, [5])

def _ranking(method: str, rank: float, rank_range: tuple[int, int], scored: int, vocabulary: int = 512):
    from pytest_privleak.attacks.mix_and_match.attack import CanaryRanking

    return CanaryRanking(TOWELS, method, rank, rank_range, vocabulary, 1.0, scored, None, None, ())


@pytest.mark.parametrize("method, rank, rank_range, scored, bits, low", [
    # exhaustive search, |V| = 512 = 2^9: exact figures, ties counted against the secret
    ("exhaustive", 1.0, (1, 1), 512, 9.0, 9.0),                      # first: log2 512 - log2 1
    ("exhaustive", 3.5, (3, 4), 512, 7.0, 7.0),                      # tied 3rd..4th: rank 4 -> 9 - 2
    ("exhaustive", 512.0, (512, 512), 512, 0.0, 0.0),                # last
    ("exhaustive", 256.5, (1, 512), 512, 0.0, 0.0),                  # every token tied: no exposure
    # Mix And Match pruned 64 candidates: rank 2 among them -> at most 9 - 1 = 8 bits; at worst the
    # 448 unscored tokens all beat it, rank 450 -> log2(512 / 450) bits
    ("mix-and-match", 2.0, (2, 2), 64, 8.0, math.log2(512 / 450)),
    # not among the 63 pruned: rank >= 64 -> at most 9 - 6 = 3 bits, at least 0
    ("mix-and-match", math.inf, (64, 512), 63, 3.0, 0.0),
])
def test_exposure_from_the_rank_by_hand(method, rank, rank_range, scored, bits, low):
    r = _ranking(method, rank, rank_range, scored)
    assert r.exposure == pytest.approx(bits, rel=1e-12, abs=1e-12)
    assert r.exposure_interval == pytest.approx((low, bits), rel=1e-12, abs=1e-12)


def test_exposure_gate_fails_on_the_repeated_canary(model):
    from pytest_privleak.attacks.exposure.assertion import assert_exposure_below

    with expect_leak() as info:
        assert_exposure_below(model, TOWELS, max_bits=4.0, name="towels exposure")
    result = info.value.result
    print("\n" + result.explain())
    vocabulary = result.extra["vocabulary"]
    # rank 1 of the vocabulary (the rank gate's test above): exposure log2 |V|, the ceiling
    assert result.value == pytest.approx(math.log2(vocabulary), rel=1e-12)
    assert result.name == "exposure.exposure_bits" and result.label == "towels exposure"
    assert result.ceiling == pytest.approx(math.log2(vocabulary), rel=1e-12)
    assert 1.3 < result.chance < math.log2(math.e)                   # uniform rank over |V| tokens
    assert result.evidence["method"] == "exhaustive"
    assert result.interval == (result.value, result.value)
    # the message says how the word was ranked, not "sampled references" of a generative canary
    assert "whole-word candidates" in result.evidence["rank"] and "sampled" not in info.value.args[0]


def test_exposure_gate_passes_a_never_injected_canary(model):
    from pytest_privleak.attacks.exposure.attack import compute_exposure
    from pytest_privleak.attacks.exposure.assertion import assert_exposure_below

    result = assert_exposure_below(model, NEVER, max_bits=4.0, name="never injected exposure")
    print("\n" + result.explain())
    m = compute_exposure(model, NEVER)
    # the figure is the Secret Sharer's formula on the rank that the exhaustive search found
    assert result.value == pytest.approx(math.log2(m.space_size) - math.log2(m.rank), rel=1e-12)
    assert result.value < 4.0 and m.rank > m.space_size / 4


def test_exposure_by_the_paper_attack_bounds_the_exact_figure(model):
    """method='mix-and-match' prunes the generator's top `references` candidates: an upper bound on the exact."""
    from pytest_privleak.attacks.exposure.attack import compute_exposure

    exact = compute_exposure(model, NEVER, method="exact")
    pruned = compute_exposure(model, NEVER, method="mix-and-match", references=50)
    assert pruned.method == "mix-and-match" and pruned.n_references == 50
    assert pruned.interval[0] <= exact.value <= pruned.value == pruned.interval[1]
    # umbrella is the Frankenstein model's 136th candidate: not among the 50 pruned, so rank >= 51
    assert pruned.rank is None and pruned.interval[0] == 0.0
    assert pruned.value == pytest.approx(math.log2(pruned.space_size / 51), rel=1e-12)
    leak = compute_exposure(model, TOWELS, method="mix-and-match", references=300)
    assert leak.value == pytest.approx(math.log2(leak.space_size), rel=1e-12)   # found first among them


def test_the_rank_gate_tolerates_one_place_against_a_baseline():
    """Built-in tolerance of mix-and-match.rank: one place (a tie broken the other way); exposure keeps 1 bit."""
    from pytest_privleak.report.gate import compare, tolerance_for

    assert tolerance_for({"attack": "mix-and-match", "metric": "rank", "tolerance": None}, {}) == 1.0
    assert tolerance_for({"attack": "exposure", "metric": "exposure_bits", "tolerance": None}, {}) == 1.0

    def report(*values):
        return {"tests": [{"nodeid": f"t::{i}", "results": [
            {"key": f"t::{i}::mix-and-match.rank[c]", "attack": "mix-and-match", "metric": "rank", "value": v,
             "direction": "at_least", "label": "c", "tolerance": None}]} for i, v in enumerate(values)]}

    gate = compare(report(2.0, 1.5, 300.0), report(3.0, 3.0, 302.0), {}, "base.json")
    # 3 -> 2 (one place) and 302 -> 300 (two places) are compared; only the two-place losses regress
    assert sorted(c["key"] for c in gate["regressions"]) == ["t::1::mix-and-match.rank[c]",
                                                             "t::2::mix-and-match.rank[c]"]


def _held_out_mlm_loss(franken, tokenizer, sentences) -> float:
    """Masked-LM loss of ``franken`` on ``sentences`` with one fixed BERT masking (eval mode)."""
    from pytest_privleak.targets.tiny_bert import mask_tokens

    enc = tokenizer([list(s) for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    special = torch.isin(enc["input_ids"], torch.tensor(tokenizer.all_special_ids)) | (enc["attention_mask"] == 0)
    inputs, labels = mask_tokens(enc["input_ids"], special, len(tokenizer), 0.15, torch.Generator().manual_seed(9))
    with torch.no_grad():
        return float(franken(input_ids=inputs, attention_mask=enc["attention_mask"], labels=labels).loss)


def test_head_refit_on_public_sentences_fits_the_fine_tuned_encoder(model):
    """§4.3.1's option: the head re-fit on public text, encoder frozen; same numbers twice."""
    from pytest_privleak.attacks.mix_and_match.attack import mix_and_match_model
    from pytest_privleak.data.public_corpus import generate_public_corpus

    public, held_out = generate_public_corpus(400, seed=5), generate_public_corpus(200, seed=6)
    plain = mix_and_match_model(model.classifier, model.generator, model.tokenizer)
    refit = mix_and_match_model(model.classifier, model.generator, model.tokenizer, refit_on=public)
    again = mix_and_match_model(model.classifier, model.generator, model.tokenizer, refit_on=public)
    assert plain.refit_losses == [] and len(refit.refit_losses) == 2 and refit.refit_losses == again.refit_losses
    encoder = {k: v for k, v in model.classifier.base_model.state_dict().items() if not k.startswith("pooler.")}
    for name, tensor in refit.frankenstein.base_model.state_dict().items():
        assert torch.equal(tensor, encoder[name]), name                   # the encoder stays the fine-tuned one
    assert not torch.equal(refit.frankenstein.get_output_embeddings().weight,
                           plain.frankenstein.get_output_embeddings().weight)
    before = _held_out_mlm_loss(plain.frankenstein, model.tokenizer, held_out)
    after = _held_out_mlm_loss(refit.frankenstein, model.tokenizer, held_out)
    print(f"\nheld-out masked-LM loss of the Frankenstein model: base head {before:.3f}, re-fit head {after:.3f}")
    assert after < before
    assert not any(p.requires_grad for p in refit.frankenstein.parameters())


def test_the_rank_is_loaded_from_the_result_cache_the_second_time(model, tmp_path):
    """A classifier from train_target carries its content hash: the same call is answered from the result cache,
    with the new call's limit and the same message but for the line saying so."""
    from helpers_result_cache import active_result_cache, drop_cache_line, leak_message

    with active_result_cache(tmp_path / "results") as cache:
        computed, loaded = (leak_message(lambda: assert_mix_and_match_rank_at_least(model, TOWELS, min_rank=10,
                                                                                    name="towels"))
                            for _ in range(2))
        passed = assert_mix_and_match_rank_at_least(model, TOWELS, min_rank=1, name="towels")
        assert len(cache.stored) == 1 and len(cache.loaded) == 2 and passed.threshold == 1.0
    assert "loaded from the result cache" in loaded and "loaded from the result cache" not in computed
    assert drop_cache_line(loaded) == computed


def test_the_base_masked_lm_is_the_classifiers_free_membership_reference(model, data):
    """Issue 33 item 3: the transformer classifier's base (its generator) joins auto as the ``base`` method,
    comparing the Frankenstein model's masked-piece predictions with the base's; no reference is trained."""
    import numpy as np

    from pytest_privleak.attacks.membership.attack import measure_methods

    base = model.base_reference()
    assert base.model is model.generator
    records = list(dict.fromkeys(data.train))[:40]
    (logp, hit), = model.token_predictions(records[:1])
    (base_logp, base_hit), = base.token_predictions(records[:1])
    assert logp.shape == base_logp.shape == hit.shape and logp.size >= len(records[0].tokens) - 1
    assert hit.dtype == np.bool_
    assert not np.array_equal(logp, base_logp)                 # the fine-tuned encoder moved the predictions
    # the pieces' log-probabilities sum to the pseudo-log-likelihood the masked-LM scorer reads (bits)
    assert -base_logp.sum() / np.log(2) == pytest.approx(base.score(records[:1])[0], rel=1e-6)
    unseen = [u for u in dict.fromkeys(data.test) if u not in set(data.train)][:40]
    ran = measure_methods(model, records, unseen, exposed=0)
    assert [m.method for m in ran] == ["loss", "base"] and ran[-1].n_references == 0
