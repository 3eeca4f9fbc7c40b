"""Loaders for the two common layouts of joint intent + slot data.

Three-file layout (the distributed Snips and ATIS splits): a split folder
holds ``seq.in`` (whitespace tokens), ``seq.out`` (one BIO tag per token) and
``label`` (the intent), one utterance per line, the three files aligned line
by line.  A dataset folder holds ``train/``, ``valid/`` (or ``dev/``) and
optionally ``test/`` split folders.

JSON Lines: one object per line with keys ``tokens`` and ``tags`` (each a list
of strings or one whitespace-separated string) and ``intent``; other keys are
ignored.  A dataset is either one file whose objects also carry ``"split"``
(``train``, ``valid``/``dev`` or ``test``), or a folder with ``train.jsonl``,
``valid.jsonl`` (or ``dev.jsonl``) and optionally ``test.jsonl``.

Every malformed input raises :class:`DataFormatError` naming the file, the
1-based line (``file:line``), what is wrong and the fix.  Trailing blank
lines at the end of a file are ignored; blank lines elsewhere are errors.
Only ``\n`` (or ``\r\n``) ends a line: U+2028, U+0085 and the other
characters ``str.splitlines`` also breaks at are errors, as are NUL, control
characters, a byte-order mark after the start of the file and bytes that are
not UTF-8 (see :mod:`.textfile`).
"""
from __future__ import annotations

import json
from pathlib import Path

from .bio import BIOError, validate_bio
from .textfile import JSONL_FORBIDDEN, TEXT_FORBIDDEN, DataFormatError, character_problem, check_text, read_lines
from .types import NLUDataset, Utterance, token_problem

__all__ = ["DataFormatError", "load_jsonl", "load_jsonl_split", "load_three_file", "load_three_file_split"]

THREE_FILES = ("seq.in", "seq.out", "label")
SPLIT_ALIASES = {"train": "train", "valid": "valid", "dev": "valid", "test": "test"}


def _check_tags(path: Path, line: int, tokens: list[str], tags: list[str], tokens_from: str) -> None:
    for i, tag in enumerate(tags):
        check_text(path, line, tag, f"tag {i + 1}", label=True)
    if len(tokens) != len(tags):
        raise DataFormatError(
            path, line, f"{len(tokens)} tokens in {tokens_from} but {len(tags)} tags",
            "give exactly one BIO tag per whitespace-separated token")
    try:
        validate_bio(tags)
    except BIOError as exc:
        raise DataFormatError(path, line, *str(exc).split("; fix: ", 1)) from None


def load_three_file_split(directory: Path | str) -> tuple[Utterance, ...]:
    """Read one split folder holding ``seq.in``, ``seq.out`` and ``label``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataFormatError(directory, None, "split folder is missing",
                              f"create it with the files {', '.join(THREE_FILES)}")
    paths = [directory / name for name in THREE_FILES]
    seq_in, seq_out, labels = (read_lines(p, TEXT_FORBIDDEN) for p in paths)
    counts = {p.name: len(lines) for p, lines in zip(paths, (seq_in, seq_out, labels))}
    if len(set(counts.values())) != 1:
        shortest = min(counts, key=counts.get)
        raise DataFormatError(
            directory / shortest, counts[shortest] + 1,
            "line counts differ between the three files (" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + ")",
            "keep seq.in, seq.out and label aligned, one utterance per line in each")
    utterances = []
    for i, (text, tag_line, intent) in enumerate(zip(seq_in, seq_out, labels), start=1):
        tokens, tags, intent = text.split(), tag_line.split(), intent.strip()
        for path, empty in ((paths[0], not tokens), (paths[1], not tags), (paths[2], not intent)):
            if empty:
                raise DataFormatError(path, i, "line is blank",
                                      "remove the utterance from all three files or fill it in")
        _check_tags(paths[1], i, tokens, tags, f"{paths[0].name} line {i}")
        if len(intent.split()) != 1:
            raise DataFormatError(paths[2], i, f"intent {intent!r} contains whitespace",
                                  "use one token per intent label")
        check_text(paths[2], i, intent, "the intent", label=True)
        utterances.append(Utterance(tuple(tokens), tuple(tags), intent))
    return tuple(utterances)


def _split_folders(directory: Path, pattern: str) -> dict[str, Path]:
    """Map train/valid/test to the existing entries ``pattern.format(name)`` in ``directory``."""
    found: dict[str, Path] = {}
    for name, split in SPLIT_ALIASES.items():
        path = directory / pattern.format(name)
        if path.exists():
            if split in found:
                raise DataFormatError(directory, None, f"both {found[split].name} and {path.name} exist",
                                      f"keep only one of them as the {split} split")
            found[split] = path
    for split, hint in (("train", "train"), ("valid", "valid (or dev)")):
        if split not in found:
            raise DataFormatError(directory, None, f"no {pattern.format(hint)} split",
                                  f"add {pattern.format(hint)} next to the other splits")
    return found


def load_three_file(directory: Path | str, name: str | None = None) -> NLUDataset:
    """Read a Snips/ATIS-style folder with ``train/``, ``valid/`` (or ``dev/``), optional ``test/``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataFormatError(directory, None, "dataset folder is missing", "pass the folder holding train/ and valid/")
    if (directory / "seq.in").exists():
        raise DataFormatError(directory, None, "this is a single split folder (it holds seq.in)",
                              "pass its parent folder, or call load_three_file_split() for one split")
    folders = _split_folders(directory, "{}")
    splits = {split: load_three_file_split(path) for split, path in folders.items()}
    return NLUDataset(splits["train"], splits["valid"], splits.get("test", ()), name=name or directory.name)


