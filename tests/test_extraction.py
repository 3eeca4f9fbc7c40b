"""Targeted extraction by generation (the Secret Sharer): the generator, the shortest-path search, the gate."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers_generation import leaky_corpus, leaky_gpt2, leaky_lstm, tiny_gpt2, word_tokenizer
from pytest_privleak.adapters.generation import (TokenGenerator, generate, generate_from_prefixes, generator_for,
                                                 sample)
from pytest_privleak.attacks.extraction.attack import extract_by_generation
from pytest_privleak.attacks.extraction.assertion import assert_extraction_at_most, measure_extraction
from pytest_privleak.attacks.extraction.search import shortest_path_search
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.results import expect_leak
from pytest_privleak.stats import clopper_pearson


@pytest.fixture(scope="module")
def lstm():
    torch.set_num_threads(1)
    return leaky_lstm()


@pytest.fixture(scope="module")
def canaries():
    _, pin, unseen = leaky_corpus()
    return pin, unseen


def all_secret_bits(lstm, pattern) -> torch.Tensor:
    """-log2 Pr(secret | prefix) of all 10^4 pins, from the network's softmax by hand (teacher forcing)."""
    vocab, net = lstm.vocab, lstm.net
    prefix = torch.tensor(vocab.token_ids(pattern.prefix))
    digits = torch.tensor(vocab.token_ids(pattern.vocabulary, strict=True))
    space = torch.cartesian_prod(*[torch.arange(10)] * 4)
    ids = torch.cat([torch.full((space.shape[0], 1), net.boundary), prefix.expand(space.shape[0], -1),
                     digits[space]], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(net.output(net.lstm(net.embedding(ids))[0]), -1)
    m = len(pattern.prefix)
    picked = logp[:, m:m + 4].gather(2, ids[:, m + 1:m + 5].unsqueeze(-1)).squeeze(-1)
    return -picked.sum(1).double() / math.log(2)


def test_shortest_path_lists_the_most_likely_secrets_in_order(lstm, canaries):
    """The search's guesses are the 10 lowest-cost pins of the whole space, costs equal to the hand sums."""
    pattern = canaries[0].pattern
    bits = all_secret_bits(lstm, pattern)
    gen = generator_for(lstm)
    found = shortest_path_search(gen, gen.encode_prefix(pattern.prefix), gen.encode_words(pattern.vocabulary), 4,
                                 guesses=10, batch=64)
    best = torch.argsort(bits, stable=True)[:10]
    expected = [tuple(int(d) for d in f"{int(i):04d}") for i in best]
    assert found.secrets == expected
    np.testing.assert_allclose(found.costs, bits[best].numpy(), rtol=1e-4)
    assert found.expansions < 1111 and not found.cut_short   # fewer than the 1 + 10 + 100 + 1000 partial pins


def test_batched_search_equals_one_at_a_time(lstm, canaries):
    gen = generator_for(lstm)
    pattern = canaries[1].pattern
    args = (gen, gen.encode_prefix(pattern.prefix), gen.encode_words(pattern.vocabulary), 4)
    one = shortest_path_search(*args, guesses=20, batch=1)
    many = shortest_path_search(*args, guesses=20, batch=256)
    assert one.secrets == many.secrets
    np.testing.assert_allclose(one.costs, many.costs, rtol=1e-5)


def test_a_leaking_lstm_fails_and_the_message_says_which_attack_ran(lstm, canaries):
    pin, _ = canaries
    with expect_leak() as caught:
        assert_extraction_at_most(lstm, pin, 0.0)
    text = str(caught.value)
    assert "shortest-path" in text and "method='auto' ran" in text and "rank 1 of 10" in text
    assert caught.value.result.value == 1.0
    assert caught.value.result.chance == pytest.approx(10 / 10 ** 4)


def test_a_secret_never_said_passes(lstm, canaries):
    _, unseen = canaries
    result = assert_extraction_at_most(lstm, unseen, 0.0)
    assert result.value == 0.0 and result.passed
    assert "not among 10 distinct guesses" in result.evidence["canary"]
    # issue 33 item 6: a pass on one canary says how little it shows
    assert "one canary, not extracted: the rate's 95% interval is 0 .. 0.975" in result.evidence["what a pass shows"]
    assert "what a pass shows" in result.explain()
    assert "what a pass shows" not in measure_extraction(lstm, list(canaries)).evidence


def test_rate_interval_and_chance_by_hand(lstm, canaries):
    result = measure_extraction(lstm, list(canaries), samples=25)
    assert result.value == 0.5 and result.interval == clopper_pearson(1, 2, 0.95)
    assert result.chance == pytest.approx(25 / 10 ** 4)
    assert result.threshold is None and result.label == f"2 canaries: {canaries[0].text!r}, ..."
    assert measure_extraction(lstm, canaries[0], name="pin x20").label == "pin x20"


def test_a_search_cut_short_is_inconclusive_not_a_pass(lstm, canaries):
    _, unseen = canaries
    with expect_leak(match="raise max_expansions") as caught:
        assert_extraction_at_most(lstm, unseen, 0.0, max_expansions=3, batch_size=1)
    assert caught.type is InconclusiveAuditError
    allowed = assert_extraction_at_most(lstm, unseen, 0.0, max_expansions=3, batch_size=1, allow_inconclusive=True)
    assert "inconclusive" in allowed.evidence


def test_a_pass_by_a_weaker_method_is_inconclusive(lstm, canaries):
    _, unseen = canaries
    with expect_leak(match="method='auto'") as caught:
        assert_extraction_at_most(lstm, unseen, 0.0, method="greedy")
    assert caught.type is InconclusiveAuditError


def test_sampling_is_deterministic_with_a_seed(lstm, canaries):
    one = extract_by_generation(lstm, list(canaries), method="sampling", samples=30, seed=4)
    two = extract_by_generation(lstm, list(canaries), method="sampling", samples=30, seed=4)
    assert [c.guesses for c in one.canaries] == [c.guesses for c in two.canaries]


def test_generate_from_prefixes_returns_a_budget_of_texts_per_prefix(lstm, canaries):
    pin, _ = canaries
    prefix = " ".join(pin.pattern.prefix)
    out = generate_from_prefixes(lstm, [prefix, pin.pattern.prefix], method="sampling", budget=7, seed=1,
                                 max_tokens=4)
    assert len(out) == 2 and all(len(rows) == 7 for rows in out)
    greedy = generate_from_prefixes(lstm, [prefix], method="greedy", max_tokens=4)
    assert greedy == [[" ".join(pin.secret)]]
    beams = generate_from_prefixes(lstm, [prefix], method="beam", budget=3, max_tokens=4)
    assert len(beams[0]) == 3


def test_sampled_log_probability_is_the_models_own(lstm):
    """The summed log-probability of a sample equals the hand teacher-forced one (unfiltered distribution)."""
    gen = generator_for(lstm)
    g = sample(gen, [gen.encode_prefix(("play",))], samples=3, max_tokens=5, seed=2)
    net, boundary = lstm.net, lstm.net.boundary
    for row, total in zip(g.ids.tolist(), g.log_prob.tolist()):
        cut = row[:row.index(boundary) + 1] if boundary in row else row
        ids = torch.tensor([[boundary] + gen.encode_prefix(("play",)) + cut])
        with torch.no_grad():
            logp = torch.log_softmax(net.output(net.lstm(net.embedding(ids))[0]), -1)[0]
        by_hand = sum(float(logp[1 + t, tok]) for t, tok in enumerate(cut))
        assert total == pytest.approx(by_hand, rel=1e-5)


def test_hf_greedy_matches_model_generate_on_ragged_prefixes():
    """Left padding and the key/value cache change nothing: our greedy tokens are model.generate's."""
    torch.manual_seed(0)
    tok = word_tokenizer("my pin code is play some music what the weather in".split() + list("0123456789"))
    model = tiny_gpt2(len(tok), seed=1).eval()
    gen = generator_for(model, tok)
    prefixes = [gen.encode_prefix(p.split()) for p in ("my pin code is", "play", "what is the weather in")]
    ours = generate(gen, prefixes, method="greedy", budget=1, max_tokens=6)
    for p, o in zip(prefixes, ours):
        ref = model.generate(torch.tensor([p]), max_new_tokens=6, do_sample=False,
                             pad_token_id=tok.pad_token_id)[0, len(p):].tolist()
        ref = ref[:ref.index(tok.eos_token_id)] if tok.eos_token_id in ref else ref
        assert o[0] == ref


@pytest.mark.slow
def test_a_leaking_gpt2_fails_and_a_secret_never_said_passes():
    model, tok = leaky_gpt2()
    _, pin, unseen = leaky_corpus()
    with expect_leak():
        assert_extraction_at_most(model, pin, 0.0, tokenizer=tok)
    assert assert_extraction_at_most(model, unseen, 0.0, tokenizer=tok).value == 0.0
    for method in ("beam", "sampling", "greedy"):
        assert measure_extraction(model, pin, tokenizer=tok, method=method).value == 1.0, method


@pytest.mark.slow
def test_the_built_in_causal_target_leaks_a_pin_said_10_times_and_not_one_never_said(tmp_path):
    """train_target('causal-lm'): the shortest-path search finds the pin said 10 times, not the one never said."""
    from pytest_privleak.cache.targets import TargetCache
    from pytest_privleak.canaries import canary, inject_canaries
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.targets import train_target

    torch.set_num_threads(1)
    said, unsaid = canary("pin", length=4, seed=0), canary("pin", length=4, seed=1)
    data = inject_canaries(generate_snips_like(n_train=200, n_valid=20, n_test=0, seed=3), said, repeats=10)
    target = train_target("causal-lm", data, cache=TargetCache(tmp_path), progress=False)
    with expect_leak(match="shortest-path"):
        assert_extraction_at_most(target, said, 0.0)
    assert assert_extraction_at_most(target, unsaid, 0.0).value == 0.0


def test_a_hashed_target_is_not_attacked_twice_and_the_verdicts_come_from_the_loaded_result(lstm, canaries,
                                                                                           tmp_path):
    import copy

    from helpers_result_cache import active_result_cache, without_cache_line
    from pytest_privleak.cache import results as rc

    pin, unseen = canaries
    hashed = rc.mark_content_hash(copy.deepcopy(lstm), "cd" * 32)
    with active_result_cache(tmp_path / "results"):
        first = measure_extraction(hashed, unseen, max_expansions=3, batch_size=1)
        again = measure_extraction(hashed, unseen, max_expansions=3, batch_size=1)
        assert rc.LOADED_EVIDENCE in again.evidence and without_cache_line(again) == first.to_json()
        with expect_leak(match="raise max_expansions") as caught:   # cut short, known from the loaded result
            assert_extraction_at_most(hashed, unseen, 0.0, max_expansions=3, batch_size=1)
        assert caught.type is InconclusiveAuditError
        with expect_leak(match="method='auto'"):
            measure_extraction(hashed, unseen, method="greedy")
            assert_extraction_at_most(hashed, unseen, 0.0, method="greedy")


class Markov:
    """A TokenGenerator whose next-token distribution depends on the last token only (a table), for hand sums."""

    eos_id = None
    vocab_size = 4

    def __init__(self, seed: int = 0):
        self.table = torch.log_softmax(torch.randn(5, 4, generator=torch.Generator().manual_seed(seed)), -1)

    def encode_prefix(self, words):
        return [int(w) for w in words]

    def encode_words(self, words):
        return [[int(c) for c in w] for w in words]

    def decode(self, ids):
        return [str(i) for i in ids]

    def start(self, prefixes):
        last = torch.tensor([p[-1] if p else 4 for p in prefixes])
        return self.table[last], last

    def step(self, state, tokens):
        return self.table[tokens], tokens

    def select(self, state, rows):
        return state[rows]


def test_search_over_words_of_several_pieces_is_exact():
    """Words '0', '12', '3' (the middle one two pieces): all 27 three-word secrets listed in hand-summed order."""
    gen = Markov()
    words = ["0", "12", "3"]
    pieces = gen.encode_words(words)

    def bits(secret):
        last, total = 2, 0.0           # the prefix is the token 2
        for w in secret:
            for t in pieces[w]:
                total -= float(gen.table[last, t])
                last = t
        return total / math.log(2)

    space = [(a, b, c) for a in range(3) for b in range(3) for c in range(3)]
    found = shortest_path_search(gen, [2], pieces, 3, guesses=27, batch=4)
    assert sorted(found.secrets) == space      # each once (a Markov table ties reordered words: order by cost)
    np.testing.assert_allclose(found.costs, sorted(bits(s) for s in space), rtol=1e-5)
    np.testing.assert_allclose(found.costs, [bits(s) for s in found.secrets], rtol=1e-5)
    assert isinstance(gen, TokenGenerator)


def test_beam_search_with_every_beam_is_the_exact_ranking():
    """With beams >= |V|^(T-1) nothing is pruned: beam order is the hand ranking of all |V|^T continuations."""
    from pytest_privleak.adapters.generation import beam_search

    gen = Markov(seed=1)
    g = beam_search(gen, [[1]], beams=16, max_tokens=2)
    every = [(a, b) for a in range(4) for b in range(4)]
    total = {s: float(gen.table[1, s[0]] + gen.table[s[0], s[1]]) for s in every}
    expected = sorted(every, key=lambda s: -total[s])[:16]
    assert [tuple(r) for r in g.ids.tolist()] == expected
    np.testing.assert_allclose(g.log_prob.numpy(), [total[s] for s in expected], rtol=1e-6)


def test_top_k_and_nucleus_filters_by_hand():
    from pytest_privleak.adapters.generation import filter_top_k_top_p

    lp = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    keep = lambda out: torch.isfinite(out)[0].tolist()  # noqa: E731
    assert keep(filter_top_k_top_p(lp, 2, None)) == [True, True, False, False]
    assert keep(filter_top_k_top_p(lp, None, 0.8)) == [True, True, False, False]    # 0.5 + 0.3 reaches 0.8
    assert keep(filter_top_k_top_p(lp, None, 0.81)) == [True, True, True, False]
    assert keep(filter_top_k_top_p(lp[:, [3, 1, 0, 2]], None, 0.5)) == [False, False, True, False]


def test_the_transformers_adapter_generates_as_its_model():
    """A wrapper holding .model and .tokenizer (from_transformers' causal-LM scorer) generates as the pair."""
    from pytest_privleak.adapters import from_transformers

    tok = word_tokenizer("my pin code is play".split() + list("0123456789"))
    model = tiny_gpt2(len(tok), seed=2).eval()
    direct = generate_from_prefixes(model, ["my pin code is"], method="beam", budget=3, max_tokens=4, tokenizer=tok)
    wrapped = generate_from_prefixes(from_transformers(model, tok), ["my pin code is"], method="beam", budget=3,
                                     max_tokens=4)
    assert direct == wrapped and len(direct[0]) == 3
