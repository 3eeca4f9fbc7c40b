"""measure_ldp (figure without a verdict) and stable, readable labels for user mechanisms (issue 12)."""
import numpy as np
import pytest

from pytest_privleak.ldp import KRR, BoxDomain, assert_ldp_holds, mechanism_label
from pytest_privleak.ldp.assertion import measure_ldp
from pytest_privleak.report.keys import unstable_reason
from pytest_privleak.results import set_sink
from pytest_privleak import expect_leak

SMALL = dict(samples=50_000, train_samples=3_000, val_samples=10_000, progress=None)


class Leaky:  # no __repr__: repr() holds a memory address
    epsilon = 1.0
    domain = BoxDomain(0, 1)

    def __init__(self, reveal=0.5):
        self.reveal = reveal

    def __call__(self, inputs, rng):
        x = np.asarray(inputs, dtype=float)
        return np.where(rng.random(x.shape) < self.reveal, x, rng.random(x.shape))


def test_label_of_a_mechanism_without_repr_is_its_class_and_parameters():
    assert " at 0x" in repr(Leaky())  # the old label
    assert mechanism_label(Leaky(0.25)) == "Leaky(epsilon=1, reveal=0.25)"
    assert mechanism_label(KRR(4, 1.0)) == "KRR(k=4, epsilon=1)"  # a stable repr is kept
    assert mechanism_label(Leaky(), "my-encoder") == "my-encoder"


def test_result_label_and_target_hold_no_memory_address_and_repeat_across_runs():
    with expect_leak() as one:
        assert_ldp_holds(Leaky(), 1.0, **SMALL)
    with expect_leak() as two:
        assert_ldp_holds(Leaky(), 1.0, **SMALL)
    r1, r2 = one.value.result, two.value.result
    assert r1.label == r2.label == "Leaky(epsilon=1, reveal=0.5)"
    assert unstable_reason(r1.label) is None and unstable_reason(str(r1.target)) is None
    assert r1.value == r2.value  # same seed, same figure


def test_name_is_the_label():
    res = assert_ldp_holds(KRR(3, 1.0), 1.0, name="rr-eps1", **SMALL)
    assert res.label == "rr-eps1" and res.target["mechanism"] == "rr-eps1"


def test_measure_ldp_records_a_measured_result_without_raising_on_a_leak():
    sink = []
    set_sink(sink)
    try:
        res = measure_ldp(Leaky(), name="leaky", **SMALL)
    finally:
        set_sink(None)
    assert sink == [res]
    assert res.threshold is None and res.verdict == "measured" and res.passed
    assert res.value > 3.0 and res.label == "leaky"
    assert res.extra["ratio"] == pytest.approx(res.value / 1.0)  # the mechanism's own claim gives the ratio


def test_measure_ldp_gives_the_figure_assert_ldp_holds_gates():
    measured = measure_ldp(KRR(4, 2.0), seed=3, **SMALL)
    with expect_leak() as info:
        assert_ldp_holds(KRR(4, 2.0), 1.0, seed=3, **SMALL)
    assert info.value.result.value == measured.value and info.value.result.threshold == 1.0


def test_measure_ldp_takes_no_limit():
    with pytest.raises(TypeError):
        measure_ldp(KRR(3, 1.0), 1.0)


def test_hoho_labels_are_stable_too():
    from pytest_privleak.ldp import OUE, hoho_results

    class NoRepr(OUE):
        __repr__ = object.__repr__

    results = hoho_results(NoRepr(4, 1.0), n_inputs=40, repeats=5)
    assert all(r.label == "NoRepr(k=4, epsilon=1, p=0.5, q=0.268941)" for r in results)
    assert hoho_results(NoRepr(4, 1.0), n_inputs=40, repeats=5, label="oue-4")[0].label == "oue-4"