_JSONL_SHAPE = '{"tokens": [...], "tags": [...], "intent": "..."}'


def _field(path: Path, line: int, obj: dict, key: str) -> list[str]:
    """``obj[key]`` as a list of tokens: a list of strings, or one string split on spaces."""
    if key not in obj:
        raise DataFormatError(path, line, f"missing key {key!r}", f"write {_JSONL_SHAPE}")
    value = obj[key]
    if isinstance(value, str):
        bad = TEXT_FORBIDDEN.search(value)
        if bad:
            where = f"at character {bad.start() + 1} of {key!r}"
            raise DataFormatError(path, line, *character_problem(bad.group(), where))
        for i, item in enumerate(value.split()):
            check_text(path, line, item, f"{key!r} word {i + 1}", label=key == "tags")
        return value.split()
    if not isinstance(value, list):
        raise DataFormatError(path, line, f"{key!r} is {type(value).__name__}",
                              f"give {key!r} as a list of strings or one whitespace-separated string")
    for i, item in enumerate(value):
        problem = token_problem(item)
        if problem:
            split_it = (f"give each word its own entry in {key!r} (and its own tag)"
                        if isinstance(item, str) and item.strip() and any(c.isspace() for c in item) else
                        f"make every entry of {key!r} a non-empty string without whitespace or control characters")
            raise DataFormatError(path, line, f"{key!r}[{i}] ({item!r}) {problem}", split_it)
        check_text(path, line, item, f"{key!r}[{i}]", label=key == "tags")
    return value


def _intent(path: Path, line: int, obj: dict) -> str:
    intent = obj.get("intent")
    problem = "is missing" if intent is None else token_problem(intent.strip() if isinstance(intent, str) else intent)
    if problem:
        raise DataFormatError(path, line, f"'intent' ({intent!r}) {problem}",
                              "give the intent as one non-empty string without spaces, e.g. \"PlayMusic\"")
    check_text(path, line, intent.strip(), "'intent'", label=True)
    return intent.strip()


def _json_object(path: Path, line: int, text: str):
    """``json.loads(text)`` with every failure a :class:`DataFormatError` at ``path:line``.

    Besides malformed JSON: nesting deeper than Python's recursion limit
    (a bare ``RecursionError`` before) and an integer over Python's
    4300-digit conversion limit (a ``ValueError`` naming no file before).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, line, f"invalid JSON ({exc.msg} at column {exc.colno})",
                              "write one complete JSON object per line") from None
    except RecursionError:
        depth = max(text.count("["), text.count("{"))
        raise DataFormatError(path, line, f"JSON nested too deeply to read (up to {depth:,} levels of brackets)",
                              f"write a flat record: {_JSONL_SHAPE}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits (int_max_str_digits)
        raise DataFormatError(path, line, f"a JSON value Python cannot convert ({exc})",
                              "write numbers of ordinary size, or quote the value as a string; a record needs "
                              f"only {_JSONL_SHAPE}") from None


def _parse_jsonl(path: Path) -> list[tuple[int, dict, Utterance]]:
    rows = []
    for i, line in enumerate(read_lines(path, JSONL_FORBIDDEN), start=1):
        if not line.strip():
            raise DataFormatError(path, i, "line is blank", "remove blank lines between records")
        obj = _json_object(path, i, line)
        if not isinstance(obj, dict):
            raise DataFormatError(path, i, f"a JSON {type(obj).__name__} instead of an object",
                                  f"write one object per line: {_JSONL_SHAPE}")
        tokens, tags = _field(path, i, obj, "tokens"), _field(path, i, obj, "tags")
        if not tokens:
            raise DataFormatError(path, i, "'tokens' is empty", "drop empty utterances")
        _check_tags(path, i, tokens, tags, "'tokens'")
        rows.append((i, obj, Utterance(tuple(tokens), tuple(tags), _intent(path, i, obj))))
    return rows


def load_jsonl_split(path: Path | str) -> tuple[Utterance, ...]:
    """Read one JSON Lines file as one split (a ``"split"`` key, if any, is ignored)."""
    return tuple(u for _, _, u in _parse_jsonl(Path(path)))


def load_jsonl(path: Path | str, name: str | None = None) -> NLUDataset:
    """Read a JSON Lines dataset: one file with a ``"split"`` key per line, or a folder of split files."""
    path = Path(path)
    if path.is_dir():
        files = _split_folders(path, "{}.jsonl")
        splits = {split: load_jsonl_split(f) for split, f in files.items()}
        return NLUDataset(splits["train"], splits["valid"], splits.get("test", ()), name=name or path.name)
    splits: dict[str, list[Utterance]] = {"train": [], "valid": [], "test": []}
    for i, obj, utterance in _parse_jsonl(path):
        value = obj.get("split")
        split = SPLIT_ALIASES.get(value) if isinstance(value, str) else None
        if split is None:
            kind = "" if value is None or isinstance(value, str) else f" (a JSON {type(value).__name__})"
            raise DataFormatError(path, i, f"'split' is {value!r}{kind}",
                                  'set "split" to one of train, valid (or dev), test; '
                                  "or use one file per split in a folder")
        splits[split].append(utterance)
    for required in ("train", "valid"):
        if not splits[required]:
            raise DataFormatError(path, None, f"no line has \"split\": \"{required}\"",
                                  f"mark some utterances as {required}")
    return NLUDataset(tuple(splits["train"]), tuple(splits["valid"]), tuple(splits["test"]),
                      name=name or path.stem)
