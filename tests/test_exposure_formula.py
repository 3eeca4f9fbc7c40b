"""Exposure maths against values derived by hand, on stub scorers (no training)."""
import math

import numpy as np
import pytest
import torch

from pytest_privleak.attacks.exposure.attack import compute_exposure, space_digits
from pytest_privleak.attacks.exposure.figure import chance_exposure, exposure_from_scores, sampled_interval
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below
from pytest_privleak.attacks.exposure.assertion import measure_exposure as measure_exposure_result
from pytest_privleak.canaries import canary
from pytest_privleak.finite import NonFiniteError
from pytest_privleak.results import set_sink
from pytest_privleak.targets.vocab import Vocabulary
from pytest_privleak import expect_leak


def test_issue_example_rank_4_exposure_2():
    # references 1..16, canary 3.5: 1, 2, 3 score at most 3.5 -> rank 4; log2 16 - log2 4 = 2
    value, rank = exposure_from_scores(3.5, np.arange(1, 17))
    assert rank == 4
    assert value == pytest.approx(2.0)


def test_canary_below_every_reference_gets_the_ceiling():
    value, rank = exposure_from_scores(0.5, np.arange(1, 17))
    assert (rank, value) == (1, pytest.approx(4.0))


def test_ties_count_against_the_canary():
    # 3.0 ties with reference 3 -> 3 references at or below -> rank 4, not 3
    assert exposure_from_scores(3.0, np.arange(1, 17)) == (pytest.approx(2.0), 4)
    # a model that scores everything alike shows no exposure
    assert exposure_from_scores(7.0, np.full(16, 7.0)) == (0.0, 17)


def test_nan_scores_are_rejected():
    with pytest.raises(ValueError, match="finite"):
        exposure_from_scores(1.0, [0.0, float("nan")])


def test_chance_exposure_by_hand():
    # |R| = 2: ranks 1, 2 -> exposures 1, 0 -> mean 0.5
    assert chance_exposure(2) == pytest.approx(0.5)
    # |R| = 4: exposures 2, 1, 2 - log2 3, 0 -> mean (5 - log2 3) / 4
    assert chance_exposure(4) == pytest.approx((5 - math.log2(3)) / 4)
    # Stirling: tends to log2 e
    assert chance_exposure(10 ** 6) == pytest.approx(math.log2(math.e), abs=2e-4)


def test_sampled_interval_from_clopper_pearson():
    # k = 0 of N = 100, 95% two-sided: upper bound 1 - 0.025^(1/100)
    hi_fraction = 1 - 0.025 ** (1 / 100)
    lo, hi = sampled_interval(0, 100, 10 ** 4)
    assert lo == pytest.approx(-math.log2(hi_fraction + 1e-4), rel=1e-6)
    assert hi == pytest.approx(math.log2(10 ** 4))   # nothing below: only the space bounds it
    lo, hi = sampled_interval(50, 100, 10 ** 4)
    assert lo < 1.0 < hi


def test_space_digits_is_mixed_radix():
    assert space_digits([0, 1, 10, 9999], 10, 4).tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0],
                                                             [9, 9, 9, 9]]


# --- stub targets ------------------------------------------------------------------------

PIN = canary("pin", 4, seed=3)
PIN_NUMBER = int("".join(PIN.secret))


class _Table:
    """Score = sum of a fixed random weight per (position, digit): a smooth, near-normal space.

    ``canary_rank`` shifts the canary's own score to sit just above the secret of that rank.
    """

    def __init__(self, canary_rank: int | None = None, seed: int = 0):
        self.weights = np.random.default_rng(seed).gamma(2.0, 1.0, size=(4, 10))
        self.offset = 0.0
        self.calls = 0
        if canary_rank is not None:
            digits = space_digits(np.arange(10 ** 4), 10, 4).numpy()
            others = np.sort(np.delete(self._secret_scores(digits), PIN_NUMBER))
            target = others[0] - 1.0 if canary_rank == 1 else others[canary_rank - 2:canary_rank].mean()
            self.offset = target - self._secret_scores(np.array([PIN.secret_indices]))[0]

    def _secret_scores(self, digits):
        return self.weights[np.arange(4), digits].sum(axis=1)

    def _scores(self, digits):
        is_canary = (digits == np.array(PIN.secret_indices)).all(axis=1)
        return self._secret_scores(digits) + np.where(is_canary, self.offset, 0.0)


