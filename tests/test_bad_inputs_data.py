"""Malformed dataset files: each raises DataFormatError naming ``file:line``, what is wrong and the fix.

Before issue 12 these cases split a line inside a token (U+2028, U+0085 and the
other ``str.splitlines`` breaks: the error, if any, named another file and
line), kept a byte-order mark or NUL inside a token, crashed with a raw
``TypeError``/``ValueError`` naming no file (a JSON list as ``split``, a token
holding a space) or named no line (bytes that are not UTF-8).
"""
import json

import pytest

from pytest_privleak.data import DataFormatError, load_jsonl, load_jsonl_split, load_three_file_split
from pytest_privleak.data.conll import load_conll_split
from pytest_privleak.data.types import Utterance

SEQ_OUT = "O O B-genre\nO O B-city\n"
LABEL = "PlayMusic\nGetWeather\n"


def three_file(folder, seq_in: bytes):
    folder.mkdir(exist_ok=True)
    (folder / "seq.in").write_bytes(seq_in)
    (folder / "seq.out").write_text(SEQ_OUT, encoding="utf-8")
    (folder / "label").write_text(LABEL, encoding="utf-8")
    return folder


def expect(call, arg, where, *fragments):
    """The call raises DataFormatError whose message starts with ``where`` and holds the fragments and a fix."""
    with pytest.raises(DataFormatError) as info:
        call(arg)
    message = str(info.value)
    assert message.startswith(f"{where}: "), message
    assert "; fix: " in message and info.value.fix, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return info.value


# --- three-file: characters that split or corrupt a line -----------------------------------

@pytest.mark.parametrize("char, name", [
    ("\u2028", "U+2028 (LINE SEPARATOR)"), ("\u2029", "U+2029 (PARAGRAPH SEPARATOR)"),
    ("\x85", "U+0085 (NEXT LINE)"), ("\x0b", "U+000B (LINE TABULATION)"), ("\x0c", "U+000C (FORM FEED)"),
    ("\x1c", "U+001C (FILE SEPARATOR)"), ("\x1d", "U+001D (GROUP SEPARATOR)"),
    ("\x1e", "U+001E (RECORD SEPARATOR)"), ("\r", "U+000D (CARRIAGE RETURN)"),
])
def test_line_break_characters_inside_a_line_are_named_not_split(tmp_path, char, name):
    seq_in = f"play some jazz\nweather in{char}york\n".encode()
    expect(load_three_file_split, three_file(tmp_path, seq_in), f"{tmp_path / 'seq.in'}:2",
           f"{name} at column 11", "only \\n (or \\r\\n) ends a line", "replace it with a space")


def test_byte_order_mark_inside_the_text_is_an_error(tmp_path):
    seq_in = "play some jazz\nweather\ufeff in york\n".encode()
    expect(load_three_file_split, three_file(tmp_path, seq_in), f"{tmp_path / 'seq.in'}:2",
           "byte-order mark U+FEFF", "column 8", "only the very first character of a file")


def test_nul_inside_a_token_is_an_error(tmp_path):
    seq_in = b"play some jazz\x00\nweather in york\n"
    expect(load_three_file_split, three_file(tmp_path, seq_in), f"{tmp_path / 'seq.in'}:1",
           "NUL character U+0000", "column 15", "UTF-16", "save the file as UTF-8")


def test_latin1_bytes_name_line_and_byte(tmp_path):
    seq_in = "play some jazz\nweather in k\u00f6ln\n".encode("latin-1")
    expect(load_three_file_split, three_file(tmp_path, seq_in), f"{tmp_path / 'seq.in'}:2",
           "not valid UTF-8: byte 0xF6 at byte 13 of the line (offset 27 of the file)", "iconv")


def test_utf16_file_is_named_as_such(tmp_path):
    seq_in = "play some jazz\nweather in york\n".encode("utf-16")
    expect(load_three_file_split, three_file(tmp_path, seq_in), f"{tmp_path / 'seq.in'}:1",
           "the file is UTF-16", "save it as UTF-8")


