"""The built-in causal target (issue 20 item 1): a tiny GPT-2 pretrained on the public corpus, fine-tuned on
canary-injected data; a sequence scorer for exposure, ``model``/``tokenizer`` for generation.

The fast tests train on a small Snips-like set (200 utterances) with one pin said 10 times; the slow test is
the goal check of issue 20 on 800 utterances, side by side with the LSTM LM.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from pytest_privleak import expect_leak  # noqa: E402
from pytest_privleak.adapters import from_transformers  # noqa: E402
from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below  # noqa: E402
from pytest_privleak.cache.targets import TargetCache  # noqa: E402
from pytest_privleak.canaries import canary, custom_pattern, inject_canaries  # noqa: E402
from pytest_privleak.data.public_corpus import (causal_corpus_words, corpus_words,  # noqa: E402
                                                generate_causal_public_corpus, generate_public_corpus)
from pytest_privleak.targets import KINDS, train_target  # noqa: E402

CEILING = math.log2(10 ** 4)
SAID = canary("pin", length=4, seed=0)
UNSAID = canary("pin", length=4, seed=1)


@pytest.fixture(scope="module")
def small_data():
    from pytest_privleak.data.synthetic import generate_snips_like

    return inject_canaries(generate_snips_like(n_train=200, n_valid=20, n_test=0, seed=3), SAID, repeats=10)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("causal-cache")


@pytest.fixture(scope="module")
def small_target(small_data, cache_dir):
    torch.set_num_threads(1)
    return train_target("causal-lm", small_data, cache=TargetCache(cache_dir), progress=False)


def test_the_kind_is_registered():
    assert KINDS["causal-lm"] == "pytest_privleak.targets.causal_lm:train"


def test_the_causal_corpus_keeps_the_tiny_bert_corpus_and_adds_digit_sentences():
    # additive: the tiny BERT's corpus and vocabulary are unchanged; the causal corpus holds spaced digits
    assert generate_public_corpus(5, seed=0) == generate_public_corpus(5, seed=0)
    causal = generate_causal_public_corpus(400, seed=0)
    assert causal == generate_causal_public_corpus(400, seed=0)
    public = set(generate_public_corpus(400, seed=0))
    plain = [s for s in causal if s in public]
    assert 250 < len(plain) < 400                       # about 80 % are the tiny BERT's sentences
    numbers = [s for s in causal if sum(w.isdigit() and len(w) == 1 for w in s) >= 2]
    assert len(numbers) >= 40
    assert all(s[-1] == "." for s in causal)
    assert set(corpus_words()) <= set(causal_corpus_words())
    assert not any(s[:4] == SAID.pattern.prefix for s in causal)   # no canary prefix in public text


def test_a_pin_said_10_times_is_exposed_and_one_never_said_is_not(small_target):
    said = compute_exposure(small_target, SAID)
    unsaid = compute_exposure(small_target, UNSAID)
    assert said.method == unsaid.method == "exact"
    assert said.value > CEILING - 1.0, said
    assert unsaid.value < 6.0, unsaid


def test_side_by_side_with_the_lstm_lm_on_the_same_data(small_data, small_target):
    # the fast version of the goal: both language models rank the said pin first of 10^4 (measured: 13.29 bits
    # each) and the never-said one near chance (measured: causal 2.67, LSTM 0.22; chance 1.44)
    lstm = train_target("lstm-lm", small_data, progress=False)
    for model in (small_target, lstm):
        assert compute_exposure(model, SAID).value > CEILING - 1.0, model
        assert compute_exposure(model, UNSAID).value < 6.0, model


def test_assert_exposure_below_fails_on_the_leaking_target_and_passes_the_unsaid_pin(small_target):
    with expect_leak():
        assert_exposure_below(small_target, SAID, 6.0, name="causal said")
    assert_exposure_below(small_target, UNSAID, 6.0, name="causal unsaid")


def test_the_target_scores_as_the_adapter_of_its_model_does(small_target):
    utterances = [SAID.utterance, UNSAID.utterance]
    mine = small_target.score(utterances)
    adapter = from_transformers(small_target.model, small_target.tokenizer)
    np.testing.assert_array_equal(mine, adapter.score(utterances))
    assert mine[0] < mine[1]                      # the said pin is likelier


def test_token_log_probs_sum_to_the_score_and_scoring_ignores_the_callers_threads(small_target, small_data):
    items = list(small_data.train[:8])
    rows = small_target.token_log_probs(items)
    assert np.allclose([-r.sum() / math.log(2) for r in rows], small_target.score(items), rtol=1e-5)
    assert all((r <= 0).all() for r in rows)
    before = torch.get_num_threads()
    try:
        scores = {}
        for count in (1, 2):
            torch.set_num_threads(count)
            scores[count] = small_target.score(items)
            assert torch.get_num_threads() == count           # the caller's count is restored
        assert np.array_equal(scores[1], scores[2])            # scored with the target's own thread count
    finally:
        torch.set_num_threads(before)


def test_greedy_generation_from_the_prefix_says_the_pin(small_target):
    tok = small_target.tokenizer
    ids = torch.tensor([[tok.bos_token_id, *tok(" ".join(SAID.pattern.prefix))["input_ids"]]])
    out = small_target.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    assert tok.convert_ids_to_tokens(out[0, ids.shape[1]:].tolist()) == list(SAID.secret)


def test_the_cache_loads_the_same_target(small_data, small_target, cache_dir):
    again = train_target("causal-lm", small_data, cache=TargetCache(cache_dir), progress=False)
    assert again.loaded_from_cache and again.content_hash == small_target.content_hash
    utterances = [SAID.utterance, UNSAID.utterance]
    np.testing.assert_array_equal(again.score(utterances), small_target.score(utterances))
    assert again.describe()["kind"] == "causal-lm"


def test_same_seed_same_weights_without_a_cache(small_data):
    # pretraining and fine-tuning each twice from scratch (a small base, one epoch): bitwise the same weights
    from pytest_privleak.targets import causal_lm, tiny_gpt2

    small = tiny_gpt2.TinyGPT2Config(sentences=300, epochs=1)
    bases = [tiny_gpt2._pretrain(small, 0, "k") for _ in range(2)]
    cfg = causal_lm.CausalLMConfig(epochs=1)
    targets = [causal_lm._build(small_data, cfg, 0, torch.device("cpu"), (b.model, b.tokenizer, "k"), "key", False)
               for b in bases]
    for first, second in ((bases[0].model, bases[1].model), (targets[0].model, targets[1].model)):
        for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
            assert torch.equal(a, b), name
    assert not torch.equal(targets[0].model.transformer.wte.weight[:10], bases[0].model.transformer.wte.weight[:10])


def test_training_seeds_share_one_pretrained_base(small_data, cache_dir):
    # the public base is one model (base_seed); a second training seed fine-tunes it without pretraining again
    from pytest_privleak.targets.tiny_gpt2 import tiny_gpt2_key

    cache = TargetCache(cache_dir)
    first = train_target("causal-lm", small_data, cache=cache, progress=False, epochs=1, seed=0)
    second = train_target("causal-lm", small_data, cache=cache, progress=False, epochs=1, seed=1)
    assert first.history["base_digest"] == second.history["base_digest"] == tiny_gpt2_key(0)
    assert first.content_hash != second.content_hash
    assert not torch.equal(first.model.transformer.wte.weight, second.model.transformer.wte.weight)


def test_words_the_base_lacks_get_their_own_rows(small_data, cache_dir):
    pattern = custom_pattern("door", ("my", "zorblat", "door", "is"), tuple("0123456789"), 3, "DoorIntent")
    door = canary(pattern, seed=2)
    data = inject_canaries(small_data, door, repeats=4)
    target = train_target("causal-lm", data, progress=False, epochs=1, extra_tokens=["quuxle"],
                          cache=TargetCache(cache_dir))
    assert target.history["added_words"] == ["quuxle", "zorblat"]
    assert target.unknown_words(["zorblat", "quuxle", "my"]) == []
    assert target.unknown_words(["never-seen"]) == ["never-seen"]
    assert 0.0 <= compute_exposure(target, door).value <= math.log2(1000)


def test_a_local_causal_model_folder_is_a_base(small_data, tmp_path, cache_dir):
    from pytest_privleak.targets.tiny_gpt2 import pretrain_tiny_gpt2

    base = pretrain_tiny_gpt2(cache=TargetCache(cache_dir))
    base.model.save_pretrained(tmp_path, safe_serialization=True)
    base.tokenizer.save_pretrained(tmp_path)
    target = train_target("causal-lm", small_data, progress=False, epochs=1, base=str(tmp_path))
    assert target.history["base_source"] == str(tmp_path)
    assert "added_words" not in target.history          # a folder's tokenizer is used as it is
    assert np.isfinite(target.score([SAID.utterance])).all()


@pytest.mark.slow
def test_goal_pin_said_10_times_near_the_ceiling_beside_the_lstm_lm():
    """Issue 20's goal on 800 utterances: exact exposure of 4 pins said 10 times and 4 never said."""
    from pytest_privleak.data.synthetic import generate_snips_like

    torch.set_num_threads(1)
    said = [canary("pin", 4, seed=s) for s in range(4)]
    unsaid = [canary("pin", 4, seed=s) for s in range(4, 8)]
    data = inject_canaries(generate_snips_like(n_train=800, n_valid=80, n_test=0, seed=0), said, repeats=10)
    causal = train_target("causal-lm", data, progress=False)
    lstm = train_target("lstm-lm", data, progress=False)
    figures = {name: ([compute_exposure(m, c).value for c in said], [compute_exposure(m, c).value for c in unsaid])
               for name, m in (("causal-lm", causal), ("lstm-lm", lstm))}
    for name, (hit, miss) in figures.items():
        print(f"{name}: said {np.round(hit, 2)}  never said {np.round(miss, 2)}")
    from pytest_privleak.attacks.extraction.attack import extract_by_generation

    search = extract_by_generation(causal, said + unsaid, method="shortest-path")
    ranks = [c.rank for c in search.canaries]
    print(f"causal-lm shortest-path search, rank of the secret among 10 guesses: {ranks}")
    assert all(r is not None for r in ranks[:4]) and all(r is None for r in ranks[4:]), ranks
    hit, miss = figures["causal-lm"]
    # every said pin in the top 10 of the 10^4 candidates (measured: ranks 1-5, 11.3-13.3 bits; the LSTM LM
    # on the same data 11.3-13.3), every pin never said far from it (measured 0.7-3.6 bits; chance 1.44)
    assert min(hit) >= CEILING - math.log2(10) and np.mean(hit) > 11.5 and max(miss) < 6.0, figures