class TableScorer(_Table):
    """Fast path: a vocabulary and ``score_token_ids`` over id tensors."""

    vocab = Vocabulary(("<pad>", "<unk>", *PIN.pattern.prefix, *PIN.pattern.vocabulary), ("<pad>", "<unk>"),
                       tuple(sorted(set(PIN.tags))), (PIN.intent,))

    def score_token_ids(self, ids, intent, tags):
        self.calls += 1
        assert intent == PIN.intent and tuple(tags) == PIN.tags
        return torch.from_numpy(self._scores(ids[:, 4:].numpy() - 6))  # ids: pad, unk, 4 prefix words, digits


class SlowScorer(_Table):
    """The same scores through the plain SequenceScorer protocol (utterances)."""

    def score(self, utterances):
        return self._scores(np.array([[int(t) for t in u.tokens[4:]] for u in utterances]))


@pytest.mark.parametrize("rank", [1, 7, 300])
def test_exact_rank_on_a_stub(rank):
    m = compute_exposure(TableScorer(canary_rank=rank), PIN, method="exact")
    assert m.rank == rank
    assert m.value == pytest.approx(math.log2(10 ** 4) - math.log2(rank))
    assert m.ceiling == pytest.approx(math.log2(10 ** 4))


def test_fast_and_utterance_paths_agree():
    fast = compute_exposure(TableScorer(canary_rank=40), PIN, method="exact", batch_size=999)
    slow = compute_exposure(SlowScorer(canary_rank=40), PIN, method="exact", batch_size=999)
    assert fast.rank == slow.rank == 40


def test_exact_is_batched():
    stub = TableScorer(canary_rank=5)
    compute_exposure(stub, PIN, method="exact", batch_size=2500)
    assert stub.calls == 4


def test_auto_picks_exact_within_budget_and_extrapolates_beyond():
    assert compute_exposure(TableScorer(canary_rank=5), PIN).method == "exact"
    m = compute_exposure(TableScorer(canary_rank=5), PIN, exact_budget=1000, references=500, bootstrap=5)
    assert m.method == "extrapolated"


# 6.1 and 2.7 bits: over seeds 0-19 the largest gap is 0.59 and 0.25 bits. Deeper tails: see the LM test. At
# rank 40 (8.0 bits) this stub's skew-normal fit under-reads by 1.2 bits on average and by more than 1 bit for
# 18 of seeds 0-19 (15 of 20 with the old references drawn with replacement): seed 1 passed by luck, and a
# distinct draw of the 3000 references (review M3) moved it to 1.02 bits, so rank 40 is no longer claimed here.
@pytest.mark.parametrize("rank", [150, 1500])
def test_exact_and_extrapolated_agree_within_one_bit(rank):
    exact = compute_exposure(TableScorer(canary_rank=rank), PIN, method="exact")
    extra = compute_exposure(TableScorer(canary_rank=rank), PIN, method="extrapolated", references=3000,
                             bootstrap=10, seed=1)
    assert abs(exact.value - extra.value) <= 1.0, (exact.value, extra.value, extra.fit)
    assert extra.fit["ks"] < 0.05
    assert extra.interval[0] <= extra.value <= extra.interval[1]


def test_sampled_rank_and_interval_cover_the_exact_value():
    exact = compute_exposure(TableScorer(canary_rank=100), PIN, method="exact")
    sampled = compute_exposure(TableScorer(canary_rank=100), PIN, method="sampled", references=2000, seed=4)
    assert sampled.ceiling == pytest.approx(math.log2(2000))
    assert sampled.interval[0] <= exact.value <= sampled.interval[1]


def test_sampling_is_deterministic_per_seed():
    a = compute_exposure(TableScorer(canary_rank=100), PIN, method="sampled", references=500, seed=9)
    b = compute_exposure(TableScorer(canary_rank=100), PIN, method="sampled", references=500, seed=9)
    assert (a.value, a.rank) == (b.value, b.rank)


