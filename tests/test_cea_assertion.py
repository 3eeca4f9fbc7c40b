"""``assert_cea_accuracy_at_most``: verdicts, recorded results and the failure message."""
import json

import pytest

from helpers_models import QuadraticModel
from pytest_privleak.attacks.cea_assertion import assert_cea_accuracy_at_most
from pytest_privleak.canaries import DIGITS, canary
from pytest_privleak import results as _results
from pytest_privleak.results import PrivacyLeakError, set_sink

VOCAB = ("my", "pin", "code", "is") + DIGITS


@pytest.fixture
def sink(request):
    """The results recorded by the running test (the plugin's per-test sink, or our own without the plugin)."""
    results = getattr(_results._local, "sink", None)
    if results is None:
        results = []
        set_sink(results)
        request.addfinalizer(lambda: set_sink(None))
    return _Recorded(results)


class _Recorded:
    """A live view of the sink; the plugin installs its list only when the test body starts."""

    def __init__(self, fallback):
        self._fallback = fallback

    def _list(self):
        current = getattr(_results._local, "sink", None)
        return self._fallback if current is None else current

    def __eq__(self, other):
        return list(self._list()) == other

    def __iter__(self):
        return iter(self._list())

    def __getitem__(self, i):
        return self._list()[i]


def _leaky(secret="7 0 3 9"):
    return QuadraticModel(VOCAB, {"PinIntent": ["my", "pin", "code", "is", *secret.split()]})


def test_leaking_model_fails_with_a_full_message(sink):
    pin = canary("pin", secret="7 0 3 9")
    with pytest.raises(PrivacyLeakError) as info:
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0, trials=3, starts=2, epochs=120)
    message = str(info.value)
    for part in ("cea.accuracy", "my pin code is 7 0 3 9", "1.000", "95% CI", "threshold  : at most 0.000",
                 "chance     : 1.00e-04", "hdt", "hdt_chance : 0.900", "'7 0 3 9'", "3 trial(s) = 1 canary(ies) x 3",
                 "best-by-loss of 2 random starts", "dropout 0.2", "patience 20", "character embeddings"):
        assert part in message, part
    result = info.value.result
    assert (result.attack, result.metric, result.direction) == ("cea", "accuracy", "at_most")
    assert result.value == 1.0 and result.interval[0] > 0.29 and result.interval[1] == 1.0
    assert result.extra["hdt"] == 0.0
    assert sink == [result]
    json.dumps(result.to_json())                       # JSON-safe for the report


def test_model_trained_on_another_secret_passes(sink):
    pin = canary("pin", secret="7 0 3 9")
    result = assert_cea_accuracy_at_most(_leaky("1 2 5 8"), pin, 0.0, trials=3, starts=2, epochs=120,
                                         max_hdt_floor=0.75)
    assert result.passed and result.value == 0.0
    assert result.evidence["reconstructed"] == ["1 2 5 8"] * 3
    assert [r.metric for r in sink] == ["hdt", "accuracy"]
    assert sink[0].value == 1.0 and sink[0].passed


def test_hdt_floor_fails_when_tokens_leak_even_if_whole_secret_does_not(sink):
    pin = canary("pin", secret="7 0 3 9")
    with pytest.raises(PrivacyLeakError) as info:
        assert_cea_accuracy_at_most(_leaky("7 0 3 8"), pin, 0.0, trials=2, starts=2, epochs=120, max_hdt_floor=0.5)
    result = info.value.result
    assert (result.metric, result.direction, result.value) == ("hdt", "at_least", 0.25)
    assert "cea.hdt" in str(info.value) and "at least 0.500" in str(info.value)
    assert [r.metric for r in sink] == ["accuracy", "hdt"]


def test_one_target_per_canary_and_exhaustive_method(sink):
    pins = [canary("pin", secret="7 0 3 9"), canary("pin", secret="1 1 2 2")]
    models = [_leaky("7 0 3 9"), _leaky("4 4 4 4")]
    result = assert_cea_accuracy_at_most(models, pins, 0.5, method="exhaustive")
    assert result.value == 0.5 and result.passed
    assert result.evidence["trials"].startswith("2 trial(s) = 2 canary(ies), one exhaustive scoring each")
    assert result.evidence["reconstructed"] == ["7 0 3 9", "4 4 4 4"]
    assert result.extra["best_rank_of_truth"] == 1.0
    with pytest.raises(PrivacyLeakError):
        assert_cea_accuracy_at_most(models, pins, 0.4, method="exhaustive")


def test_single_start_paper_mode_and_bad_thresholds(sink):
    pin = canary("pin", secret="7 0 3 9")
    result = assert_cea_accuracy_at_most(_leaky(), pin, 1.0, trials=2, select="single", epochs=60)
    assert result.evidence["starts"] == 1 and "single random start" in result.evidence["trials"]
    with pytest.raises(ValueError, match="max_accuracy"):
        assert_cea_accuracy_at_most(_leaky(), pin, 1.5)
    with pytest.raises(ValueError, match="max_hdt_floor"):
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0, max_hdt_floor=2)


def test_own_tolerance_is_recorded_and_decides_the_baseline_gate(sink):
    from pytest_privleak.baseline import compare
    from pytest_privleak.report.model import build_report, make_test_entry

    pins = [canary("pin", secret="7 0 3 9"), canary("pin", secret="1 1 2 2")]
    models = [_leaky("7 0 3 9"), _leaky("4 4 4 4")]  # the first leaks, the second does not: accuracy 0.5
    loose = assert_cea_accuracy_at_most(models, pins, 1.0, method="exhaustive", tolerance=0.6)
    default = assert_cea_accuracy_at_most(models, pins, 1.0, method="exhaustive")
    assert (loose.value, loose.tolerance, default.tolerance) == (0.5, 0.6, None)

    def report(result, value):
        data = {**result.to_json(), "value": value}
        return build_report([make_test_entry("t.py::t", "passed", 0.0, None, None, 0, [data])], [], seed=0,
                            xdist=False)

    before = report(default, 0.0)  # the stored baseline: nothing extracted; now 0.5 (+0.5)
    assert compare(report(loose, 0.5), before, {}, "b")["passed"]             # within its own 0.6
    assert not compare(report(default, 0.5), before, {}, "b")["passed"]       # beyond the built-in 0.05
    with pytest.raises(ValueError, match="tolerance"):
        assert_cea_accuracy_at_most(models, pins, 1.0, method="exhaustive", tolerance=-1)
