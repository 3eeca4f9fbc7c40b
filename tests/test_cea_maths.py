"""CEA maths against values worked out by hand (canary-extraction-nlu §3.1, §4.3, Appendix B)."""
import math

import pytest
import torch

from pytest_privleak.attacks.candidates import enumerate_space, rank_of, secret_index
from pytest_privleak.attacks.cea import (CEAConfig, ExtractionReport, hamming_per_token, lr_schedule, row_seed,
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


def test_rank_of():
    scores = torch.tensor([0.5, 0.1, 0.3, 0.3])
    assert rank_of(scores, 1) == 1
    assert rank_of(scores, 2) == 2 and rank_of(scores, 3) == 2   # ties count in the candidate's favour
    assert rank_of(scores, 0) == 4


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
