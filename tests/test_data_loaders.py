"""Three-file and JSON Lines loaders: good input, and every malformed case names file + line + fix."""
import json

import pytest

from pytest_privleak.data import (DataFormatError, load_jsonl, load_jsonl_split, load_three_file,
                                  load_three_file_split)

GOOD = {
    "seq.in": "play some jazz\nweather in new york\n",
    "seq.out": "O O B-genre\nO O B-city I-city\n",
    "label": "PlayMusic\nGetWeather\n",
}


def write_split(folder, **overrides):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**GOOD, **overrides}.items():
        if text is not None:
            (folder / name.replace("_", ".")).write_text(text, encoding="utf-8")
    return folder


def error(call, *args):
    with pytest.raises(DataFormatError) as info:
        call(*args)
    return info.value


def test_three_file_split_reads_aligned_lines(tmp_path):
    utts = load_three_file_split(write_split(tmp_path / "train"))
    assert [u.text for u in utts] == ["play some jazz", "weather in new york"]
    assert utts[1].tags == ("O", "O", "B-city", "I-city") and utts[1].intent == "GetWeather"


@pytest.mark.parametrize("valid_name", ["valid", "dev"])
def test_three_file_dataset(tmp_path, valid_name):
    for split in ("train", valid_name, "test"):
        write_split(tmp_path / split)
    d = load_three_file(tmp_path)
    assert d.sizes == {"train": 2, "valid": 2, "test": 2} and d.name == tmp_path.name
    assert d.intents == ("GetWeather", "PlayMusic")


def test_three_file_test_split_is_optional(tmp_path):
    write_split(tmp_path / "train"), write_split(tmp_path / "valid")
    assert load_three_file(tmp_path).test == ()


@pytest.mark.parametrize("overrides, file, line, fragment", [
    ({"seq_out": "O O B-genre\nO O B-city\n"}, "seq.out", 2, "4 tokens in seq.in line 2 but 3 tags"),
    ({"seq_out": "O O I-genre\nO O B-city I-city\n"}, "seq.out", 1, "tag 3 ('I-genre') follows 'O'"),
    ({"seq_out": "O B-x I-genre\nO O B-city I-city\n"}, "seq.out", 1, "follows 'B-x'"),
    ({"seq_in": ""}, "seq.in", None, "file is empty"),
    ({"label": None}, "label", None, "file is missing"),
    ({"label": "PlayMusic\n"}, "label", 2, "line counts differ"),
    ({"seq_in": "play some jazz\n \nx\n", "seq_out": "O O B-genre\n \nO\n", "label": "A\nB\nC\n"},
     "seq.in", 2, "line is blank"),
    ({"label": "PlayMusic\nGet Weather\n"}, "label", 2, "contains whitespace"),
])
def test_three_file_errors_name_file_line_and_fix(tmp_path, overrides, file, line, fragment):
    err = error(load_three_file_split, write_split(tmp_path / "train", **overrides))
    assert err.path.name == file and err.line == line
    message = str(err)
    assert str(tmp_path / "train" / file) in message and fragment in message and "fix:" in message
    if line is not None:
        assert f"{tmp_path / 'train' / file}:{line}:" in message


def test_three_file_dataset_errors(tmp_path):
    write_split(tmp_path / "train")
    assert "no valid (or dev) split" in str(error(load_three_file, tmp_path))
    write_split(tmp_path / "valid"), write_split(tmp_path / "dev")
    assert "both valid and dev exist" in str(error(load_three_file, tmp_path))
    assert "single split folder" in str(error(load_three_file, tmp_path / "train"))
    assert "missing" in str(error(load_three_file, tmp_path / "nope"))


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


ROW = {"tokens": "play some jazz", "tags": ["O", "O", "B-genre"], "intent": "PlayMusic"}


def test_jsonl_single_file_with_split_key(tmp_path):
    rows = [{**ROW, "split": "train"}, {**ROW, "tokens": ["play", "some", "blues"], "split": "dev"},
            {**ROW, "split": "test", "id": 7}]
    d = load_jsonl(write_jsonl(tmp_path / "all.jsonl", rows))
    assert d.sizes == {"train": 1, "valid": 1, "test": 1} and d.valid[0].text == "play some blues"
    assert d.name == "all"


