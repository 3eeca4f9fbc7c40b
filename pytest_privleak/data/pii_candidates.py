"""Same-format candidate spaces of a PII item: what its exposure ranks it against.

Exposure (Carlini et al., the Secret Sharer, §3; d-exposure-discriminative eq. 1)
ranks a secret among every alternative the attacker considers equally likely a
priori.  For a planted canary that is its pattern's space ``V0^n``; for PII
found in real data it is the set of strings of the same format:

- :class:`SlotSpace`: a template of fixed text and slots, each slot one of a
  tuple of alternatives (a phone number's digits, ``first x last`` name lists,
  a house number's digits with the street kept).  Size = product of the slots.
- :class:`LuhnSpace`: a card-like number's digits, the last one the Luhn check
  digit of the others, so every candidate is a valid-looking card number
  (``10^(d-1)`` candidates for ``d`` digits).
- :class:`ListSpace`: the item among an explicit list (e.g. the other e-mail
  addresses found in the data), when no generator of the format is known.

Candidates are numbered ``0..size-1`` (mixed radix, first slot most
significant) so that spaces of ``10^10`` phone numbers are sampled without
being listed; ``item_number`` is the item's own number (excluded from the
references, as the exposure attack excludes the canary).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["CandidateSpace", "ListSpace", "LuhnSpace", "SlotSpace", "digit_space", "luhn_check_digit", "luhn_valid"]

#: Largest space numbered with int64 (about 9.2e18 candidates).
MAX_SPACE = 2 ** 62
DIGITS = tuple("0123456789")


@runtime_checkable
class CandidateSpace(Protocol):
    """Strings of one format: ``size`` of them, numbered; ``item_number`` is the item's own."""

    size: int
    item_number: int

    def texts(self, numbers: np.ndarray) -> list[str]:
        """The candidates numbered ``numbers`` (``int64 [K]``)."""


def _check_size(size: int, what: str) -> int:
    if size > MAX_SPACE:
        raise ValueError(f"the candidate space of {what} has {size:.3g} strings, more than {MAX_SPACE:.3g}; fix: "
                         "give the detector a candidates() method with a smaller same-format space")
    return int(size)


class SlotSpace:
    """Fixed text and slots of alternatives; ``item`` gives each slot's value (it must be one of them)."""

    def __init__(self, parts: Sequence[str | tuple[str, ...]], item: Sequence[str]) -> None:
        self.parts = tuple(p if isinstance(p, str) else tuple(p) for p in parts)
        self.slots = tuple(p for p in self.parts if not isinstance(p, str))
        item = tuple(item)
        if len(item) != len(self.slots) or any(v not in s for v, s in zip(item, self.slots)):
            raise ValueError(f"item values {item!r} do not fill the {len(self.slots)} slot(s) of this space")
        self.radices = np.array([len(s) for s in self.slots], dtype=np.int64)
        self.size = _check_size(math.prod(len(s) for s in self.slots), "this template")
        places = [1] * len(self.slots)
        for i in range(len(self.slots) - 2, -1, -1):
            places[i] = places[i + 1] * len(self.slots[i + 1])
        self.places = np.array(places, dtype=np.int64)
        self.item_number = int(sum(s.index(v) * p for s, v, p in zip(self.slots, item, places)))

    def digits(self, numbers: np.ndarray) -> np.ndarray:
        """Slot indices ``[K, slots]`` of the candidates numbered ``numbers``."""
        numbers = np.asarray(numbers, dtype=np.int64)
        return (numbers[:, None] // self.places[None, :]) % self.radices[None, :]

    def texts(self, numbers: np.ndarray) -> list[str]:
        digits = self.digits(numbers)
        columns = []
        slot = 0
        for part in self.parts:
            if isinstance(part, str):
                columns.append(np.full(digits.shape[0], part, dtype=object))
            else:
                columns.append(np.asarray(part, dtype=object)[digits[:, slot]])
                slot += 1
        return ["".join(row) for row in zip(*columns)] if columns else [""] * digits.shape[0]


def digit_space(text: str) -> SlotSpace:
    """Every digit of ``text`` a slot of ``0..9``, everything else kept (same separators, same length)."""
    parts = [c if not c.isdigit() else DIGITS for c in re.findall(r"\d|\D+", text)]
    return SlotSpace(parts, [c for c in text if c.isdigit()])


def luhn_check_digit(payload: np.ndarray) -> np.ndarray:
    """Luhn check digit of each row of ``payload`` (``int [K, d]`` digits, most significant first)."""
    payload = np.asarray(payload, dtype=np.int64)
    doubled = payload[:, ::-1].copy()
    doubled[:, 0::2] *= 2                       # from the right, every other digit next to the check digit
    doubled = np.where(doubled > 9, doubled - 9, doubled)
    return (10 - doubled.sum(axis=1) % 10) % 10


def luhn_valid(digits: str) -> bool:
    """Whether the digit string passes the Luhn check (ISO/IEC 7812-1 Annex B)."""
    if len(digits) < 2 or not digits.isdigit():
        return False
    row = np.array([[int(c) for c in digits[:-1]]], dtype=np.int64)
    return int(luhn_check_digit(row)[0]) == int(digits[-1])


class LuhnSpace:
    """Card-like numbers of ``text``'s format: free digits, the last one their Luhn check digit."""

    def __init__(self, text: str) -> None:
        digits = [c for c in text if c.isdigit()]
        if not luhn_valid("".join(digits)):
            raise ValueError("a Luhn space needs an item that passes the Luhn check")
        self.template = digit_space(text)
        self.free = len(digits) - 1
        self.size = _check_size(10 ** self.free, "a card-like number")
        self.item_number = int("".join(digits[:-1]))

    def texts(self, numbers: np.ndarray) -> list[str]:
        numbers = np.asarray(numbers, dtype=np.int64)
        payload = (numbers[:, None] // (10 ** np.arange(self.free - 1, -1, -1, dtype=np.int64))) % 10
        full = np.concatenate([payload, luhn_check_digit(payload)[:, None]], axis=1)
        template_numbers = (full * self.template.places[None, :]).sum(axis=1)
        return self.template.texts(template_numbers)


class ListSpace:
    """The item among an explicit list of same-kind strings (duplicates dropped, order kept)."""

    def __init__(self, values: Sequence[str], item: str) -> None:
        self.values = tuple(dict.fromkeys(values))
        if item not in self.values:
            raise ValueError("the item must be one of the listed candidates")
        self.size = len(self.values)
        self.item_number = self.values.index(item)

    def texts(self, numbers: np.ndarray) -> list[str]:
        return [self.values[int(i)] for i in np.asarray(numbers, dtype=np.int64)]
