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
1-based line, what is wrong and the fix.  Trailing blank lines at the end of
a file are ignored; blank lines elsewhere are errors.
"""
from __future__ import annotations

import json
from pathlib import Path

from .bio import BIOError, validate_bio
from .types import NLUDataset, Utterance

THREE_FILES = ("seq.in", "seq.out", "label")
SPLIT_ALIASES = {"train": "train", "valid": "valid", "dev": "valid", "test": "test"}


class DataFormatError(ValueError):
    """Malformed dataset file; ``path`` and ``line`` (1-based, or None) locate the problem."""

    def __init__(self, path: Path | str, line: int | None, problem: str, fix: str) -> None:
        where = f"{path}" if line is None else f"{path}, line {line}"
        super().__init__(f"{where}: {problem}; fix: {fix}")
        self.path, self.line, self.problem, self.fix = Path(path), line, problem, fix


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DataFormatError(path, None, "file is missing", f"create {path.name} next to the other split files")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})",
                              "save the file as UTF-8") from None
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise DataFormatError(path, None, "file is empty", "put one utterance per line, or remove the split")
    return lines


def _check_tags(path: Path, line: int, tokens: list[str], tags: list[str], tokens_from: str) -> None:
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
    seq_in, seq_out, labels = (_read_lines(p) for p in paths)
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


def _field(path: Path, line: int, obj: dict, key: str) -> list[str]:
    if key not in obj:
        raise DataFormatError(path, line, f"missing key {key!r}",
                              'write {"tokens": [...], "tags": [...], "intent": "..."}')
    value = obj[key]
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise DataFormatError(path, line, f"{key!r} is {type(value).__name__}",
                          f"give {key!r} as a list of strings or one whitespace-separated string")


def _parse_jsonl(path: Path) -> list[tuple[int, dict, Utterance]]:
    rows = []
    for i, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            raise DataFormatError(path, i, "line is blank", "remove blank lines between records")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, i, f"invalid JSON ({exc.msg} at column {exc.colno})",
                                  "write one complete JSON object per line") from None
        if not isinstance(obj, dict):
            raise DataFormatError(path, i, f"a JSON {type(obj).__name__} instead of an object",
                                  'write one object per line: {"tokens": ..., "tags": ..., "intent": ...}')
        tokens, tags = _field(path, i, obj, "tokens"), _field(path, i, obj, "tags")
        if not tokens:
            raise DataFormatError(path, i, "'tokens' is empty", "drop empty utterances")
        _check_tags(path, i, tokens, tags, "'tokens'")
        intent = obj.get("intent")
        if not isinstance(intent, str) or not intent.strip() or len(intent.split()) != 1:
            raise DataFormatError(path, i, f"'intent' is {intent!r}",
                                  "give the intent as one non-empty string without spaces")
        rows.append((i, obj, Utterance(tuple(tokens), tuple(tags), intent.strip())))
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
        split = SPLIT_ALIASES.get(obj.get("split"))
        if split is None:
            raise DataFormatError(path, i, f"'split' is {obj.get('split')!r}",
                                  'set "split" to one of train, valid (or dev), test; '
                                  "or use one file per split in a folder")
        splits[split].append(utterance)
    for required in ("train", "valid"):
        if not splits[required]:
            raise DataFormatError(path, None, f"no line has \"split\": \"{required}\"",
                                  f"mark some utterances as {required}")
    return NLUDataset(tuple(splits["train"]), tuple(splits["valid"]), tuple(splits["test"]),
                      name=name or path.stem)
