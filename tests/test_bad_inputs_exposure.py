"""Bad inputs and faults of exposure and d-exposure: each raises a typed error naming the argument and the fix.

Before issue 12, every case here either reported a figure (an out-of-vocabulary
prefix read as ``<unk>``, NaN probabilities as 0 bits, fewer rows than
sentences as a misaligned figure, a string read letter by letter) or crashed
with a raw message that named neither the argument nor the fix.
"""
import numpy as np
import pytest
import torch

from pytest_privleak.attacks.candidates import OutOfVocabularyError
from pytest_privleak.attacks.exposure.discriminative import DEFAULT_TEMPLATE, d_exposure, template_tokens
from pytest_privleak.attacks.exposure.attack import compute_exposure
from pytest_privleak.attacks.exposure.discriminative_assertion import assert_d_exposure_below, measure_d_exposure
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below, measure_exposure
from pytest_privleak.canaries import canary, custom_pattern
from pytest_privleak.finite import NonFiniteError
from pytest_privleak.targets.vocab import Vocabulary

PIN = canary("pin", 2, seed=1)


class IdScorer:
    """Fast-path scorer: a vocabulary and ``score_token_ids``; ``fault`` replaces some scores."""

    def __init__(self, tokens=None, fault=None, rows=None):
        tokens = (*PIN.pattern.prefix, *PIN.pattern.vocabulary) if tokens is None else tokens
        self.vocab = Vocabulary(("<pad>", "<unk>", *sorted(set(tokens))), ("<pad>", "<unk>"),
                                tuple(sorted(set(PIN.tags))), (PIN.intent,))
        self.fault, self.rows = fault, rows

    def score_token_ids(self, ids, intent, tags):
        out = ids.double().sum(dim=1)
        if self.fault is not None:
            out[::7] = self.fault
        return out[: self.rows] if self.rows is not None else out


class UtteranceScorer:
    """Slow-path scorer (utterances) that says its vocabulary, as a SoftInputModel does."""

    def __init__(self, vocabulary, fault=None):
        self.vocabulary, self.fault = list(vocabulary), fault

    def score(self, utterances):
        out = np.array([len(" ".join(u.tokens)) for u in utterances], dtype=float)
        if self.fault is not None:
            out[-1] = self.fault
        return out


WITHOUT_MY = [t for t in (*PIN.pattern.prefix, *PIN.pattern.vocabulary) if t != "my"]


# --- exposure: out-of-vocabulary canary tokens ----------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: compute_exposure(IdScorer(tokens=WITHOUT_MY), PIN, method="exact"),
    lambda: measure_exposure(IdScorer(tokens=WITHOUT_MY), PIN),
    lambda: assert_exposure_below(IdScorer(tokens=WITHOUT_MY), PIN, 100.0),
    lambda: compute_exposure(UtteranceScorer(["<pad>", "<unk>", *WITHOUT_MY]), PIN, method="exact"),
], ids=["fast-path", "measure", "assert", "utterance-path"])
def test_prefix_token_outside_the_vocabulary_is_refused(call):
    with pytest.raises(OutOfVocabularyError, match=r"prefix and reduced vocabulary V0 .*'my'.*extra_tokens=\['my'\]"):
        call()


def test_custom_pattern_prefix_outside_the_vocabulary_names_every_missing_token():
    pattern = custom_pattern("badge", ("badge", "number"), PIN.pattern.vocabulary, 2, PIN.intent)
    badge = canary(pattern, seed=0)
    with pytest.raises(OutOfVocabularyError, match=r"2 token\(s\).*'badge', 'number'.*extra_tokens=.*"
                                                   r"or measure a canary whose prefix"):
        compute_exposure(IdScorer(), badge)


# --- exposure: non-finite and misshapen scores ----------------------------------------------

