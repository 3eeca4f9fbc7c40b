"""CEA maths against values worked out by hand (canary-extraction-nlu §3.1, §4.3, Appendix B)."""
import math

import numpy as np
import pytest
import torch

from pytest_privleak.attacks.candidates import enumerate_space, rank_of, secret_index, space_digits
from pytest_privleak.attacks.cea.attack import (CEAConfig, ExtractionReport, hamming_per_token, lr_schedule, row_seed,
                                         temperature_schedule)
from pytest_privleak.canaries import canary
from pytest_privleak.stats import clopper_pearson


def test_temperature_schedule_appendix_b():
    temps = temperature_schedule(250)
    assert len(temps) == 250
    assert temps[0] == pytest.approx(0.1)
    assert temps[1] == pytest.approx(0.0997)
    assert temps[2] == pytest.approx(0.1 * 0.994009)
    assert temps[249] == pytest.approx(0.1 * math.exp(249 * math.log(0.997)))
    assert temps[249] == pytest.approx(0.047325, abs=1e-6)   # 0.997^249 = exp(-0.74812) = 0.47325


def test_lr_schedule_appendix_b():
    rates = lr_schedule(3)
    assert rates == pytest.approx([6.5e-3, 6.5e-3 * 0.995, 6.5e-3 * 0.990025])


def test_hamming_per_token_by_hand():
    true = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4], [0, 0, 0, 0]])
    guess = torch.tensor([[1, 2, 3, 4], [1, 9, 3, 0], [1, 1, 1, 1]])
    assert hamming_per_token(true, guess).tolist() == [0.0, 0.5, 1.0]


def _report(true, guessed, pattern_canary):
    p = pattern_canary.pattern
    n = len(true)
    return ExtractionReport(method="gradient", canaries=(pattern_canary.text,), canary_index=(0,) * n,
                            true=tuple(tuple(t.split()) for t in true),
                            reconstructed=tuple(tuple(g.split()) for g in guessed), losses=(0.0,) * n,
                            chance_accuracies=(p.chance_accuracy,) * n, chance_hdts=(p.chance_hdt,) * n,
                            trials_per_canary=n, starts=1, select="single")


def test_report_metrics_by_hand():
    pin = canary("pin", secret="3 1 4 1")
    report = _report(["3 1 4 1"] * 4, ["3 1 4 1", "3 1 4 2", "0 0 0 0", "3 1 4 1"], pin)
    assert report.correct == 2
    assert report.accuracy == 0.5
    # HDTs 0, 1/4, 4/4, 0 -> mean 5/16
    assert report.hdt == pytest.approx(5 / 16)
    assert report.chance_accuracy == pytest.approx(1e-4)          # (1/10)^4
    assert report.chance_hdt == pytest.approx(0.9)                # 1 - 1/10
    color = canary("color", secret="red green blue pink")
    assert color.pattern.chance_accuracy == pytest.approx(12 ** -4)
    assert color.pattern.chance_hdt == pytest.approx(11 / 12)


def test_clopper_pearson_edges_for_ten_trials():
    # 0/10: upper bound solves (1-p)^10 = 0.025 -> 1 - 0.025^(1/10)
    lo, hi = clopper_pearson(0, 10, 0.95)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** 0.1, rel=1e-9)
    assert hi == pytest.approx(0.30850, abs=1e-5)
    lo, hi = clopper_pearson(10, 10, 0.95)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** 0.1, rel=1e-9)
    pin = canary("pin", secret="3 1 4 1")
    assert _report(["3 1 4 1"] * 10, ["0 0 0 0"] * 10, pin).accuracy_interval(0.95) == pytest.approx(
        (0.0, 1 - 0.025 ** 0.1))


def test_enumerate_space_lexicographic_and_budget():
    space = enumerate_space(10, 4)
    assert space.shape == (10_000, 4)
    assert space[0].tolist() == [0, 0, 0, 0]
    assert space[1].tolist() == [0, 0, 0, 1]
    assert space[3141].tolist() == [3, 1, 4, 1]
    assert secret_index([3, 1, 4, 1], 10) == 3141
    assert enumerate_space(3, 2).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]]
    with pytest.raises(ValueError, match="over the budget"):
        enumerate_space(10, 6)


def test_rank_of_counts_ties_as_told():
    others = torch.tensor([0.5, 0.125, 0.25])                # float32 losses, as the CEA scores them
    assert rank_of(0.0625, others, ties="against") == 1 and rank_of(0.0625, others, ties="favour") == 1
    assert rank_of(0.25, others, ties="against") == 3    # 0.125 and the tied 0.25 at or below it
    assert rank_of(0.25, others, ties="favour") == 2     # only 0.125 strictly below it
    assert rank_of(torch.tensor(0.3), torch.tensor([0.3, 0.1]), ties="against") == 3   # float32 on both sides
    assert rank_of(0.9, others, ties="against") == 4
    assert rank_of(1.0, torch.ones(7), ties="against") == 8 and rank_of(1.0, torch.ones(7), ties="favour") == 1


def test_rank_of_secret_sharer_example_and_bad_input():
    refs = np.arange(1.0, 17.0)                      # references 1..16 (numpy or torch alike)
    assert rank_of(3.5, refs, ties="against") == 4   # 1, 2, 3 below -> exposure log2 16 - log2 4 = 2
    assert rank_of(4.0, refs, ties="against") == 5 and rank_of(4.0, refs, ties="favour") == 4
    assert rank_of(torch.tensor(4.0), torch.from_numpy(refs).view(4, 4), ties="against") == 5
    with pytest.raises(ValueError, match="ties="):
        rank_of(4.0, refs, ties="in-favour")
    with pytest.raises(ValueError, match="finite"):
        rank_of(float("nan"), refs, ties="against")
    with pytest.raises(ValueError, match="finite"):
        rank_of(1.0, torch.tensor([0.0, float("inf")]), ties="favour")


def test_space_digits_inverts_secret_index():
    numbers = torch.tensor([0, 1, 10, 3141, 9999])
    assert space_digits(numbers, 10, 4).tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [3, 1, 4, 1],
                                                     [9, 9, 9, 9]]
    assert space_digits([7], 3, 2).tolist() == [[2, 1]]          # 7 = 2*3 + 1
    assert all(secret_index(row, 12) == k for k, row in zip([0, 5, 20735], space_digits([0, 5, 20735], 12, 4).tolist()))


def test_row_seed_depends_on_all_parts_only():
    assert row_seed(0, 0, 0) == row_seed(0, 0, 0)
    assert len({row_seed(0, 0, 0), row_seed(1, 0, 0), row_seed(0, 1, 0), row_seed(0, 0, 1)}) == 4


def test_config_defaults_are_appendix_b_and_bad_values_fail():
    c = CEAConfig()
    assert (c.epochs, c.lr, c.lr_decay, c.temperature0, c.temperature_decay) == (250, 6.5e-3, 0.995, 0.1, 0.997)
    with pytest.raises(ValueError, match="starts"):
        CEAConfig(starts=0)
    with pytest.raises(ValueError, match="select"):
        CEAConfig(select="best")
    with pytest.raises(ValueError, match="single"):
        CEAConfig(select="single", starts=4)
