"""Inconclusive is not a pass for exposure (issue 23 item 4) and an infinite limit is no limit (item 5).

A sampled exposure ranks the canary among a few references: its ceiling is ``log2`` of their number, so a
memorised canary in a space the default scores in full (<= 2^22 secrets) passed a limit above that ceiling.
"""
import math

import pytest
import torch

from pytest_privleak.attacks.exposure.attack import DEFAULT_EXACT_BUDGET
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below
from pytest_privleak.attacks.inconclusive import InconclusiveAuditError
from pytest_privleak.canaries import canary
from pytest_privleak.targets.vocab import Vocabulary
from pytest_privleak import expect_leak

PIN = canary("pin", 3, seed=4)  # 1,000 secrets: the default scores every one


class Memorised:
    """A scorer that gives the canary's secret the best (lowest) score: exposure log2(1000) = 9.97 bits."""

    def __init__(self, memorised=True):
        tokens = (*PIN.pattern.prefix, *PIN.pattern.vocabulary)
        self.vocab = Vocabulary(("<pad>", "<unk>", *sorted(set(tokens))), ("<pad>", "<unk>"),
                                tuple(sorted(set(PIN.tags))), (PIN.intent,))
        self.secret = torch.tensor(self.vocab.token_ids(PIN.tokens, strict=True), dtype=torch.float64)
        self.memorised = memorised

    def score_token_ids(self, ids, intent, tags):
        distance = (ids.double() - self.secret).abs().sum(dim=1)
        return distance if self.memorised else -distance  # not memorised: the canary is the least likely


def test_sampled_exposure_under_its_ceiling_is_inconclusive_where_the_default_is_exhaustive():
    with expect_leak() as info:
        assert_exposure_below(Memorised(), PIN, 6.0, method="sampled", references=16)
    assert info.type is InconclusiveAuditError
    head = str(info.value).splitlines()[0]
    assert "INCONCLUSIVE, not a pass" in head and "method='sampled'" in head and "1,000 secrets" in head
    assert "exact_budget >= 1,000" in head and "allow_inconclusive=True" in head
    assert info.value.result.value <= 6.0 and info.value.result.target["inconclusive"] is True


def test_the_default_scores_every_secret_and_finds_the_leak():
    with expect_leak() as info:
        assert_exposure_below(Memorised(), PIN, 6.0)
    assert not isinstance(info.value, InconclusiveAuditError)
    assert info.value.result.value == pytest.approx(math.log2(1000)) and info.value.result.evidence["method"] == "exact"


@pytest.mark.parametrize("method", ["sampled", "extrapolated"])
def test_allow_inconclusive_accepts_a_sampled_figure_and_says_so(method):
    res = assert_exposure_below(Memorised(memorised=False), PIN, 6.0, method=method, references=64,
                                allow_inconclusive=True)
    assert res.passed and "accepted (allow_inconclusive=True)" in res.evidence["inconclusive"]


def test_a_sampled_figure_over_the_limit_fails_as_a_leak():
    with expect_leak() as info:
        assert_exposure_below(Memorised(), PIN, 2.0, method="sampled", references=16)
    assert not isinstance(info.value, InconclusiveAuditError)


def test_a_space_over_the_default_exhaustive_budget_may_be_extrapolated():
    big = canary("pin", 7, seed=1)  # 10^7 secrets > 2^22: the default itself extrapolates
    assert big.pattern.space_size > DEFAULT_EXACT_BUDGET

    class Far:
        vocab = Memorised().vocab

        def score_token_ids(self, ids, intent, tags):
            return -ids.double().sum(dim=1)

    res = assert_exposure_below(Far(), big, 30.0, references=256, bootstrap=0)
    assert res.evidence["method"] == "extrapolated" and "inconclusive" not in res.evidence


@pytest.mark.parametrize("limit", [math.inf, -math.inf, math.nan, -1.0])
def test_an_infinite_or_negative_limit_is_refused(limit):
    with pytest.raises(ValueError, match=r"max_bits must be a finite number >= 0 .*an infinite limit passes every "
                                         r"figure.*fix: e.g. max_bits=4.0"):
        assert_exposure_below(Memorised(), PIN, limit)


@pytest.mark.parametrize("allow", [1, "no", None])
def test_allow_inconclusive_must_be_a_bool(allow):
    with pytest.raises(ValueError, match=r"allow_inconclusive must be True or False"):
        assert_exposure_below(Memorised(), PIN, 6.0, allow_inconclusive=allow)


BIG_PIN = canary("pin", 8, seed=4)   # 10^8 secrets: above the default exact budget (2^22), sampled


class MemorisedBig(Memorised):
    def __init__(self):
        tokens = (*BIG_PIN.pattern.prefix, *BIG_PIN.pattern.vocabulary)
        self.vocab = Vocabulary(("<pad>", "<unk>", *sorted(set(tokens))), ("<pad>", "<unk>"),
                                tuple(sorted(set(BIG_PIN.tags))), (BIG_PIN.intent,))
        self.secret = torch.tensor(self.vocab.token_ids(BIG_PIN.tokens, strict=True), dtype=torch.float64)
        self.memorised = True


def test_a_sampled_exposure_whose_ceiling_is_under_the_limit_cannot_pass():
    # review 6b N5: ranked first among 1,000 references the figure is its ceiling, log2 1000 = 9.97 bits, and
    # passed a limit of 12 although exhaustive scoring gives log2 10^8 = 26.6; a measurement that could not have
    # failed is inconclusive
    with expect_leak() as info:
        assert_exposure_below(MemorisedBig(), BIG_PIN, 12.0, method="sampled", references=1000)
    assert info.type is InconclusiveAuditError
    assert "could not have failed" in str(info.value) and "references >= 8,192" in str(info.value)
    # a ceiling above the limit gives a real verdict: ranked first among 8,192, 13 bits > 12 fails
    with expect_leak(match="violates the limit"):
        assert_exposure_below(MemorisedBig(), BIG_PIN, 12.0, method="sampled", references=8192)