# --- CoNLL ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, fragment", [
    ("EU B-ORG\nre\u2028jects O\n", 2, "U+2028 (LINE SEPARATOR) at column 3"),
    ("EU B-ORG\nrejects\x00 O\n", 2, "NUL character U+0000"),
    ("EU B-ORG\n\n\ufeffPeter B-PER\n", 3, "byte-order mark U+FEFF (ZERO WIDTH NO-BREAK SPACE) at column 1"),
    ("EU B-ORG\nre\x85jects O\n", 2, "U+0085 (NEXT LINE)"),
])
def test_conll_bad_characters_name_file_line(tmp_path, text, line, fragment):
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    expect(load_conll_split, path, f"{path}:{line}", fragment)


def test_conll_non_utf8_names_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("EU B-ORG\n\nM\u00fcnchen B-LOC\n".encode("latin-1"))
    expect(load_conll_split, path, f"{path}:3", "not valid UTF-8: byte 0xFC at byte 2 of the line")


# --- JSON Lines -----------------------------------------------------------------------------

ROW = {"tokens": ["play", "jazz"], "tags": ["O", "B-genre"], "intent": "PlayMusic", "split": "train"}


def jsonl(tmp_path, bad, raw: bool = False):
    path = tmp_path / "all.jsonl"
    second = bad if raw else json.dumps(bad)
    path.write_text(json.dumps(ROW) + "\n" + second + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("bad, fragments", [
    ({**ROW, "split": ["train"]}, ["'split' is ['train'] (a JSON list)", 'set "split" to one of train']),
    ({**ROW, "split": {"name": "train"}}, ["'split' is {'name': 'train'} (a JSON dict)", "one of train"]),
    ({**ROW, "tokens": ["play", "new york"], "tags": ["O", "B-city"]},
     ["'tokens'[1] ('new york') holds whitespace U+0020 (SPACE)", "give each word its own entry in 'tokens'"]),
    ({**ROW, "tokens": ["play", "ja\u2028zz"]},
     ["'tokens'[1] ('ja\\u2028zz') holds whitespace U+2028 (LINE SEPARATOR)", "own entry"]),
    ({**ROW, "tokens": ["play", ""]}, ["'tokens'[1] ('') is empty", "non-empty string"]),
    ({**ROW, "tokens": ["play", 7]}, ["'tokens'[1] (7) is not a string but int", "non-empty string"]),
    ({**ROW, "tags": ["O", "B-genre\u0000"]}, ["'tags'[1] ('B-genre\\x00') holds a control character U+0000 (NUL)",
                                              "without whitespace or control characters"]),
    ({**ROW, "tokens": "play ja\u2028zz", "tags": "O B-genre O"},
     ["U+2028 (LINE SEPARATOR) at character 8 of 'tokens'", "replace it with a space"]),
    ({**ROW, "intent": "Play\u0000Music"}, ["'intent' ('Play\\x00Music') holds a control character U+0000",
                                           "one non-empty string without spaces"]),
])
def test_jsonl_bad_fields_name_file_line_field_and_fix(tmp_path, bad, fragments):
    path = jsonl(tmp_path, bad)
    expect(load_jsonl, path, f"{path}:2", *fragments)


def test_jsonl_byte_order_mark_of_a_concatenated_file(tmp_path):
    path = jsonl(tmp_path, "\ufeff" + json.dumps(ROW), raw=True)
    expect(load_jsonl, path, f"{path}:2", "byte-order mark U+FEFF", "column 1", "files concatenated")


def test_jsonl_non_utf8_names_line(tmp_path):
    path = tmp_path / "train.jsonl"
    latin1 = b'{"tokens": ["play", "j\xe4zz"], "tags": ["O", "B-genre"], "intent": "PlayMusic"}'
    path.write_bytes(json.dumps(ROW).encode() + b"\n" + latin1 + b"\n")
    expect(load_jsonl_split, path, f"{path}:2", "not valid UTF-8: byte 0xE4")


def test_utterance_refuses_control_characters_and_names_them():
    with pytest.raises(ValueError, match=r"token 2 \('ja\\x00zz'\) holds a control character U\+0000 \(NUL\).*fix: "):
        Utterance(("play", "ja\x00zz"), ("O", "B-genre"), "PlayMusic")