def test_assertion_fails_with_the_evidence_and_passes_below_the_bound():
    with expect_leak() as info:
        assert_exposure_below(TableScorer(canary_rank=1), PIN, 10.0)
    message = str(info.value)
    for needle in ("13.288", "1 of 10000 secrets", "my pin code is", "remedy", "ceiling", "chance"):
        assert needle in message
    result = info.value.result
    assert (result.attack, result.metric, result.direction, result.threshold) == ("exposure", "exposure_bits",
                                                                                  "at_most", 10.0)
    assert result.chance == pytest.approx(chance_exposure(10 ** 4))
    ok = assert_exposure_below(TableScorer(canary_rank=5000), PIN, 10.0)
    assert ok.passed and ok.value == pytest.approx(1.0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="method="):
        compute_exposure(TableScorer(), PIN, method="magic")
    with pytest.raises(ValueError, match="max_bits"):
        assert_exposure_below(TableScorer(), PIN, -1)
    with pytest.raises(TypeError, match="Canary"):
        assert_exposure_below(TableScorer(), "my pin code is 1 2 3 4", 5)
    with pytest.raises(TypeError, match="sequence scorer"):
        compute_exposure(object(), PIN)


def test_assertion_records_its_own_tolerance_and_plain_floats():
    from pytest_privleak.report.gate import tolerance_for

    default = assert_exposure_below(TableScorer(canary_rank=5000), PIN, 10.0)
    assert default.tolerance is None
    assert tolerance_for(default.to_json(), {}) == 1.0  # the gate's built-in one bit for exposure_bits
    own = assert_exposure_below(TableScorer(canary_rank=5000), PIN, 10.0, tolerance=2.5)
    assert own.tolerance == 2.5 and tolerance_for(own.to_json(), {}) == 2.5
    assert type(own.evidence["score"]) is float  # numpy scalars cannot cross xdist
    with pytest.raises(ValueError, match="tolerance"):
        assert_exposure_below(TableScorer(), PIN, 10.0, tolerance=-1)


def test_measure_records_an_ungated_result_and_name_labels_it():
    sink: list = []
    set_sink(sink)
    try:
        result = measure_exposure_result(TableScorer(canary_rank=7), PIN)
        named = measure_exposure_result(TableScorer(canary_rank=7), PIN, name="pin said 100 times")
        gated = assert_exposure_below(TableScorer(canary_rank=7), PIN, 20.0, name="pin gate")
    finally:
        set_sink(None)
    assert sink == [result, named, gated]
    assert result.threshold is None and result.verdict == "measured" and result.passed
    assert result.value == pytest.approx(math.log2(10 ** 4) - math.log2(7))
    assert result.evidence["rank"] == "7 of 10000 secrets" and result.evidence["method"] == "exact"
    assert result.label == PIN.text and named.label == "pin said 100 times" and gated.label == "pin gate"
    assert "0x" not in result.label
    assert (named.value, named.chance, named.ceiling) == (result.value, result.chance, result.ceiling)


class NaNAt(TableScorer):
    """A model whose loss is NaN on one candidate: before issue 12 that ranked like any score."""

    def score_token_ids(self, ids, intent, tags):
        out = super().score_token_ids(ids, intent, tags)
        out[3] = float("nan")
        return out


def test_a_nan_score_is_refused_not_ranked():
    with pytest.raises(NonFiniteError, match="candidate secrets of canary"):
        assert_exposure_below(NaNAt(canary_rank=5000), PIN, 10.0)


def test_prefix_outside_the_vocabulary_is_refused_not_read_as_unk():
    from pytest_privleak.attacks.candidates import OutOfVocabularyError

    class NoPrefix(TableScorer):
        vocab = Vocabulary(("<pad>", "<unk>", *PIN.pattern.prefix[1:], *PIN.pattern.vocabulary), ("<pad>", "<unk>"),
                           tuple(sorted(set(PIN.tags))), (PIN.intent,))

    with pytest.raises(OutOfVocabularyError, match=repr(PIN.pattern.prefix[0])):
        compute_exposure(NoPrefix(), PIN)