def test_jsonl_folder_of_split_files(tmp_path):
    for split in ("train", "valid"):
        write_jsonl(tmp_path / f"{split}.jsonl", [ROW, ROW])
    d = load_jsonl(tmp_path)
    assert d.sizes == {"train": 2, "valid": 2, "test": 0}
    assert load_jsonl_split(tmp_path / "train.jsonl") == d.train


@pytest.mark.parametrize("bad, fragment", [
    ('{"tokens": "a b", "tags": "O O", "intent": "X"', "invalid JSON"),
    ('[1, 2]', "a JSON list instead of an object"),
    ({"tokens": "a b", "intent": "X"}, "missing key 'tags'"),
    ({"tokens": "a b", "tags": "O", "intent": "X"}, "2 tokens in 'tokens' but 1 tags"),
    ({"tokens": "a b", "tags": "O I-x", "intent": "X"}, "tag 2 ('I-x') follows 'O'"),
    ({"tokens": "a b", "tags": "B-y I-x", "intent": "X"}, "follows 'B-y'"),
    ({"tokens": "a b", "tags": 3, "intent": "X"}, "'tags' is int"),
    ({"tokens": "a b", "tags": "O O", "intent": ""}, "'intent' ('') is empty"),
    ({"tokens": "", "tags": "", "intent": "X"}, "'tokens' is empty"),
])
def test_jsonl_errors_name_file_line_and_fix(tmp_path, bad, fragment):
    path = write_jsonl(tmp_path / "train.jsonl", [ROW, bad])
    err = error(load_jsonl_split, path)
    assert err.line == 2 and f"{path}:2:" in str(err)
    assert fragment in str(err) and "fix:" in str(err)


def test_jsonl_file_level_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert f"{empty}: file is empty" in str(error(load_jsonl_split, empty))
    assert "file is missing" in str(error(load_jsonl_split, tmp_path / "absent.jsonl"))
    no_split = write_jsonl(tmp_path / "a.jsonl", [ROW])
    assert f"{no_split}:1: 'split' is None" in str(error(load_jsonl, no_split))
    only_train = write_jsonl(tmp_path / "b.jsonl", [{**ROW, "split": "train"}])
    assert 'no line has "split": "valid"' in str(error(load_jsonl, only_train))


def test_generated_corpus_round_trips_through_both_formats(tmp_path):
    from pytest_privleak.data import generate_snips_like

    corpus = generate_snips_like(60, 10, 10, seed=4)
    rows = []
    for split, utts in corpus.splits().items():
        folder = tmp_path / "three" / split
        folder.mkdir(parents=True)
        for name, field in (("seq.in", "tokens"), ("seq.out", "tags")):
            (folder / name).write_text("".join(" ".join(getattr(u, field)) + "\n" for u in utts))
        (folder / "label").write_text("".join(u.intent + "\n" for u in utts))
        rows += [{**u.to_json(), "split": split} for u in utts]
    assert load_three_file(tmp_path / "three").content_hash() == corpus.content_hash()
    assert load_jsonl(write_jsonl(tmp_path / "all.jsonl", rows)).content_hash() == corpus.content_hash()


def test_byte_order_mark_at_file_start_is_dropped_and_crlf_ends_lines(tmp_path):
    # Before issue 12 the BOM became part of the first token ('\ufeffplay').
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "seq.in").write_bytes("\ufeffplay some jazz\r\nweather in new york\r\n".encode())
    (folder / "seq.out").write_bytes("\ufeffO O B-genre\nO O B-city I-city\n".encode())
    (folder / "label").write_bytes(b"\xef\xbb\xbfPlayMusic\r\nGetWeather")
    utts = load_three_file_split(folder)
    assert [u.tokens[0] for u in utts] == ["play", "weather"] and utts[0].intent == "PlayMusic"
    jsonl = tmp_path / "all.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(json.dumps({**ROW, "split": s}) for s in ("train", "dev")).encode())
    assert load_jsonl(jsonl).train[0].tokens == ("play", "some", "jazz")


def test_non_breaking_space_still_separates_tokens(tmp_path):
    # Only line breaks, control characters and BOMs are refused; Unicode spaces split tokens as str.split does.
    utts = load_three_file_split(write_split(tmp_path / "train", seq_in="play some\u00a0jazz\nweather in new york\n"))
    assert utts[0].tokens == ("play", "some", "jazz")
