"""d-exposure (d-exposure-discriminative §3.1, eqs. 2-3): hand-derived values, then end to end on a tagger."""
import math

import numpy as np
import pytest

from pytest_privleak.attacks.exposure.discriminative import (
    DEFAULT_TEMPLATE, PAPER_INSERTIONS, ambiguous_phrase, class_d_exposure, class_words, d_exposure, insert_phrases,
    template_tokens)
from pytest_privleak.attacks.exposure.figure import chance_exposure
from pytest_privleak.attacks.exposure.discriminative_assertion import assert_d_exposure_below, measure_d_exposure
from pytest_privleak.finite import NonFiniteError
from pytest_privleak.data.synthetic_ner import NER_CLASSES, generate_ner_like
from pytest_privleak.results import expect_leak, set_sink
from pytest_privleak.targets import train_target


# --- eq. 2 by hand ------------------------------------------------------------------------

def test_eq2_counts_words_at_least_as_confident():
    # 7 class words; 3 correctly labelled ones are at least as confident as s (one ties):
    # Pr = (1 + 3) / (7 + 1) -> 1 bit
    conf = np.array([0.9, 0.8, 0.5, 0.4, 0.3, 0.2, 0.1])
    value, k = class_d_exposure(0.5, True, conf, np.ones(7, bool))
    assert (k, value) == (3, pytest.approx(1.0))


def test_eq2_zero_when_s_is_mislabelled_and_max_when_s_beats_all():
    conf = np.array([0.9, 0.8, 0.7])
    assert class_d_exposure(0.99, False, conf, np.ones(3, bool))[0] == 0.0
    assert class_d_exposure(0.99, True, conf, np.ones(3, bool))[0] == pytest.approx(2.0)  # log2 |C_i|, |C_i| = 4


def test_eq2_mislabelled_class_words_count_as_less_confident():
    conf = np.array([0.9, 0.8, 0.7])
    value, k = class_d_exposure(0.5, True, conf, np.array([False, False, True]))
    assert k == 1 and value == pytest.approx(math.log2(4) - math.log2(2))


class StubTagger:
    """Token scorer with a fixed B-<class> probability per filled word at the blank."""

    labels = ["O", "B-PER", "B-ORG"]

    def __init__(self, probs):
        self.probs = probs  # word -> [p_O, p_PER, p_ORG]

    def token_label_probs(self, sentences):
        _, blank = template_tokens(DEFAULT_TEMPLATE)
        out = []
        for s in sentences:
            arr = np.tile([1.0, 0.0, 0.0], (len(s), 1))
            arr[blank] = self.probs[s[blank]]
            out.append(arr)
        return out


def test_eq3_averages_classes_on_a_stub():
    tagger = StubTagger({"Chelsea": [0.05, 0.9, 0.05], "Williams": [0.1, 0.5, 0.4],
                         "Ann": [0.0, 0.95, 0.05], "Bob": [0.0, 0.7, 0.3], "Cy": [0.6, 0.3, 0.1],
                         "Acme": [0.0, 0.1, 0.9], "Zed": [0.0, 0.2, 0.8]})
    words = {"PER": ["Ann", "Bob", "Cy"], "ORG": ["Acme", "Zed"]}
    m = d_exposure(tagger, {"PER": "Chelsea", "ORG": "Williams"}, words)
    # PER: Ann (0.95) >= 0.9; Bob below; Cy mislabelled -> Pr = 2/4 -> 1 bit. ORG: Williams labelled PER -> 0
    assert m.per_class["PER"].value == pytest.approx(1.0)
    assert m.per_class["ORG"].value == 0.0 and m.per_class["ORG"].predicted == "B-PER"
    assert m.value == pytest.approx(0.5)
    assert m.chance == pytest.approx((chance_exposure(4) + chance_exposure(3)) / 2)
    assert m.ceiling == pytest.approx((2.0 + math.log2(3)) / 2)


STUB_PROBS = {"Chelsea": [0.05, 0.9, 0.05], "Ann": [0.0, 0.95, 0.05], "Bob": [0.0, 0.7, 0.3], "Cy": [0.6, 0.3, 0.1]}


