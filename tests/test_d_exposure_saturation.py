"""d-exposure ranks cannot saturate in float32 (issue 27 item 2): ranks on the log-complement, ties reported."""
import math

import numpy as np
import pytest

from pytest_privleak.attacks.exposure.discriminative import DEFAULT_TEMPLATE, d_exposure, log_complement, template_tokens
from pytest_privleak.attacks.exposure.discriminative_assertion import measure_d_exposure
from pytest_privleak.finite import NonFiniteError
from pytest_privleak.protocols import LogTokenScorer, TokenScorer
from pytest_privleak.results import set_sink

_, BLANK = template_tokens(DEFAULT_TEMPLATE)
LABELS = ["O", "B-PER", "B-ORG"]


def row(other: float) -> list[float]:
    """B-PER holds all but ``2 * other`` of the mass; O and B-ORG ``other`` each."""
    return [other, 1.0 - 2.0 * other, other]


class Float32Tagger:
    """A tagger returning float32 probabilities, as a CRF's exp(log-marginals) in float32 does."""

    labels = LABELS

    def __init__(self, rows):
        self.rows = rows

    def token_label_probs(self, sentences):
        out = []
        for s in sentences:
            arr = np.tile(np.float32([1.0, 0.0, 0.0]), (len(s), 1))
            arr[BLANK] = np.float32(self.rows[s[BLANK]])
            out.append(arr)
        return out


def memorised():
    # Chelsea is memorised: 1 - conf = 2e-12. Twenty class words are learnt well (1 - conf = 2e-8) and two
    # better than Chelsea (2e-13). In float32 every one of these confidences is exactly 1.0.
    rows = {"Chelsea": row(1e-12), **{f"W{i}": row(1e-8) for i in range(20)}, "Top1": row(1e-13),
            "Top2": row(1e-13)}
    return Float32Tagger(rows), {"PER": [f"W{i}" for i in range(20)] + ["Top1", "Top2"]}


def test_saturated_float32_confidences_still_rank_the_memorised_word():
    tagger, words = memorised()
    probs = tagger.token_label_probs([("x",) * BLANK + (w,) for w in ["Chelsea", *words["PER"]]])
    assert all(p[BLANK, 1] == np.float32(1.0) for p in probs)       # the float32 confidences all read 1.0
    per = d_exposure(tagger, {"PER": "Chelsea"}, words).per_class["PER"]
    # only Top1 and Top2 are at least as confident: Pr = (1 + 2) / (22 + 1); before issue 27 all 22 tied at
    # 1.0 and counted against Chelsea, Pr = 23 / 23 = 0 bits
    assert per.at_least == 2 and per.ties == 0
    assert per.value == pytest.approx(math.log2(23) - math.log2(3))
    assert per.log_complement == pytest.approx(math.log(np.float32(1e-12) * 2), rel=1e-6)


def test_ties_at_float_resolution_are_counted_and_reported():
    rows = {"Chelsea": row(1e-12), "Twin": row(1e-12), "Low": row(1e-3)}
    sink: list = []
    set_sink(sink)
    try:
        result = measure_d_exposure(Float32Tagger(rows), {"PER": "Chelsea"}, class_words={"PER": ["Twin", "Low"]})
    finally:
        set_sink(None)
    assert result.extra["ties_PER"] == 1.0
    assert result.value == pytest.approx(math.log2(3) - math.log2(2))   # the tie counts against s (eq. 2's >=)
    assert "1 of 2 class words at least as confident, 1 of them tied at float resolution" in result.explain()


class LogTagger:
    """A LogTokenScorer whose other-label probabilities underflow even float64 (e^-800, e^-900)."""

    labels = LABELS

    def __init__(self, logs):
        self.logs = logs

    def _rows(self, sentences):
        out = []
        for s in sentences:
            arr = np.tile([0.0, -np.inf, -np.inf], (len(s), 1))
            arr[BLANK] = self.logs[s[BLANK]]
            out.append(arr)
        return out

    def token_label_log_probs(self, sentences):
        return self._rows(sentences)

    def token_label_probs(self, sentences):
        return [np.exp(a) for a in self._rows(sentences)]


def test_log_space_scorer_is_read_in_log_space():
    tagger = LogTagger({"Chelsea": [-900.0, 0.0, -900.0], "Ann": [-800.0, 0.0, -800.0], "Bob": [-800.0, 0.0, -800.0]})
    assert isinstance(tagger, LogTokenScorer) and isinstance(Float32Tagger({}), TokenScorer)
    assert not isinstance(Float32Tagger({}), LogTokenScorer)
    per = d_exposure(tagger, {"PER": "Chelsea"}, {"PER": ["Ann", "Bob"]}).per_class["PER"]
    assert (per.at_least, per.ties, per.value) == (0, 0, pytest.approx(math.log2(3)))
    assert per.log_complement == pytest.approx(-900.0 + math.log(2))


def test_log_complement_is_the_logsumexp_of_the_other_labels():
    with np.errstate(divide="ignore"):
        logs = np.log(np.array([[0.25, 0.5, 0.25], [0.0, 1.0, 0.0]]))
    np.testing.assert_allclose(log_complement(logs, 1), [math.log(0.5), -np.inf])


@pytest.mark.parametrize("logs, error, fragment", [
    ([np.nan, 0.0, -1.0], NonFiniteError, "token_label_log_probs returned"),
    ([np.inf, 0.0, -1.0], NonFiniteError, "token_label_log_probs returned"),
    ([2.0, 5.0, 1.0], ValueError, "not logits"),                     # logits, not log-probabilities
])
def test_bad_log_probabilities_are_refused(logs, error, fragment):
    tagger = LogTagger({"Chelsea": logs, "Ann": [-5.0, -0.01, -5.0]})
    with pytest.raises(error, match=fragment):
        d_exposure(tagger, {"PER": "Chelsea"}, {"PER": ["Ann"]})
