"""CoNLL column loader (schemes, clear errors) and the synthetic NER corpus."""
from collections import defaultdict

import pytest

from pytest_privleak.attacks.exposure.discriminative import exclusive_class_words
from pytest_privleak.data.conll import NER_INTENT, load_conll, load_conll_split, write_conll
from pytest_privleak.data.loaders import DataFormatError
from pytest_privleak.data.synthetic_ner import NER_CLASSES, ambiguous_words, generate_ner_like

GOOD = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_sentences_tags_and_skips_docstart(tmp_path):
    sents = load_conll_split(write(tmp_path, "train.txt", GOOD))
    assert [s.tokens for s in sents] == [("EU", "rejects", "German", "call"), ("Peter", "Blackburn")]
    assert sents[1].tags == ("B-PER", "I-PER") and sents[0].intent == NER_INTENT


def test_iob1_and_bioes_are_converted_to_bio(tmp_path):
    iob1 = write(tmp_path, "a.txt", "Peter I-PER\nBlackburn I-PER\nand O\nUN I-ORG\nB B-ORG\n")
    assert load_conll_split(iob1, scheme="iob1")[0].tags == ("B-PER", "I-PER", "O", "B-ORG", "B-ORG")
    bioes = write(tmp_path, "b.txt", "Peter B-PER\nBlackburn E-PER\nin O\nParis S-LOC\n")
    assert load_conll_split(bioes, scheme="bioes")[0].tags == ("B-PER", "I-PER", "O", "B-LOC")


@pytest.mark.parametrize("text, line, needle", [
    ("EU B-ORG\nrejects\n", 2, "one column"),
    ("EU B-ORG\nrejects O extra\n", 2, "columns"),
    ("EU B-ORG\nrejects OUT\n", 2, "not an entity tag"),
    ("a O\n\nPeter I-PER\n", 3, "iob1"),
    ("Paris S-LOC\n", 1, "bioes"),
])
def test_errors_name_file_line_and_fix(tmp_path, text, line, needle):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(DataFormatError) as info:
        load_conll_split(path)
    assert info.value.line == line and info.value.path == path
    assert needle in str(info.value) and "fix:" in str(info.value) and str(path) in str(info.value)


def test_folder_layout_and_missing_split(tmp_path):
    write(tmp_path, "train.txt", GOOD)
    with pytest.raises(DataFormatError, match="no valid file"):
        load_conll(tmp_path)
    write(tmp_path, "dev.txt", GOOD)
    ds = load_conll(tmp_path)
    assert ds.sizes == {"train": 2, "valid": 2, "test": 0}


def test_byte_order_mark_at_file_start_is_dropped(tmp_path):
    # Before issue 12 the first token was '\ufeffEU'.
    path = tmp_path / "train.txt"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    assert load_conll_split(path)[0].tokens == ("EU", "rejects", "German", "call")


def test_write_then_read_round_trip(tmp_path):
    data = generate_ner_like(n_train=20, n_valid=0, n_test=0)
    write_conll(tmp_path / "x.txt", data.train)
    assert load_conll_split(tmp_path / "x.txt") == data.train


def test_synthetic_corpus_is_deterministic_and_seeded():
    a, b = generate_ner_like(seed=3), generate_ner_like(seed=3)
    assert a.content_hash() == b.content_hash()
    assert generate_ner_like(seed=4).content_hash() != a.content_hash()
    assert a.sizes == {"train": 1000, "valid": 100, "test": 100}


def test_ambiguous_words_appear_under_several_classes_and_others_under_one():
    data = generate_ner_like()
    seen = defaultdict(set)
    for u in data.train:
        for w, t in zip(u.tokens, u.tags):
            if t != "O":
                seen[w].add(t[2:])
    for word, classes in ambiguous_words().items():
        assert seen[word] == set(classes), word
    assert {"Williams", "Chelsea", "Melbourne"} <= set(ambiguous_words())
    exclusive = exclusive_class_words(data, NER_CLASSES)
    for cls, words in exclusive.items():
        assert len(words) >= 30 and not set(words) & set(ambiguous_words())
        assert all(seen[w] == {cls} for w in words)