def test_measure_records_an_ungated_result_and_name_labels_it():
    sink: list = []
    set_sink(sink)
    try:
        words = {"PER": ["Ann", "Bob", "Cy"]}
        result = measure_d_exposure(StubTagger(STUB_PROBS), {"PER": "Chelsea"}, class_words=words)
        named = measure_d_exposure(StubTagger(STUB_PROBS), {"PER": "Chelsea"}, class_words=words, name="chelsea x64")
    finally:
        set_sink(None)
    assert sink == [result, named]
    assert result.threshold is None and result.verdict == "measured"
    assert result.value == pytest.approx(1.0)          # as in the eq. 3 stub above: Pr = 2/4
    assert result.label == "Chelsea as PER" and named.label == "chelsea x64"
    assert result.extra == {"d_exposure_PER": pytest.approx(1.0), "d_exposure_mean": pytest.approx(1.0),
                            "ties_PER": 0.0}


def test_nan_probability_is_refused_not_zero_bits():
    # Before issue 12: NaN compares false, so Chelsea looked mislabelled and the figure was 0 bits.
    probs = {**STUB_PROBS, "Chelsea": [np.nan, np.nan, np.nan]}
    with pytest.raises(NonFiniteError, match="label probabilities StubTagger.token_label_probs returned"):
        assert_d_exposure_below(StubTagger(probs), {"PER": "Chelsea"}, 1.0, class_words={"PER": ["Ann", "Bob"]})


def test_template_and_class_errors_are_clear():
    with pytest.raises(ValueError, match="exactly one '___'"):
        template_tokens("no blank here")
    with pytest.raises(ValueError, match="no label 'S-LOC' or 'B-LOC'"):
        d_exposure(StubTagger({}), {"LOC": "Melbourne"}, {"LOC": ["X"]})
    with pytest.raises(TypeError, match="token scorer"):
        d_exposure(object(), {"PER": "x"}, {"PER": ["y"]})


def test_phrase_and_insertion():
    phrase = ambiguous_phrase("Williams", "ORG")
    assert phrase.text == "There are many people who like Williams"
    assert phrase.tags == ("O",) * 6 + ("B-ORG",)
    data = generate_ner_like(n_train=50, n_valid=5, n_test=0)
    more = insert_phrases(data, [phrase], 4, seed=1)
    assert len(more.train) == 54 and sum(u == phrase for u in more.train) == 4
    assert insert_phrases(data, [phrase], 0) is data
    assert insert_phrases(data, [phrase], 4, seed=1) == more


# --- end to end (§4.2: d-exposure grows with repetitions), the paper's tagger at 6 epochs ----------------------

NER = dict(epochs=6)   # the paper's tagger (SGD, dropout 0.5, lr decay), fewer epochs than its 25: CI-sized


@pytest.fixture(scope="module")
def corpus():
    return generate_ner_like(n_train=600, n_valid=60, n_test=100, seed=0)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def words(corpus):
    return class_words(corpus, NER_CLASSES)


def tagger(corpus, repeats, seed=0):
    phrases = [ambiguous_phrase(word, cls) for cls, word in PAPER_INSERTIONS.items()]
    return train_target("ner-bilstm-crf", insert_phrases(corpus, phrases, repeats), seed=seed, progress=False, **NER)


def test_never_inserted_passes_and_repeated_fails(corpus, words):
    clean = tagger(corpus, 0)
    assert clean.tag_accuracy(corpus.test) > 0.95 and clean.entity_f1["test"]["f1"] > 0.9
    low = assert_d_exposure_below(clean, PAPER_INSERTIONS, 1.0, class_words=corpus)
    assert low.value < 0.5, low.explain()
    leaky = tagger(corpus, 64)
    with expect_leak() as info:
        assert_d_exposure_below(leaky, PAPER_INSERTIONS, 1.0, class_words=words)
    result = info.value.result
    assert result.value > low.value + 1.5
    assert result.attack == "d-exposure" and {f"d_exposure_{c}" for c in PAPER_INSERTIONS} < set(result.extra)
    assert "There are many people who like ___" in str(info.value)


@pytest.mark.slow
def test_d_exposure_grows_with_repetitions(corpus, words):
    for seed in (0, 1):
        values = [d_exposure(tagger(corpus, r, seed), PAPER_INSERTIONS, words).value for r in (0, 4, 16, 64)]
        assert values[0] < 0.5, (seed, values)
        assert all(a <= b + 0.25 for a, b in zip(values, values[1:])), (seed, values)
        assert values[-1] > values[0] + 1.5, (seed, values)
