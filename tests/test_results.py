"""LeakResult verdicts, messages, JSON round trip and recording."""
import math

import pytest

from pytest_privleak.assertions import check
from pytest_privleak.results import (LeakResult, PrivacyLeakError, expect_leak, is_expected, record, set_recorder,
                                     set_sink)


def _result(value, threshold=0.0, direction="at_most", **kw):
    return LeakResult(attack="cea", metric="accuracy", value=value, threshold=threshold,
                      direction=direction, interval=(0.1, 0.9), confidence=0.95, chance=1e-4,
                      label="my pin code is 3 1 4 1", evidence={"reconstructed": "3 1 4 1"},
                      extra={"hdt": 0.25}, remedy="train with dropout 0.2", **kw)


def test_verdict_follows_direction():
    assert _result(0.0).passed
    assert not _result(0.5).passed
    assert _result(0.5, threshold=0.4, direction="at_least").passed
    assert not _result(0.3, threshold=0.4, direction="at_least").passed
    assert LeakResult("x", "y", 3.0).verdict == "measured"


def test_message_names_figure_interval_threshold_chance_evidence_and_remedy():
    text = _result(0.5).explain()
    for piece in ("0.500", "95% CI 0.100 .. 0.900", "at most 0.000", "chance     : 1.00e-04",
                  "reconstructed", "3 1 4 1", "hdt", "remedy", "dropout 0.2"):
        assert piece in text, piece


def test_remedy_is_omitted_when_passing():
    assert "remedy" not in _result(0.0).explain()


def test_json_round_trip():
    r = _result(0.5, tolerance=0.1, target={"content_hash": "abc"})
    data = r.to_json()
    assert data["verdict"] == "FAIL" and data["passed"] is False
    again = LeakResult.from_json(data)
    assert again == r


def test_nan_value_is_a_clear_error():
    with pytest.raises(ValueError, match="NaN"):
        LeakResult("exposure", "exposure_bits", math.nan)


@pytest.mark.parametrize("make", [lambda: __import__("numpy").float32("nan"),
                                  lambda: __import__("torch").tensor(float("nan"))],
                         ids=["numpy float32", "torch tensor"])
def test_nan_value_of_numpy_or_torch_is_refused_too(make):
    # isinstance(np.float32(nan), float) is False: such a NaN used to be accepted and reported
    with pytest.raises(ValueError, match=r"membership/auc: the measured value is NaN.*check its outputs"):
        LeakResult("membership", "auc", make())


def test_figures_become_plain_floats_and_non_numbers_are_refused():
    import numpy as np
    import torch

    r = LeakResult("cea", "accuracy", np.float32(0.25), threshold=torch.tensor(0.5))
    assert type(r.value) is float and type(r.threshold) is float and r.to_json()["value"] == 0.25
    for bad in (None, "0.5", True, np.array([0.1, 0.2])):
        with pytest.raises(TypeError, match="cea/accuracy: value must be a number"):
            LeakResult("cea", "accuracy", bad)
    with pytest.raises(ValueError, match="cea/accuracy: the threshold is NaN.*give the limit as a number"):
        LeakResult("cea", "accuracy", 0.1, threshold=math.nan)


def test_bad_direction_is_rejected():
    with pytest.raises(ValueError, match="direction"):
        LeakResult("x", "y", 1.0, direction="below")


def test_check_records_and_raises():
    sink = []
    set_sink(sink)
    try:
        check(_result(0.0))
        with expect_leak() as info:
            check(_result(0.7))
    finally:
        set_sink(None)
    assert len(sink) == 2
    assert isinstance(info.value, AssertionError)
    assert info.value.result.value == 0.7
    assert is_expected(sink[1]) and not is_expected(sink[0])


def test_record_without_sink_or_recorder_returns_the_result():
    set_sink(None)
    previous = set_recorder(None)
    try:
        r = _result(0.0)
        assert record(r) is r and not is_expected(r)
    finally:
        set_recorder(previous)


def _labelled(value, label):
    r = _result(value)
    r.label = label
    return r


def test_the_recorder_gets_every_result_from_any_thread_and_a_diverting_sink_takes_them_instead():
    import threading

    got, diverted = [], []
    previous = set_recorder(got.append)
    try:
        record(_labelled(0.0, "main"))
        worker = threading.Thread(target=lambda: record(_labelled(0.0, "thread")))
        worker.start()
        worker.join()
        set_sink(diverted)
        record(_labelled(0.0, "diverted"))
    finally:
        set_sink(None)
        set_recorder(previous)
    assert [r.label for r in got] == ["main", "thread"] and [r.label for r in diverted] == ["diverted"]


def test_expect_leak_mirrors_pytest_raises_and_marks_what_it_recorded():
    got = []
    previous = set_recorder(got.append)
    try:
        with expect_leak(match=r"cea.accuracy \[my pin code is 3 1 4 1\]: 0.700 violates") as leak:
            record(_labelled(0.0, "passing inside"))
            check(_result(0.7))
        assert leak.type is PrivacyLeakError and leak.result is leak.value.result and leak.match("remedy")
        assert [is_expected(r) for r in got] == [True, True]
        got.clear()
        with pytest.raises(AssertionError, match="expect_leak: DID NOT RAISE PrivacyLeakError"):
            with expect_leak():
                record(_result(0.0))
        with pytest.raises(AssertionError, match="expect_leak: the regex 'exposure' does not match"):
            with expect_leak(match="exposure"):
                check(_result(0.7))
        with pytest.raises(KeyError):
            with expect_leak():
                raise KeyError("not a leak")
        assert [is_expected(r) for r in got] == [True, True]   # those recorded inside the blocks that raised
        record(_labelled(0.7, "after"))
        assert not is_expected(got[-1])   # the block is closed, also after an error passed through it
    finally:
        set_recorder(previous)