@pytest.mark.parametrize("fault", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("method", ["exact", "sampled", "extrapolated"])
def test_non_finite_scores_are_refused(fault, method):
    with pytest.raises(NonFiniteError, match=r"scores IdScorer returned for candidate secrets.*Fix: check the model"):
        compute_exposure(IdScorer(fault=fault), PIN, method=method, references=50, bootstrap=2)


def test_non_finite_scores_on_the_utterance_path_are_refused():
    with pytest.raises(NonFiniteError, match=r"UtteranceScorer.*NaN or infinite.*Fix: "):
        measure_exposure(UtteranceScorer(["<pad>", "<unk>", *PIN.pattern.prefix, *PIN.pattern.vocabulary],
                                         fault=float("nan")), PIN)


def test_fewer_scores_than_candidates_is_refused():
    with pytest.raises(ValueError, match=r"shape \[3\] for 100 candidate sentences.*fix: return one score per"):
        compute_exposure(IdScorer(rows=3), PIN, method="exact")


@pytest.mark.parametrize("argument, value, fragment", [
    ("confidence", 1.5, r"confidence must be a number in \(0, 1\).*fix: e.g. confidence=0.95"),
    ("bootstrap", -1, r"bootstrap must be an integer >= 0.*fix: e.g. bootstrap=30"),
    ("seed", "x", r"seed must be an integer >= 0.*fix: e.g. seed=0"),
    ("name", "", r"name must be a non-empty string.*fix: a stable label"),
    ("name", 7, r"name must be a non-empty string.*fix: a stable label"),
])
def test_bad_exposure_arguments_are_named(argument, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        measure_exposure(IdScorer(), PIN, **{argument: value})


# --- d-exposure ---------------------------------------------------------------------------

TOKENS, BLANK = template_tokens(DEFAULT_TEMPLATE)
WORDS = {"PER": ["Ann", "Bob", "Cy"]}


class Tagger:
    """Token scorer whose output a test can break: NaN rows, missing sentences, short arrays, logits."""

    labels = ["O", "B-PER", "I-PER"]

    def __init__(self, break_with=None):
        self.break_with = break_with

    def token_label_probs(self, sentences):
        out = [np.tile([0.2, 0.7, 0.1], (len(s), 1)) for s in sentences]
        fault = self.break_with
        if fault == "nan":
            out[2][BLANK, 1] = np.nan
        elif fault == "inf":
            out[0][BLANK] = np.inf
        elif fault == "fewer sentences":
            out = out[:-1]
        elif fault == "fewer rows":
            out[1] = out[1][:BLANK]
        elif fault == "labels":
            out = [np.hstack([p, p]) for p in out]
        elif fault == "logits":
            out = [4.0 * p - 1.0 for p in out]
        elif fault == "tensor nan":
            out = [torch.tensor(p) for p in out]
            out[1][BLANK, 1] = float("nan")
        return out


@pytest.mark.parametrize("fault", ["nan", "inf", "tensor nan"])
def test_non_finite_probabilities_are_refused(fault):
    with pytest.raises(NonFiniteError, match=r"label probabilities Tagger.token_label_probs returned.*Fix: check "
                                             r"the tagger"):
        measure_d_exposure(Tagger(fault), {"PER": "Chelsea"}, class_words=WORDS)


@pytest.mark.parametrize("fault, fragment", [
    ("fewer sentences", r"returned 3 arrays for 4 sentences; fix: return one \[n_tokens, n_labels\] array"),
    ("fewer rows", rf"shape \[{BLANK}, 3\] for sentence 1 \('There are many people who like Ann'\), expected "
                   rf"\[{len(TOKENS)}, 3\].*fix: one row per token"),
    ("labels", r"shape \[7, 6\].*3 labels \['O', 'B-PER', 'I-PER'\].*fix: one row per token, one column per label"),
    ("logits", r"values in \[-0.6, 1.8\], not probabilities; fix: return softmax probabilities"),
])
def test_misshapen_or_unnormalised_probabilities_are_refused(fault, fragment):
    with pytest.raises(ValueError, match=fragment):
        d_exposure(Tagger(fault), {"PER": "Chelsea"}, WORDS)


@pytest.mark.parametrize("inserted, words, error, fragment", [
    ({"PER": "Chelsea"}, {"PER": "Ann Bob"}, TypeError,
     r"class_words\['PER'\] is str \('Ann Bob'\), not a list of words; fix: .*letter by letter"),
    ({"PER": "New York"}, WORDS, ValueError,
     r"inserted\['PER'\] \('New York'\) holds whitespace U\+0020.*fix: insert a one-word entity"),
    ({"PER": "Chelsea"}, {"PER": ["Ann", "Bo\u2028b"]}, ValueError,
     r"class_words\['PER'\]\[1\] .* holds whitespace U\+2028 \(LINE SEPARATOR\).*fix: give one-word entities"),
    ({"PER": "Chelsea"}, 42, TypeError, r"class_words must map each class to its words.*fix: class_words="),
])
def test_bad_insertions_and_class_words_are_named(inserted, words, error, fragment):
    with pytest.raises(error, match=fragment):
        measure_d_exposure(Tagger(), inserted, class_words=words)


def test_bad_d_exposure_name_and_limit_are_named():
    with pytest.raises(ValueError, match=r"name must be a non-empty string.*fix: a stable label"):
        measure_d_exposure(Tagger(), {"PER": "Chelsea"}, class_words=WORDS, name="  ")
    with pytest.raises(ValueError, match=r"max_bits must be a finite number >= 0.*fix: e.g. max_bits="):
        assert_d_exposure_below(Tagger(), {"PER": "Chelsea"}, float("nan"), class_words=WORDS)


@pytest.mark.parametrize("call", [
    lambda: assert_exposure_below(IdScorer(), PIN, float("inf")),
    lambda: assert_d_exposure_below(Tagger(), {"PER": "Chelsea"}, float("inf"), class_words=WORDS),
], ids=["exposure", "d-exposure"])
def test_an_infinite_limit_is_refused(call):
    # before issue 23 item 5, max_bits=inf was accepted: a limit that passes every figure
    with pytest.raises(ValueError, match=r"max_bits must be a finite number >= 0 .*got inf; fix: e.g. max_bits=4.0"):
        call()
