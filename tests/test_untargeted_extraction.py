"""Untargeted extraction (Carlini et al. 2021 §5-§6): spans by hand, the ranking, the gate end to end."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from helpers_generation import RECORDS, UNSEEN_RECORDS, leaky_gpt2, leaky_lstm
from pytest_privleak.adapters.generation import generator_for, sample
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.attacks.extraction.untargeted import (emitted_spans, outermost, span_index,
                                                           teacher_forced_log_prob, untargeted_extraction,
                                                           zlib_bits)
from pytest_privleak.attacks.extraction.untargeted_assertion import (assert_untargeted_extraction_at_most,
                                                                     measure_untargeted_extraction)
from pytest_privleak.results import expect_leak
from pytest_privleak.stats import clopper_pearson


@pytest.fixture(scope="module")
def lstm():
    torch.set_num_threads(1)
    return leaky_lstm()


def test_spans_by_hand():
    index = span_index([tuple("a b c d e".split()), tuple("x y z".split())], 3)
    assert index == {("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e"), ("x", "y", "z")}
    words = "q a b c d q x y z b c d".split()
    assert emitted_spans(words, index, 3) == [("a", "b", "c", "d"), ("x", "y", "z"), ("b", "c", "d")]
    # windows at 0 and 2 with window 1 not a training span: two spans, not one
    index2 = {("a", "b", "c"), ("c", "d", "e")}
    assert emitted_spans("a b c d e".split(), index2, 3) == [("a", "b", "c"), ("c", "d", "e")]
    assert outermost([("b", "c", "d"), ("a", "b", "c", "d"), ("x", "y", "z")]) == [("a", "b", "c", "d"),
                                                                                   ("x", "y", "z")]
    assert zlib_bits("abc abc abc") == 8 * len(zlib.compress(b"abc abc abc"))


def test_teacher_forcing_gives_the_sampled_log_probabilities(lstm):
    gen = generator_for(lstm)
    g = sample(gen, [gen.encode_prefix(())], samples=6, max_tokens=10, seed=3)
    eos = gen.eos_id
    rows = [r[:r.index(eos) + 1] if eos in r else r for r in g.ids.tolist()]
    np.testing.assert_allclose(teacher_forced_log_prob(gen, [], rows), g.log_prob.numpy(), rtol=1e-5)


def test_records_said_many_times_are_emitted_and_fail_the_gate(lstm):
    with expect_leak(match="training_spans") as caught:
        assert_untargeted_extraction_at_most(lstm, list(RECORDS), 0)
    result = caught.result
    assert result.value >= 2   # both records come out verbatim
    assert any(RECORDS[0].startswith(result.evidence[k]) or result.evidence[k] in RECORDS[0]
               for k in result.evidence if k.startswith("span"))
    k = round(result.extra["emitting_rate"] * 64)
    assert (result.extra["rate_low"], result.extra["rate_high"]) == pytest.approx(clopper_pearson(k, 64, 0.95))
    assert "zlib" in result.evidence["why"]


def test_records_never_said_pass(lstm):
    result = assert_untargeted_extraction_at_most(lstm, list(UNSEEN_RECORDS), 0)
    assert result.value == 0.0 and result.passed


def test_every_ranking_finds_the_repeated_records(lstm):
    for metric in ("perplexity", "zlib"):
        m = untargeted_extraction(lstm, list(RECORDS), metric=metric, samples=128, top=32)
        assert len(m.spans) >= 1 and m.metric == metric


def test_reference_ranking_and_its_chance_figure(lstm):
    """With a reference model the ranking is the ratio, and the chance figure is the reference's own spans."""
    result = measure_untargeted_extraction(lstm, list(RECORDS), reference=lstm, samples=64, top=16)
    assert result.evidence["metric"] == "reference"
    own = untargeted_extraction(lstm, list(RECORDS), metric="zlib", samples=64, top=16)
    assert result.chance == float(len(own.spans))


def test_samples_too_short_for_a_span_are_inconclusive(lstm):
    with expect_leak(match="raise max_tokens") as caught:
        assert_untargeted_extraction_at_most(lstm, list(UNSEEN_RECORDS), 0, max_tokens=4, min_tokens=8)
    assert caught.type is InconclusiveAuditError


def test_deterministic_with_a_seed(lstm):
    one = untargeted_extraction(lstm, list(RECORDS), samples=64, top=16, seed=5)
    two = untargeted_extraction(lstm, list(RECORDS), samples=64, top=16, seed=5)
    assert one.samples == two.samples and one.spans == two.spans


@pytest.mark.slow
def test_a_leaking_gpt2_emits_its_records_and_never_the_unseen_ones():
    model, tok = leaky_gpt2()
    with expect_leak():
        assert_untargeted_extraction_at_most(model, list(RECORDS), 0, tokenizer=tok)
    assert assert_untargeted_extraction_at_most(model, list(UNSEEN_RECORDS), 0, tokenizer=tok).value == 0.0


def test_a_hashed_target_is_not_sampled_twice(lstm, tmp_path):
    import copy

    from helpers_result_cache import active_result_cache, without_cache_line
    from pytest_privleak.cache import results as rc

    hashed = rc.mark_content_hash(copy.deepcopy(lstm), "ef" * 32)
    with active_result_cache(tmp_path / "results"):
        first = measure_untargeted_extraction(hashed, list(RECORDS), samples=32, top=8)
        again = measure_untargeted_extraction(hashed, list(RECORDS), samples=32, top=8)
        assert rc.LOADED_EVIDENCE in again.evidence and without_cache_line(again) == without_cache_line(first)
        with expect_leak(match="raise max_tokens"):
            assert_untargeted_extraction_at_most(hashed, list(UNSEEN_RECORDS), 0, max_tokens=4, min_tokens=8)
