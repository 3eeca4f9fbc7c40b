"""Reading dataset text files line by line, as their authors meant the lines.

``str.splitlines()`` also ends a line at U+2028, U+2029, U+0085, ``\\x0b``,
``\\x0c``, ``\\x1c``-``\\x1e`` and a lone ``\\r``; one such character inside a
token of ``seq.in`` shifts every later utterance against ``seq.out`` and
``label``, and the error (if any) names the wrong line.  Here only ``\\n``
ends a line (``\\r\\n`` too); a byte-order mark is dropped at the start of the
file and is an error anywhere else; NUL, the other line breaks and control
characters are errors naming ``file:line``, the column and the fix, never
silent parts of a token.  Bytes that are not UTF-8 are an error naming the
line and the byte.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

BOM = "\ufeff"
#: In plain-text formats (three-file, CoNLL): control characters other than tab, line and
#: paragraph separators, and the byte-order mark, each with the fix the user needs.
TEXT_FORBIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
#: In JSON Lines: a raw byte-order mark (JSON itself rejects raw control characters in strings,
#: and what a string holds is checked per field, see ``types.token_problem``).
JSONL_FORBIDDEN = re.compile("\ufeff")
_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\r"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class DataFormatError(ValueError):
    """Malformed dataset file; ``path`` and ``line`` (1-based, or None) locate the problem.

    The message reads ``path:line: problem; fix: ...`` (``path: ...`` without a line).
    """

    def __init__(self, path: Path | str, line: int | None, problem: str, fix: str) -> None:
        where = f"{path}" if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {problem}; fix: {fix}")
        self.path, self.line, self.problem, self.fix = Path(path), line, problem, fix


_CONTROL_NAMES = {"\x00": "NUL", "\t": "TAB", "\x0b": "LINE TABULATION", "\x0c": "FORM FEED",
                  "\r": "CARRIAGE RETURN", "\x1c": "FILE SEPARATOR", "\x1d": "GROUP SEPARATOR",
                  "\x1e": "RECORD SEPARATOR", "\x1f": "UNIT SEPARATOR", "\x7f": "DELETE", "\x85": "NEXT LINE"}


def describe_char(char: str) -> str:
    """``U+2028 (LINE SEPARATOR)``: a character named so that an invisible one can be found."""
    name = unicodedata.name(char, None) or _CONTROL_NAMES.get(char)
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def character_problem(char: str, where: str) -> tuple[str, str]:
    """``(problem, fix)`` for a forbidden character of :data:`TEXT_FORBIDDEN` found ``where`` ("at column 4")."""
    name = describe_char(char)
    if char == BOM:
        return (f"byte-order mark {name} {where} (files concatenated after saving with a BOM?)",
                "delete it; only the very first character of a file may be a byte-order mark")
    if char == "\x00":
        return (f"NUL character {name} {where} (a binary file, or UTF-16 text without its byte-order mark?)",
                "save the file as UTF-8 text and delete the NUL characters")
    if char in _LINE_BREAKS:
        return (f"{name} {where}: other tools read it as a line break, but only \\n (or \\r\\n) ends a line "
                "here", "replace it with a space where it separates tokens, otherwise delete it")
    return f"control character {name} {where}", "delete it (a token holds printable characters only)"


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as text without a leading byte-order mark; :class:`DataFormatError` naming line and byte."""
    if data.startswith(_UTF16_BOMS):
        raise DataFormatError(path, 1, "the file is UTF-16 (it starts with a UTF-16 byte-order mark)",
                              "save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataFormatError(
            path, line, f"not valid UTF-8: byte 0x{data[exc.start]:02X} at byte {column} of the line "
            f"(offset {exc.start} of the file): {exc.reason}",
            f"save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8 {path.name}` if it is Latin-1)") from None
    return text[1:] if text.startswith(BOM) else text


def split_lines(path: Path, text: str, forbidden: re.Pattern = TEXT_FORBIDDEN) -> list[str]:
    """Lines of ``text`` split on ``\\n`` only (a ``\\r`` before it dropped); forbidden characters are errors."""
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if line.endswith("\r"):
            line = lines[number - 1] = line[:-1]
        bad = forbidden.search(line)
        if bad:
            raise DataFormatError(path, number, *character_problem(bad.group(), f"at column {bad.start() + 1}"))
    return lines


def read_lines(path: Path | str, forbidden: re.Pattern = TEXT_FORBIDDEN) -> list[str]:
    """The lines of a UTF-8 file, trailing blank lines dropped; errors name ``file:line`` and the fix."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "file is missing", f"create {path.name}, or pass the right path")
    lines = split_lines(path, decode_utf8(path, path.read_bytes()), forbidden)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise DataFormatError(path, None, "file is empty", "put one utterance per line, or remove the split")
    return lines


#: Whitespace that ``str.split()`` splits on besides space and tab (and the line breaks refused above):
#: inside a column file it would cut a token in two, and the last column (the tag) would still read well.
ODD_WHITESPACE = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str, *, label: bool) -> tuple[str, str] | None:
    """``(problem, fix)`` for a token or label that cannot be used as it reads, or None.

    A lone surrogate (from a broken ``\\uD800`` escape in JSON) cannot be
    written back as UTF-8: the dataset would load and the report or cache
    would fail later.  In a label (a tag or an intent) an invisible format
    character (zero-width space, joiner, soft hyphen: Unicode category Cf)
    makes ``B-PER\\u200b`` a class of its own that prints like ``B-PER``.
    """
    bad = _SURROGATE.search(text)
    if bad:
        return (f"holds a lone surrogate {describe_char(bad.group())} at character {bad.start() + 1} (half of a "
                "UTF-16 pair, e.g. from a broken \\ud83d escape)",
                "write the character itself in UTF-8 (or both halves of its \\uXXXX\\uXXXX escape), or delete it")
    if label:
        for i, char in enumerate(text):
            if unicodedata.category(char) == "Cf":
                return (f"holds the invisible format character {describe_char(char)} at character {i + 1}, so the "
                        "label differs from the one it prints as",
                        "delete the character (labels are plain names such as B-PER or PlayMusic)")
    return None


def check_text(path: Path | str, line: int, text: str, what: str, *, label: bool) -> None:
    """Raise :class:`DataFormatError` at ``path:line`` when :func:`text_problem` finds one in ``text``."""
    found = text_problem(text, label=label)
    if found:
        raise DataFormatError(path, line, f"{what} ({text!r}) {found[0]}", found[1])


def check_column_line(path: Path | str, line: int, text: str, tag_column: int = -1) -> None:
    """The checks of one non-blank line of a column (CoNLL) file beyond the line-level ones of :func:`split_lines`.

    Columns are separated by spaces or tabs only: a no-break space (U+00A0)
    or another Unicode space inside a token is refused instead of silently
    splitting it (the first half kept as the token, the rest read as columns).
    The tag column must be a plain label (:func:`text_problem`).
    """
    odd = ODD_WHITESPACE.search(text)
    if odd:
        raise DataFormatError(path, line, f"{describe_char(odd.group())} at column {odd.start() + 1}: it would split "
                              "the token in two (only spaces and tabs separate columns here)",
                              "replace it with a plain space if it separates columns; inside a token, delete it or "
                              "write the token without it (e.g. '_' or '-' in its place)")
    columns = text.split()
    tag_index = tag_column if tag_column >= 0 else len(columns) + tag_column
    for number, column in enumerate(columns):
        is_tag = number == tag_index
        check_text(path, line, column, "the tag" if is_tag else f"column {number + 1}", label=is_tag)