def test_the_base_it_was_fine_tuned_from_is_a_free_membership_reference(small_data, small_target, cache_dir):
    """Issue 33 item 3: the target knows its base; the base method joins auto with no reference trained."""
    from pytest_privleak.attacks.membership.attack import measure_methods
    from pytest_privleak.targets.tiny_gpt2 import pretrain_tiny_gpt2

    base = small_target.base_reference()
    pretrained = pretrain_tiny_gpt2(cache=TargetCache(cache_dir), seed=0).model
    rows = pretrained.get_input_embeddings().weight
    grown = base.scorer.model.get_input_embeddings().weight
    assert grown.shape == small_target.model.get_input_embeddings().weight.shape     # the target's tokenizer
    assert torch.equal(grown[:rows.shape[0]], rows)                                  # the pretrained rows, untouched
    assert torch.equal(grown[rows.shape[0]:], rows.mean(0).expand(grown.shape[0] - rows.shape[0], -1))
    members = list(dict.fromkeys(small_data.train))[:60]
    seen = set(small_data.train)
    from pytest_privleak.data.synthetic import generate_snips_like

    unseen = [u for u in dict.fromkeys(generate_snips_like(n_train=300, n_valid=0, n_test=0, seed=11).train)
              if u not in seen and not small_target.unknown_words(u.tokens)][:60]
    ran = measure_methods(small_target, members, unseen, exposed=0)
    assert [m.method for m in ran] == ["loss", "zlib", "min-k", "base"] and ran[-1].n_references == 0
