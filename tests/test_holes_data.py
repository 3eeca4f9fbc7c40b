"""Dataset files that loaded silently or crashed without file:line (issue 23 item 5).

Before: a CoNLL token with U+00A0 lost its second half (the rest read as columns), a zero-width character
made a tag a class of its own, a lone surrogate in a JSON token loaded (and failed later, writing the
report), JSONL nested 100k deep raised a bare RecursionError and a 5000-digit number a ValueError
naming no file.
"""
import pytest

from pytest_privleak.data.conll import load_conll_split
from pytest_privleak.data.loaders import load_jsonl_split, load_three_file_split
from pytest_privleak.data.textfile import DataFormatError, text_problem

GOOD = '{"tokens": ["play", "jazz"], "tags": ["O", "B-genre"], "intent": "PlayMusic"}'


def _conll(tmp_path, text):
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("space", ["\u00a0", "\u2009", "\u3000", "\u202f"])
def test_a_unicode_space_in_a_conll_token_is_refused_not_split(tmp_path, space):
    path = _conll(tmp_path, f"EU B-ORG\nrejects O\n\nNew{space}York B-LOC\nis O\n")
    with pytest.raises(DataFormatError, match=rf"train.txt:4: U\+{ord(space):04X} .* at column 4: it would split the "
                                              r"token in two .*; fix: replace it with a plain space"):
        load_conll_split(path)


@pytest.mark.parametrize("char", ["\u200b", "\u200d", "\u2060", "\u00ad"])
def test_an_invisible_character_in_a_conll_tag_is_refused(tmp_path, char):
    path = _conll(tmp_path, f"Ann B-PER\nsmiles O\n\nBob B-PER{char}\n")
    with pytest.raises(DataFormatError, match=r"train.txt:4: the tag \('B-PER.*'\) holds the invisible format "
                                              rf"character U\+{ord(char):04X}.*; fix: delete"):
        load_conll_split(path)


def test_a_zero_width_joiner_inside_a_conll_token_is_kept(tmp_path):
    # legitimate in tokens (emoji sequences, Persian); only labels must be plain
    utterances = load_conll_split(_conll(tmp_path, "a\u200db O\n"))
    assert utterances[0].tokens == ("a\u200db",)


def test_an_invisible_character_in_three_file_tags_or_intent_is_refused(tmp_path):
    split = tmp_path / "train"
    split.mkdir()
    (split / "seq.in").write_text("play jazz\nplay rock\n", encoding="utf-8")
    (split / "seq.out").write_text("O B-genre\nO B-genre\u200b\n", encoding="utf-8")
    (split / "label").write_text("PlayMusic\nPlayMusic\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"seq.out:2: tag 2 \('B-genre\\u200b'\) holds the invisible"):
        load_three_file_split(split)
    (split / "seq.out").write_text("O B-genre\nO B-genre\n", encoding="utf-8")
    (split / "label").write_text("PlayMusic\nPlay\u200bMusic\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"label:2: the intent \('Play\\u200bMusic'\) holds the invisible"):
        load_three_file_split(split)


@pytest.mark.parametrize("record, fragment", [
    ('{"tokens": ["play", "ja\\ud800zz"], "tags": ["O", "B-genre"], "intent": "PlayMusic"}',
     r"'tokens'\[1\] \('ja\\ud800zz'\) holds a lone surrogate U\+D800 at character 3.*fix: write the character"),
    ('{"tokens": "play jazz", "tags": "O B-genre", "intent": "Play\\udfffMusic"}',
     r"'intent' \('Play\\udfffMusic'\) holds a lone surrogate U\+DFFF"),
    ('{"tokens": ["play", "jazz"], "tags": ["O", "B-genre\\u200b"], "intent": "PlayMusic"}',
     r"'tags'\[1\] \('B-genre\\u200b'\) holds the invisible format character U\+200B"),
    ('{"tokens": "play jazz", "tags": "O B-genre\\ufeff", "intent": "PlayMusic"}', r"'tags'"),
    ('[' * 100_000 + ']' * 100_000, r"JSON nested too deeply to read \(up to 100,000 levels.*fix: write a flat record"),
    ('{"tokens": ["play"], "tags": ["O"], "intent": "PlayMusic", "n": ' + "7" * 5000 + '}',
     r"a JSON value Python cannot convert \(Exceeds the limit .*fix: write numbers of ordinary size"),
], ids=["surrogate-token", "surrogate-intent", "zero-width-tag", "bom-in-tag-string", "nested-100k", "5000-digits"])
def test_jsonl_records_that_loaded_or_crashed_are_refused_at_file_line(tmp_path, record, fragment):
    path = tmp_path / "train.jsonl"
    path.write_text(GOOD + "\n" + record + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train.jsonl:2: .*" + fragment):
        load_jsonl_split(path)


def test_text_problem_leaves_plain_text_alone():
    assert text_problem("B-PER", label=True) is None and text_problem("naïve", label=False) is None
    assert text_problem("a\u200db", label=False) is None and text_problem("a\u200db", label=True) is not None
