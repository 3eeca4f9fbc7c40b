"""BIO slot-tag validation.

Joint intent + slot models (canary-extraction-nlu §4.1) tag each token with
``O``, ``B-<slot>`` (a slot starts) or ``I-<slot>`` (the slot goes on).  The
CRF head learns transitions between these tags, so an ``I-x`` that does not
continue an ``x`` slot is a data error we reject up front.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

#: Characters no tag may hold: whitespace, control characters (NUL, C0/C1 line breaks), the byte-order mark.
_NOT_IN_TAG = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ufeff]")


class BIOError(ValueError):
    """A tag sequence breaks the BIO scheme; ``position`` is the 0-based offending index."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def slot_of(tag: str) -> str | None:
    """The slot name of ``B-x``/``I-x`` (``"x"``), or ``None`` for ``O``."""
    return None if tag == "O" else tag[2:]


def validate_bio(tags: Sequence[str]) -> None:
    """Raise :class:`BIOError` naming the position and the fix if ``tags`` is not valid BIO.

    Valid tags are ``O``, ``B-<slot>`` and ``I-<slot>`` with a non-empty slot
    name free of whitespace and control characters; ``I-<slot>`` must follow
    ``B-<slot>`` or ``I-<slot>`` of the same slot.
    """
    previous = "O"
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not (
            tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2 and not _NOT_IN_TAG.search(tag))
        ):
            raise BIOError(
                f"tag {i + 1} ({tag!r}) is not a BIO tag; fix: use 'O', 'B-<slot>' or 'I-<slot>'", i
            )
        if tag.startswith("I-") and slot_of(previous) != slot_of(tag):
            after = "the start" if i == 0 else f"{previous!r}"
            raise BIOError(
                f"tag {i + 1} ({tag!r}) follows {after}, but an I- tag must continue the same slot; "
                f"fix: change it to 'B-{slot_of(tag)}' (a new slot starts here) or make the tag "
                f"before it 'B-{slot_of(tag)}'/'I-{slot_of(tag)}'",
                i,
            )
        previous = tag


def spans_to_bio(length: int, spans: Sequence[tuple[int, int, str]]) -> tuple[str, ...]:
    """BIO tags for ``length`` tokens given ``(start, end_exclusive, slot)`` spans."""
    tags = ["O"] * length
    for start, end, slot in spans:
        tags[start] = f"B-{slot}"
        for j in range(start + 1, end):
            tags[j] = f"I-{slot}"
    return tuple(tags)
