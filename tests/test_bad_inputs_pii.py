"""Bad inputs to the PII audit: each is a clear error naming the argument and the fix, never a silent pass."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_privleak.attacks.extraction.pii.attack import NoPiiFoundError, UnscorablePiiError, audit_pii
from pytest_privleak.attacks.extraction.pii.assertion import assert_pii_extraction_at_most, measure_pii_exposure
from pytest_privleak.data.pii_detectors import NameListDetector, RegexDetector, resolve_detectors
from pytest_privleak.data.synthetic_pii import generate_pii_corpus
from pytest_privleak.finite import NonFiniteError

TEXTS = ["please call me at 5 5 5 0 1 4 2 7 7 3 today", "my order arrived damaged"]


class Flat:
    def score(self, utterances):
        return np.ones(len(utterances))


def test_a_detector_that_is_not_a_detector_is_named_by_its_position():
    with pytest.raises(ValueError, match=r"detectors\[1\]: unknown detector 'not-a-detector'"):
        resolve_detectors(["phone", "not-a-detector"])
    with pytest.raises(TypeError, match=r"detectors\[1\] is function, not a PII detector.*kind.*find"):
        audit_pii(Flat(), TEXTS, ["phone", lambda text: []])
    with pytest.raises(TypeError, match=r"detectors is int, not a PII detector"):
        audit_pii(Flat(), TEXTS, 3)


def test_unknown_detector_names_list_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown detector 'iban'; known: 'default', 'address', 'card', 'email'"):
        audit_pii(Flat(), TEXTS, ["phone", "iban"])
    with pytest.raises(ValueError, match="detectors is empty"):
        audit_pii(Flat(), TEXTS, [])


def test_data_without_pii_is_an_error_not_a_pass():
    with pytest.raises(NoPiiFoundError, match=r"found no PII to audit in 1 training texts.*not a pass.*fix"):
        assert_pii_extraction_at_most(Flat(), ["my order arrived damaged"], 0.0)
    with pytest.raises(NoPiiFoundError, match=r"1 found, none at least 2 times"):
        measure_pii_exposure(Flat(), TEXTS, min_count=2)


def test_a_lone_email_has_no_space_to_rank_in_and_is_not_a_pass():
    with pytest.raises(NoPiiFoundError, match="same-format space of 2 or more"):
        assert_pii_extraction_at_most(Flat(), ["mail anna@post.test"], 0.0, ["email"])


def test_a_model_without_score_and_a_bad_dataset():
    with pytest.raises(TypeError, match=r"model is object, not a sequence scorer.*score\(utterances\)"):
        audit_pii(object(), TEXTS)
    with pytest.raises(TypeError, match="dataset must be an NLUDataset"):
        audit_pii(Flat(), "please call me at 555-014-2773")
    with pytest.raises(TypeError, match=r"dataset\[1\] is int"):
        audit_pii(Flat(), ["call 555-014-2773", 3])


def test_non_finite_and_misshapen_scores_are_refused():
    class Nan:
        def score(self, utterances):
            out = np.zeros(len(utterances))
            out[-1] = np.nan
            return out

    class Short:
        def score(self, utterances):
            return np.zeros(len(utterances) - 1)

    with pytest.raises(NonFiniteError, match=r"candidates of PII item <phone [0-9a-f]{8} len=19>"):
        audit_pii(Nan(), TEXTS)
    with pytest.raises(ValueError, match="returned shape .* one score per sentence"):
        audit_pii(Short(), TEXTS)


def test_candidates_the_model_cannot_spell_are_refused_without_quoting_them():
    class WordModel(Flat):
        vocabulary = ("please", "call", "me", "at", "today", "5", "0")   # lacks most digits

    with pytest.raises(UnscorablePiiError, match=r"not in the model's vocabulary.*fix") as error:
        audit_pii(WordModel(), TEXTS)
    assert "5 5 5 0" not in str(error.value)


def test_bad_arguments_are_named_with_their_fix():
    for kwargs, match in (({"method": "greedy"}, "method='greedy' is not one of"),
                          ({"context": "both"}, "context='both' is not one of"),
                          ({"extraction": "beam"}, "extraction='beam' is not one of"),
                          ({"references": 8}, "references must be an integer >= 16"),
                          ({"min_count": 0}, "min_count must be an integer >= 1"),
                          ({"show_pii": "yes"}, "show_pii must be True or False"),
                          ({"confidence": 1.5}, "confidence must be a number in"),
                          ({"salt": ""}, "salt must be a non-empty string")):
        with pytest.raises(ValueError, match=match):
            audit_pii(Flat(), TEXTS, **kwargs)
    with pytest.raises(ValueError, match=r"max_share must be a number in \[0, 1.0\]"):
        assert_pii_extraction_at_most(Flat(), TEXTS, 1.5)
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        measure_pii_exposure(Flat(), TEXTS, name="")


def test_detector_spans_outside_the_text_and_bad_lists():
    class Wild:
        kind = "wild"

        def find(self, text):
            return [(0, len(text) + 5)]

    class Odd:
        kind = "odd"

        def find(self, text):
            return ["everything"]

    with pytest.raises(ValueError, match=r"span \(0, \d+\) outside the text.*fix"):
        audit_pii(Flat(), TEXTS, [Wild()])
    with pytest.raises(TypeError, match=r"returned span 0 = 'everything'.*\(start, end\)"):
        audit_pii(Flat(), TEXTS, [Odd()])
    with pytest.raises(ValueError, match="first_names must be a list of names"):
        NameListDetector("anna", ["berg"])
    with pytest.raises(ValueError, match="last_names must be a non-empty list of one-word names"):
        NameListDetector(["anna"], ["van berg"])
    with pytest.raises(ValueError, match="kind must be a non-empty string"):
        RegexDetector("", r"x")


def test_bad_corpus_arguments():
    for kwargs, match in (({"repeats": ()}, "repeats must be a non-empty list"),
                          ({"repeats": (1, 0)}, "repeats entries must be an integer >= 1"),
                          ({"kinds": ("phone", "iban")}, "kinds must be a non-empty list"),
                          ({"digits": "words"}, "digits must be 'spaced' or 'compact'")):
        with pytest.raises(ValueError, match=match):
            generate_pii_corpus(0, **kwargs)


def test_generation_needs_a_model_that_generates_and_sound_options():
    with pytest.raises(TypeError, match=r"extraction='generation' needs a model that generates.*fix"):
        audit_pii(Flat(), TEXTS, extraction="generation")
    for generation, match in (({"method": "telepathy"}, "generation method 'telepathy' is not one of"),
                              ({"budget": 0}, "generation budget must be an integer >= 1"),
                              ({"beams": 3}, r"generation has unknown option\(s\) \['beams'\]"),
                              ([("budget", 3)], "generation must be a dict")):
        with pytest.raises(ValueError, match=match):
            audit_pii(Flat(), TEXTS, generation=generation)
