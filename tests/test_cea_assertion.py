"""``assert_cea_accuracy_at_most``: verdicts, recorded results and the failure message."""
import json

import pytest

from helpers_models import QuadraticModel
from pytest_privleak.attacks.cea.assertion import assert_cea_accuracy_at_most
from pytest_privleak.canaries import DIGITS, canary
from pytest_privleak import results as _results
from pytest_privleak.results import set_sink
from pytest_privleak import expect_leak

VOCAB = ("my", "pin", "code", "is") + DIGITS


@pytest.fixture(autouse=True)
def secrets_shown():
    """These tests give their pins as secret= and read the reconstructions back: they run as a developer's
    --privleak-show-secrets does (the default redaction is tested in test_secret_redaction.py)."""
    from pytest_privleak.attacks import redaction

    previous = redaction.set_show_secrets(True)
    yield
    redaction.set_show_secrets(previous)


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
    """The default attack (auto) scores all 10^4 pins: the message says so and gives the exact rank."""
    pin = canary("pin", secret="7 0 3 9")
    with expect_leak() as info:
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0)
    message = str(info.value)
    for part in ("cea.accuracy", "my pin code is 7 0 3 9", "1.000", "95% CI", "threshold  : at most 0.000",
                 "chance     : 1.00e-04", "hdt", "hdt_chance : 0.900", "'7 0 3 9'",
                 "auto (exhaustive when |V0|^n <= 100000", "exhaustive: scored every secret",
                 "1 trial(s) = 1 canary(ies), one exhaustive scoring each",
                 "rank_of_truth: 1 of 10000 (exact", "dropout 0.2", "patience 20", "character embeddings"):
        assert part in message, part
    result = info.value.result
    assert (result.attack, result.metric, result.direction) == ("cea", "accuracy", "at_most")
    assert result.value == 1.0 and result.interval == pytest.approx((0.025, 1.0))
    assert result.extra["hdt"] == 0.0 and result.extra["best_rank_of_truth"] == 1.0
    assert result.evidence["method"] == "auto"
    assert sink == [result]
    json.dumps(result.to_json())                       # JSON-safe for the report


def test_paper_gradient_attack_by_name_says_which_attack_ran(sink):
    pin = canary("pin", secret="7 0 3 9")
    with expect_leak() as info:
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0, method="gradient", trials=3, starts=2, epochs=60)
    message = str(info.value)
    for part in ("gradient (canary-extraction-nlu §3.1, App. B): best-by-loss of 2 random starts",
                 "3 trial(s) = 1 canary(ies) x 3", "best-by-loss of 2 random starts",
                 "rank_of_truth: >= 1 of 10000 (lower bound", "remedy"):
        assert part in message, part
    result = info.value.result
    assert result.value == 1.0 and result.interval[0] > 0.29 and result.interval[1] == 1.0
    assert "best_rank_of_truth" not in result.extra            # a lower bound is not an exact rank


def test_rank_evidence_of_a_named_method_gives_that_as_the_reason_not_the_budget(sink):
    """Issue 21 item 3: method="gradient" on 10^4 pins (inside the budget of 10^5) said "the space is over
    the exhaustive budget"; the reason is the method the caller named."""
    from pytest_privleak.attacks.cea.assertion import measure_cea

    pin = canary("pin", secret="7 0 3 9")
    for method in ("gradient", "trivial"):
        rank = measure_cea(_leaky(), pin, method=method, trials=2, starts=2, epochs=30).evidence["rank_of_truth"]
        assert rank.startswith(">= ") and f"method={method!r} was asked for" in rank, rank
        assert "scores every secret of this space (it fits the budget)" in rank, rank
        assert "over the exhaustive budget" not in rank, rank
    rank = measure_cea(_leaky(), pin, method="gradient", trials=1, epochs=30, budget=1000).evidence["rank_of_truth"]
    assert "method='gradient' was asked for" in rank and "also over the exhaustive budget of 1000" in rank, rank


def test_auto_over_the_budget_runs_gradient_then_ranked_scoring(sink):
    pin = canary("pin", secret="7 0 3 9")
    with expect_leak() as info:
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0, budget=1000, trials=2, starts=2, epochs=60, ranked=16)
    message = str(info.value)
    for part in ("auto (exhaustive when |V0|^n <= 1000", "then ranked scoring: each trial scores the 16 most "
                 "probable secrets of each of its 2 start(s)", "2 trial(s) = 1 canary(ies) x 2",
                 "rank_of_truth: >= 1 of 10000 (lower bound",
                 "the space, 10000 secrets, is over the exhaustive budget of 1000"):
        assert part in message, part
    assert "was asked for" not in message


