"""The d-exposure gate: every class by default (issue 27 item 5), figures per epoch and Table 3's layout (item 4)."""
import contextlib
import math

import numpy as np
import pytest

from pytest_privleak.attacks.exposure.discriminative import DEFAULT_TEMPLATE, template_tokens
from pytest_privleak.attacks.exposure.discriminative_assertion import (
    CLASS_MAX_METRIC, MEAN_METRIC, assert_d_exposure_below, measure_d_exposure, table3)
from pytest_privleak.results import expect_leak, set_sink

_, BLANK = template_tokens(DEFAULT_TEMPLATE)


class Stub:
    """Token scorer: a fixed [O, B-PER, B-ORG] row at the blank per word."""

    labels = ["O", "B-PER", "B-ORG"]

    def __init__(self, rows):
        self.rows = rows

    def token_label_probs(self, sentences):
        out = []
        for s in sentences:
            arr = np.tile([1.0, 0.0, 0.0], (len(s), 1))
            arr[BLANK] = self.rows[s[BLANK]]
            out.append(arr)
        return out


WORDS = {"PER": [f"P{i}" for i in range(7)], "ORG": [f"G{i}" for i in range(7)]}
INSERTED = {"PER": "Chelsea", "ORG": "Williams"}


def tagger(per_conf: float, org_conf: float) -> Stub:
    """Class words at confidences 0.55 .. 0.85; Chelsea at ``per_conf`` as PER, Williams at ``org_conf`` as ORG."""
    rows = {f"P{i}": [0.0, 0.55 + 0.05 * i, 0.45 - 0.05 * i] for i in range(7)}
    rows |= {f"G{i}": [0.0, 0.45 - 0.05 * i, 0.55 + 0.05 * i] for i in range(7)}
    rows["Chelsea"] = [0.0, per_conf, 1.0 - per_conf]
    rows["Williams"] = [0.0, 1.0 - org_conf, org_conf]
    return Stub(rows)


@contextlib.contextmanager
def recorded():
    """The results recorded inside the block (set in the test body: the plugin sets its own sink per test)."""
    records: list = []
    set_sink(records)
    try:
        yield records
    finally:
        set_sink(None)


def test_a_leak_in_one_class_fails_the_default_gate_and_names_the_class():
    leaky = tagger(0.99, 0.56)          # PER: Chelsea beats all 7 -> 3 bits; ORG: 6 of 7 above -> log2(8/7)
    org = math.log2(8) - math.log2(7)
    with expect_leak() as info:
        assert_d_exposure_below(leaky, INSERTED, 2.0, class_words=WORDS)
    result = info.value.result
    assert result.metric == CLASS_MAX_METRIC and result.value == pytest.approx(3.0)
    assert result.extra["d_exposure_mean"] == pytest.approx((3.0 + org) / 2)     # eq. 3 stays in the figures
    assert "the highest is PER (Chelsea) at 3.00 bits" in str(info.value)
    # the paper's mean (1.6 bits) passes the same limit: the mean dilutes the PER leak
    mean = assert_d_exposure_below(leaky, INSERTED, 2.0, class_words=WORDS, per_class=False)
    assert mean.metric == MEAN_METRIC and mean.value == pytest.approx((3.0 + org) / 2) and mean.passed


def test_a_model_that_leaks_in_no_class_passes():
    result = assert_d_exposure_below(tagger(0.56, 0.56), INSERTED, 2.0, class_words=WORDS)
    assert result.passed and result.value == pytest.approx(math.log2(8) - math.log2(7))


class EpochStub(Stub):
    """A trained-with-checkpoints target: ``at_epoch`` gives the stub at 25 and 50 epochs."""

    def __init__(self):
        super().__init__(tagger(0.56, 0.56).rows)
        self.epochs = {25: tagger(0.56, 0.56), 50: tagger(0.99, 0.56)}

    def at_epoch(self, epoch):
        return self.epochs[epoch]


def test_epochs_give_one_result_per_epoch_and_table3_lays_them_out():
    with recorded() as sink:
        results = measure_d_exposure(EpochStub(), INSERTED, class_words=WORDS, epochs=[25, 50])
    assert [r.label for r in results] == ["Chelsea as PER, Williams as ORG @ epoch 25",
                                          "Chelsea as PER, Williams as ORG @ epoch 50"]
    assert [r.extra["epoch"] for r in results] == [25.0, 50.0] and sink == results
    assert [r.extra["d_exposure_PER"] for r in results] == [pytest.approx(math.log2(8 / 7)), pytest.approx(3.0)]
    table = table3({0: results, 16: results}, ["PER", "ORG"])
    lines = table.splitlines()
    assert lines[0].split() == ["R", "|", "PER", "|", "ORG"]
    assert lines[1].split() == ["|", "25", "50", "|", "25", "50"]
    assert lines[3].split() == ["0", "|", "0.19", "3.00", "|", "0.19", "0.19"]
    assert lines[4].startswith("  16 |")


def test_epochs_gate_raises_the_failing_epoch_and_records_the_passing_one():
    with recorded() as sink, expect_leak() as info:
        assert_d_exposure_below(EpochStub(), INSERTED, 2.0, class_words=WORDS, epochs=[25, 50])
    assert info.value.result.label.endswith("@ epoch 50")
    assert [r.label.rsplit(" ", 1)[-1] for r in sink] == ["25", "50"]   # the passing epoch, then the failing one


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(per_class="yes"), TypeError, "per_class must be True or False"),
    (dict(epochs=[]), ValueError, "epochs must be a non-empty list"),
    (dict(epochs=[0]), ValueError, "epochs must be a non-empty list"),
    (dict(epochs=[25]), TypeError, "has no at_epoch"),
    (dict(class_words="PER"), TypeError, "class_words must map"),
])
def test_bad_gate_arguments_are_named(kwargs, error, fragment):
    args = dict(class_words=WORDS) | kwargs
    with pytest.raises(error, match=fragment):
        measure_d_exposure(tagger(0.56, 0.56), INSERTED, **args)
