"""Sampled exposure never passes its space's ceiling, and a sampled PII exposure pass is inconclusive (review M3).

By hand: a 2-digit pin has |R| = 100 secrets, so no exposure exceeds log2 100 = 6.644 bits. Before, 1000
references drawn WITH replacement from the 99 other secrets ranked a memorised canary 1st of 1000 and read
log2 1000 = 9.966 bits. Now references are distinct: 1000 >= 99 means every other secret, so the space is scored
whole and the figure is the exact log2 100 - log2 1 = 6.644; 40 references are 40 distinct secrets, and a canary
first among them reads log2 40 = 5.322 (ceiling log2 40). The PII name space {anna, ravi} x {berg, shah} has 4
strings: "anna berg" ranked 1st reads log2 4 = 2 bits exactly, not log2 100 = 6.64.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_privleak.attacks.exposure.attack import compute_exposure, distinct_references, sampled_from_scores
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.attacks.extraction.pii.attack import audit_pii
from pytest_privleak.attacks.extraction.pii.assertion import assert_pii_exposure_below, assert_pii_extraction_at_most
from pytest_privleak.canaries import canary
from pytest_privleak.data.pii_detectors import AddressDetector, NameListDetector
from pytest_privleak.results import expect_leak

PIN2 = canary("pin", length=2, seed=1)      # 100 secrets
NAMES = NameListDetector(["anna", "ravi"], ["berg", "shah"])
TEXTS = ["the holder is anna berg", "the holder is anna berg", "deliver to 4 1 7 maple lane today",
         "my order arrived damaged"]


class Memorised:
    """Lower = likelier: the canary's sentence scores 0, every other sentence 1 + a spread by its text."""

    def score(self, utterances):
        return np.array([0.0 if u.text == PIN2.text else 1.0 + sum(map(ord, u.text)) % 97 / 97
                         for u in utterances])


class HammingScorer:
    """The house number 417 and the name "anna berg" are their spaces' likeliest strings (rank 1)."""

    def score(self, utterances):
        out = []
        for u in utterances:
            if "maple lane" in u.text:
                digits = u.text.split("to ")[1].split(" maple")[0].split()
                out.append(sum(a != b for a, b in zip(digits, "417")))
            else:
                out.append(0.0 if "anna berg" in u.text else 1.0)
        return np.asarray(out, dtype=np.float64)


def test_distinct_references_by_hand():
    rng = np.random.default_rng(0)
    assert distinct_references(rng, 3, 1, 2) is None and distinct_references(rng, 3, 1, 5) is None
    assert distinct_references(rng, 3, 1, 1)[0] in (0, 2)
    for references in (30, 60):       # the rejection path (30 of 99) and the permutation path (60 of 99)
        refs = distinct_references(np.random.default_rng(3), 100, 42, references)
        assert refs.size == references == np.unique(refs).size
        assert 42 not in refs and refs.min() >= 0 and refs.max() <= 99


def test_a_space_far_larger_than_the_references_draws_what_it_drew_before():
    old = np.random.default_rng(7).integers(0, 10 ** 12 - 1, size=64, dtype=np.int64)
    old = old + (old >= 5)
    assert np.array_equal(distinct_references(np.random.default_rng(7), 10 ** 12, 5, 64), old)


@pytest.mark.parametrize("method", ["sampled", "extrapolated"])
def test_more_references_than_secrets_scores_the_space_whole(method):
    e = compute_exposure(Memorised(), PIN2, method=method, references=1000)
    assert e.method == "exact" and e.rank == 1 and e.space_size == 100
    assert e.value == pytest.approx(math.log2(100)) and e.ceiling == pytest.approx(math.log2(100))
    assert "every secret was scored" in e.evidence["why exact"]


def test_fewer_references_than_secrets_are_distinct_and_the_ceiling_is_theirs():
    e = compute_exposure(Memorised(), PIN2, method="sampled", references=40)
    assert (e.method, e.rank, e.n_references) == ("sampled", 1, 40)
    assert e.value == pytest.approx(math.log2(40)) and e.ceiling == pytest.approx(math.log2(40))


def test_sampled_from_scores_refuses_more_references_than_other_secrets():
    with pytest.raises(ValueError, match="at most 99 distinct secrets besides the canary"):
        sampled_from_scores(0.0, np.ones(100), 100)


def test_pii_name_space_of_four_reads_at_most_two_bits():
    audit = audit_pii(HammingScorer(), TEXTS, [NAMES, AddressDetector()], method="sampled", references=100,
                      show_pii=True)
    by_text = {f.item.text: f.exposure for f in audit.figures}
    assert by_text["anna berg"].method == "exact" and by_text["anna berg"].value == pytest.approx(2.0)
    address = by_text["4 1 7 maple lane"]      # 1000 house numbers: 100 distinct references, ranked 1st
    assert (address.method, address.rank, address.n_references) == ("sampled", 1, 100)
    assert address.value == pytest.approx(math.log2(100))


def test_sampled_pii_exposure_within_the_limit_is_inconclusive_as_for_a_canary():
    # auto scores the 1000 house numbers and fails at log2 1000 = 9.97 > 8; sampled reads 6.64 under the limit
    with expect_leak(match="violates the limit"):
        assert_pii_exposure_below(HammingScorer(), TEXTS, 8.0, [NAMES, AddressDetector()])
    with expect_leak(match="INCONCLUSIVE") as caught:
        assert_pii_exposure_below(HammingScorer(), TEXTS, 8.0, [NAMES, AddressDetector()], method="sampled",
                                  references=100)
    assert caught.type is InconclusiveAuditError
    assert "1 of 2 item(s) were ranked among sampled references" in str(caught.value)
    assert "exact_budget >= 1,000" in str(caught.value)
    allowed = assert_pii_exposure_below(HammingScorer(), TEXTS, 8.0, [NAMES, AddressDetector()], method="sampled",
                                        references=100, allow_inconclusive=True)
    assert allowed.passed and "accepted (allow_inconclusive=True)" in allowed.evidence["inconclusive"]


def test_sampled_rank_cannot_hide_an_extraction_so_the_share_stays_conclusive():
    with expect_leak(match="pii_extraction"):
        assert_pii_extraction_at_most(HammingScorer(), TEXTS, 0.5, [NAMES, AddressDetector()], extraction="rank",
                                      method="sampled", references=100)


def test_allow_inconclusive_must_be_a_bool():
    with pytest.raises(ValueError, match="allow_inconclusive must be True or False"):
        assert_pii_exposure_below(HammingScorer(), TEXTS, 8.0, [NAMES, AddressDetector()], allow_inconclusive=1)
