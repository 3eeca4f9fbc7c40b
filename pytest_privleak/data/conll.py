"""CoNLL-style column files for named-entity data (the CoNLL-2003 layout of d-exposure-discriminative §4.1).

One token per line, whitespace-separated columns (the token first, the
entity tag in ``tag_column``, by default the last); a blank line ends a
sentence; ``-DOCSTART-`` lines are skipped.  Tags may be IOB2/BIO (``B-PER``
starts an entity), IOB1 (the original CoNLL-2003: ``I-PER`` may start one,
``B-`` only separates two adjacent entities of one class) or BIOES; the
latter two are converted to BIO, the scheme the rest of the package uses.

Sentences become :class:`~.types.Utterance` objects with the placeholder
intent :data:`NER_INTENT`, so NER data shares the dataset type, the loaders'
checks and the cache keys of the NLU data.  Every malformed line raises
:class:`~.textfile.DataFormatError` naming ``file:line`` and the fix; only
``\n`` (or ``\r\n``) ends a line, and NUL, U+2028 and the other line breaks
of ``str.splitlines``, control characters, a byte-order mark after the start
and bytes that are not UTF-8 are such errors too.
"""
from __future__ import annotations

from pathlib import Path

from .bio import BIOError, validate_bio
from .loaders import SPLIT_ALIASES
from .textfile import TEXT_FORBIDDEN, DataFormatError, check_column_line, decode_utf8, split_lines
from .types import NLUDataset, Utterance

NER_INTENT = "ner"
SCHEMES = ("bio", "iob1", "bioes")
SPLIT_FILES = {"train": ("train.txt", "train.conll"), "valid": ("valid.txt", "dev.txt", "valid.conll", "dev.conll"),
               "test": ("test.txt", "test.conll")}


def _to_bio(tags: list[str], scheme: str) -> list[str]:
    if scheme == "bioes":
        return ["B-" + t[2:] if t.startswith("S-") else "I-" + t[2:] if t.startswith("E-") else t for t in tags]
    if scheme == "iob1":
        out, previous = [], "O"
        for t in tags:
            starts = t.startswith("I-") and (previous == "O" or previous[2:] != t[2:])
            out.append("B-" + t[2:] if starts else t)
            previous = t
        return out
    return tags


def load_conll_split(path: Path | str, *, scheme: str = "bio", tag_column: int = -1) -> tuple[Utterance, ...]:
    """Read one column file as a split of utterances (see the module docstring)."""
    path = Path(path)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r} is not one of {SCHEMES}")
    if not path.is_file():
        raise DataFormatError(path, None, "file is missing", "pass an existing CoNLL column file")
    lines = split_lines(path, decode_utf8(path, path.read_bytes()), TEXT_FORBIDDEN)
    sentences: list[Utterance] = []
    tokens: list[str] = []
    tags: list[str] = []
    first_line = 0
    width = None

    def flush() -> None:
        if not tokens:
            return
        bio = _to_bio(tags, scheme)
        try:
            validate_bio(bio)
        except BIOError as exc:
            problem, _, fix = str(exc).partition("; fix: ")
            hint = "; or pass scheme='iob1' for original CoNLL-2003 tags" if scheme == "bio" else ""
            raise DataFormatError(path, first_line + exc.position, f"{problem} (scheme {scheme!r})",
                                  fix + hint) from None
        sentences.append(Utterance(tuple(tokens), tuple(bio), NER_INTENT))
        tokens.clear()
        tags.clear()

    for number, line in enumerate(lines, start=1):
        columns = line.split()
        if not columns:
            flush()
            width = None
            continue
        if columns[0] == "-DOCSTART-":
            continue
        check_column_line(path, number, line, tag_column)
        if len(columns) < 2:
            raise DataFormatError(path, number, f"one column ({line.strip()!r}) where a token and a tag are needed",
                                  "write 'token ... tag' separated by spaces or tabs, one token per line")
        if width is not None and len(columns) != width:
            raise DataFormatError(path, number, f"{len(columns)} columns, but the sentence so far has {width}",
                                  "give every line of a sentence the same columns (a space inside a token?)")
        try:
            tag = columns[tag_column]
        except IndexError:
            raise DataFormatError(path, number, f"no column {tag_column} (the line has {len(columns)})",
                                  "pass tag_column= the index of the entity-tag column") from None
        if tag != "O" and not (len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES"):
            raise DataFormatError(path, number, f"{tag!r} is not an entity tag",
                                  "use O, B-X, I-X (or S-X, E-X with scheme='bioes'); check tag_column")
        if tag[0] in "SE" and tag != "O" and scheme != "bioes":
            raise DataFormatError(path, number, f"BIOES tag {tag!r} in a {scheme!r} file", "pass scheme='bioes'")
        if not tokens:
            first_line, width = number, len(columns)
        tokens.append(columns[0])
        tags.append(tag)
    flush()
    if not sentences:
        raise DataFormatError(path, None, "no sentence found",
                              "write one 'token tag' line per token, blank lines between sentences")
    return tuple(sentences)


def load_conll(directory: Path | str, *, scheme: str = "bio", tag_column: int = -1,
               name: str | None = None) -> NLUDataset:
    """Read a folder with ``train.txt``, ``valid.txt`` (or ``dev.txt``) and optionally ``test.txt``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataFormatError(directory, None, "dataset folder is missing",
                              "pass the folder holding train.txt and valid.txt (or dev.txt)")
    splits: dict[str, tuple[Utterance, ...]] = {}
    for split, names in SPLIT_FILES.items():
        found = [directory / n for n in names if (directory / n).is_file()]
        if len(found) > 1:
            raise DataFormatError(directory, None, f"both {found[0].name} and {found[1].name} exist",
                                  f"keep only one {split} file")
        if found:
            splits[SPLIT_ALIASES[split]] = load_conll_split(found[0], scheme=scheme, tag_column=tag_column)
        elif split != "test":
            raise DataFormatError(directory, None, f"no {split} file ({' or '.join(names)})",
                                  f"add {names[0]} next to the other split files")
    return NLUDataset(splits["train"], splits["valid"], splits.get("test", ()), name=name or directory.name)


def write_conll(path: Path | str, utterances) -> None:
    """Write utterances as a two-column file (token, BIO tag), atomically."""
    from ..atomic import write_text_atomic

    text = "\n\n".join("\n".join(f"{t} {g}" for t, g in zip(u.tokens, u.tags)) for u in utterances)
    write_text_atomic(path, text + "\n")
