"""Untargeted extraction finds training records shorter than ``min_tokens`` whole (review M2).

Before, only ``min_tokens``-word windows inside one record were indexed, so a model reciting every 6-word NLU
record back to back emitted 0 spans under the default ``min_tokens=8`` and passed as a complete run.
The models here are fake token generators that recite a fixed word stream from any start: no training, fast.
"""
from __future__ import annotations

import pytest
import torch

from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.attacks.extraction.untargeted import emitted_records, untargeted_extraction, whole_record_index
from pytest_privleak.attacks.extraction.untargeted_assertion import (assert_untargeted_extraction_at_most,
                                                                     measure_untargeted_extraction)
from pytest_privleak.results import expect_leak

RECORDS = ["call my mother at five pm", "my pin is three one four", "book a table for two tonight",
           "wake me up at seven am"]           # short NLU utterances, 6 words each
OTHER = ["turn the kitchen lights off now", "what is the weather in oslo", "play some jazz in the car",
         "remind me to buy milk today"]        # 6-word records the reciter never says


class Reciter:
    """A TokenGenerator that says ``stream`` word after word from any start (log-prob 0 for the next word)."""

    eos_id = None

    def __init__(self, texts):
        self.stream = " ".join(texts).split()
        self.words = sorted(set(self.stream) | {w for t in RECORDS + OTHER for w in t.split()})
        self.vocab_size = len(self.words)

    def encode_prefix(self, words):
        return [self.words.index(w) for w in words]

    def encode_words(self, words):
        return [[self.words.index(w)] for w in words]

    def decode(self, ids):
        return [self.words[i] for i in ids]

    def _lp(self, pos):
        lp = torch.full((len(pos), self.vocab_size), -30.0)
        for r, p in enumerate(pos):
            lp[r, self.words.index(self.stream[p % len(self.stream)])] = 0.0
        return torch.log_softmax(lp, -1)

    def start(self, prefixes):
        pos = [0] * len(prefixes)
        return self._lp(pos), pos

    def step(self, state, tokens):
        pos = [p + 1 for p in state]
        return self._lp(pos), pos

    def select(self, state, rows):
        return [state[int(r)] for r in rows]


def test_whole_records_by_hand():
    records = [tuple("a b c d".split()), tuple("x y".split()), tuple("p q r s t u v w".split())]
    index = whole_record_index(records, min_tokens=8, min_record_tokens=2)
    assert index == {4: {("a", "b", "c", "d")}, 2: {("x", "y")}}     # the 8-word record goes by its windows
    assert emitted_records("z x y a b c d x".split(), index) == [("x", "y"), ("a", "b", "c", "d")]
    assert emitted_records("a b c x".split(), index) == []           # a part of a record is not the record
    assert whole_record_index(records, min_tokens=8, min_record_tokens=3) == {4: {("a", "b", "c", "d")}}


def test_a_model_reciting_every_short_record_fails():
    with expect_leak(match="training_spans") as caught:
        assert_untargeted_extraction_at_most(Reciter(RECORDS), RECORDS, 0, samples=8, top=8, max_tokens=24)
    result = caught.result
    assert result.value == 4.0   # each of the 4 records once, however often it is said
    assert {result.evidence[f"span {i}"] for i in range(1, 5)} == set(RECORDS)
    assert "4 of 4-7 words found whole, 0 shorter than 4 words" in result.evidence["records"]


def test_a_model_reciting_other_short_texts_passes_complete():
    result = assert_untargeted_extraction_at_most(Reciter(OTHER), RECORDS, 0, samples=8, top=8, max_tokens=24)
    assert result.passed and result.value == 0.0 and "inconclusive" not in result.evidence


def test_records_too_short_to_find_make_a_pass_inconclusive_and_are_counted():
    tiny = ["yes", "no thanks", "cancel that", "call mum"] + RECORDS[:1]   # 4 of 5 shorter than 4 words
    with expect_leak(match="4 of the 5 training records are shorter than min_record_tokens=4") as caught:
        assert_untargeted_extraction_at_most(Reciter(OTHER), tiny, 0, samples=8, top=8, max_tokens=24)
    assert caught.type is InconclusiveAuditError
    allowed = assert_untargeted_extraction_at_most(Reciter(OTHER), tiny, 0, samples=8, top=8, max_tokens=24,
                                                   allow_inconclusive=True)
    assert allowed.passed and allowed.target["records_unfindable"] == 4
    m = untargeted_extraction(Reciter(tiny), tiny, samples=4, top=4, max_tokens=24, min_record_tokens=2)
    assert sorted(" ".join(s) for s in m.spans) == ["call mum", "call my mother at five pm", "cancel that",
                                                    "no thanks"]


def test_measure_reports_the_records_it_can_and_cannot_find():
    result = measure_untargeted_extraction(Reciter(OTHER), RECORDS + ["ok"] + ["a b c d e f g h i"], samples=4,
                                           top=4, max_tokens=12)
    assert result.evidence["records"] == ("6 training record(s): 1 of >= 8 words found by their 8-word windows, "
                                          "4 of 4-7 words found whole, 1 shorter than 4 words that cannot be found")


@pytest.mark.parametrize("value, match", [(0, "min_record_tokens must be an integer >= 1"),
                                          (9, "min_record_tokens=9 is above min_tokens=8"),
                                          (2.0, "min_record_tokens must be an integer")])
def test_bad_min_record_tokens(value, match):
    with pytest.raises(ValueError, match=match):
        measure_untargeted_extraction(Reciter(RECORDS), RECORDS, min_record_tokens=value)


def test_min_record_tokens_equal_to_min_tokens_finds_no_short_record_and_says_so():
    result = measure_untargeted_extraction(Reciter(RECORDS), RECORDS, samples=4, top=4, max_tokens=12,
                                           min_record_tokens=8)
    assert result.value == 0.0 and "whole records" not in result.evidence["procedure"]
    assert result.evidence["records"] == ("4 training record(s): 0 of >= 8 words found by their 8-word windows, "
                                          "none found whole, 4 shorter than 8 words that cannot be found")
    with expect_leak(match="4 of the 4 training records are shorter than min_record_tokens=8"):
        assert_untargeted_extraction_at_most(Reciter(RECORDS), RECORDS, 0, samples=4, top=4, max_tokens=12,
                                             min_record_tokens=8)