def test_measure_cea_returns_the_result_without_gating_and_records_it(sink):
    from pytest_privleak.attacks.cea.assertion import measure_cea

    pin = canary("pin", secret="7 0 3 9")
    result = measure_cea(_leaky(), pin, name="pin said once")
    assert (result.threshold, result.verdict, result.value, result.label) == (None, "measured", 1.0,
                                                                            "pin said once")
    assert result.evidence["rank_of_truth"].startswith("1 of 10000 (exact")
    assert sink == [result]
    again = measure_cea(_leaky(), pin, name="pin said once")
    assert again.to_json() == result.to_json()                 # same seed, same figures and the same key


def test_several_models_each_with_its_canary_as_in_the_paper(sink):
    """§4.3: each trial a different canary in its own model; one call, lists aligned."""
    pins = [canary("pin", secret=s) for s in ("7 0 3 9", "1 1 2 2", "5 6 0 0")]
    models = [_leaky("7 0 3 9"), _leaky("4 4 4 4"), _leaky("5 6 0 0")]
    with expect_leak() as info:
        assert_cea_accuracy_at_most(models, pins, 0.5)
    result = info.value.result
    assert result.value == pytest.approx(2 / 3) and result.label == "3 canaries: 'my pin code is 7 0 3 9', ..."
    assert result.evidence["reconstructed"] == ["7 0 3 9", "4 4 4 4", "5 6 0 0"]
    assert result.evidence["rank_of_truth"][0].startswith("1 of 10000 (exact")
    assert not result.evidence["rank_of_truth"][1].startswith("1 of")


def test_model_trained_on_another_secret_passes(sink):
    pin = canary("pin", secret="7 0 3 9")
    result = assert_cea_accuracy_at_most(_leaky("1 2 5 8"), pin, 0.0, max_hdt_floor=0.75)
    assert result.passed and result.value == 0.0
    assert result.evidence["reconstructed"] == ["1 2 5 8"]
    assert [r.metric for r in sink] == ["hdt", "accuracy"]
    assert sink[0].value == 1.0 and sink[0].passed


def test_hdt_floor_fails_when_tokens_leak_even_if_whole_secret_does_not(sink):
    pin = canary("pin", secret="7 0 3 9")
    with expect_leak() as info:
        assert_cea_accuracy_at_most(_leaky("7 0 3 8"), pin, 0.0, max_hdt_floor=0.5)
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
    with expect_leak():
        assert_cea_accuracy_at_most(models, pins, 0.4, method="exhaustive")


def test_single_start_paper_mode_and_bad_thresholds(sink):
    pin = canary("pin", secret="7 0 3 9")
    result = assert_cea_accuracy_at_most(_leaky(), pin, 1.0, method="gradient", trials=2, select="single",
                                         epochs=60, allow_inconclusive=True)
    assert result.evidence["starts"] == 1 and "single random start" in result.evidence["trials"]
    with pytest.raises(ValueError, match="max_accuracy"):
        assert_cea_accuracy_at_most(_leaky(), pin, 1.5)
    with pytest.raises(ValueError, match="max_hdt_floor"):
        assert_cea_accuracy_at_most(_leaky(), pin, 0.0, max_hdt_floor=2)


def test_own_tolerance_is_recorded_but_only_a_saved_baseline_tolerance_gates(sink):
    """Issue 12: a run cannot loosen its own gate; the tolerance counts once saved in the baseline."""
    from pytest_privleak.report.gate import compare
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

    # the stored baseline: nothing extracted; now 0.5 (+0.5)
    assert not compare(report(loose, 0.5), report(default, 0.0), {}, "b")["passed"]   # run's own 0.6 ignored
    assert compare(report(loose, 0.5), report(loose, 0.0), {}, "b")["passed"]         # saved 0.6 applies
    with pytest.raises(ValueError, match="tolerance"):
        assert_cea_accuracy_at_most(models, pins, 1.0, method="exhaustive", tolerance=-1)


def test_a_gradient_pass_on_a_space_the_default_scores_in_full_is_inconclusive(sink):
    """Issue 23 item 4: the paper's search within the limit on a 10^4 space is not a pass; the default is."""
    from pytest_privleak.attacks.inconclusive import InconclusiveAuditError

    pin = canary("pin", secret="7 0 3 9")
    with expect_leak(match=r"INCONCLUSIVE, not a pass.*gradient instead of scoring all 10,000 secrets") as info:
        assert_cea_accuracy_at_most(_leaky(), pin, 1.0, method="gradient", trials=1, starts=1, epochs=20)
    assert info.type is InconclusiveAuditError
    assert "method='auto' (or 'exhaustive') with budget >= 10,000" in str(info.value)
    accepted = assert_cea_accuracy_at_most(_leaky(), pin, 1.0, method="gradient", trials=1, starts=1, epochs=20,
                                           allow_inconclusive=True)
    assert accepted.passed and accepted.target["inconclusive_allowed"] is True
    assert assert_cea_accuracy_at_most(_leaky(), pin, 1.0).passed          # the default covers the space

