"""The class words W_i of d-exposure (d-exposure-discriminative §3.1, Table 1) on hand-made corpora."""
from types import SimpleNamespace

import pytest

from pytest_privleak.attacks.exposure.discriminative import (
    class_words, exclusive_class_words, one_word_entities, paper_class_words)
from pytest_privleak.data.types import NLUDataset, Utterance


def corpus(*rows):
    train = tuple(Utterance(tuple(text.split()), tuple(tags.split()), "ner") for text, tags in rows)
    return NLUDataset(name="hand-made", train=train, valid=(), test=())


# BIO: Williams is a one-word PER once and also the surname inside "John Williams";
# Smith is a one-word PER and also occurs outside any entity (as a plain word, tagged O);
# Jordan is a one-word PER and a one-word LOC (a candidate for s, in no W_i);
# Acme is only ever inside the multi-word ORG "Acme Corp" (never a one-word entity).
BIO = corpus(
    ("John Williams spoke", "B-PER I-PER O"),
    ("Williams won", "B-PER O"),
    ("Smith agreed", "B-PER O"),
    ("the Smith of the village", "O O O O O"),
    ("Jordan played", "B-PER O"),
    ("flights to Jordan", "O O B-LOC"),
    ("Paris is big", "B-LOC O O"),
    ("Acme Corp grew", "B-ORG I-ORG O"),
    ("Initech hired Bob", "B-ORG O B-PER"),
)


def test_one_word_entities_reads_bio_iobes_and_bilou():
    assert one_word_entities("B-PER I-PER O B-LOC".split()) == [None, None, None, "LOC"]
    assert one_word_entities("S-PER B-ORG E-ORG U-LOC".split()) == ["PER", None, None, "LOC"]
    assert one_word_entities("B-PER B-PER I-LOC".split()) == ["PER", "PER", None]   # I- of another class: new chunk


def test_paper_rule_keeps_the_surname_the_strict_rule_drops():
    paper = paper_class_words(BIO, ["PER", "LOC", "ORG"])
    strict = exclusive_class_words(BIO, ["PER", "LOC", "ORG"])
    # the paper's rule: a one-word entity of C and never a one-word entity of another class
    assert paper == {"PER": ("Bob", "Smith", "Williams"), "LOC": ("Paris",), "ORG": ("Initech",)}
    # the strict rule drops Williams (inside "John Williams") and Smith (also tagged O)
    assert strict == {"PER": ("Bob",), "LOC": ("Paris",), "ORG": ("Initech",)}
    assert "Jordan" not in paper["PER"] + paper["LOC"]           # S-PER and S-LOC: ambiguous, in neither
    assert "Acme" not in paper["ORG"]                            # never a one-word entity


def test_paper_rule_on_iobes_tags():
    # NLUDataset holds BIO only; the rule reads any object with .train of tokens and tags (e.g. IOBES CoNLL)
    data = SimpleNamespace(train=[SimpleNamespace(tokens=tuple(t.split()), tags=tuple(g.split())) for t, g in (("John Williams spoke", "B-PER E-PER O"), ("Williams won", "S-PER O"),
                  ("Williams F1 team", "S-ORG O O"), ("Lee left", "S-PER O"), ("in Rome", "O S-LOC"))])
    assert paper_class_words(data, ["PER", "LOC"]) == {"PER": ("Lee",), "LOC": ("Rome",)}   # Williams: PER and ORG
    assert class_words(data, ["PER"], "exclusive") == {"PER": ("Lee",)}


def test_rule_errors_name_the_fix():
    with pytest.raises(ValueError, match="'paper' .* or 'exclusive'"):
        class_words(BIO, ["PER"], "loose")
    with pytest.raises(ValueError, match=r"\['MISC'\].*class names"):
        paper_class_words(BIO, ["PER", "MISC"])
