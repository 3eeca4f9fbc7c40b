"""Entity-level F1 as conlleval counts it: a predicted entity is right only with its exact span and type.

The paper's tagger is reported by this figure (d-exposure-discriminative §4.1:
"an F1 of 90.0 on CoNLL-2003"; Targer's ``f1-connl`` evaluator).  Chunks are
read the way the CoNLL-2000 ``conlleval`` script reads them, for BIO, IOB1,
IOBES and BILOU tags alike: a chunk starts at ``B``/``S``/``U``, or at an
``I``/``E``/``L`` that does not continue a chunk of its type; it ends before
a ``B``/``S``/``U``/``O``, after an ``E``/``S``/``L``/``U``, or where the type
changes.  Precision, recall and F1 are micro-averaged over all entities of all
types (``n_correct / n_pred``, ``n_correct / n_gold``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

_SINGLE = ("S", "U")
_BEGIN = ("B",) + _SINGLE
_LAST = ("E", "L") + _SINGLE


def _split(tag: str) -> tuple[str, str]:
    if tag in ("O", ""):
        return "O", ""
    prefix, _, kind = tag.partition("-")
    return (prefix, kind) if kind else ("I", prefix)   # a bare type reads as inside (conlleval's "raw" tags)


def entity_spans(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """The chunks of one tag sequence as ``(start, end exclusive, type)``."""
    spans: set[tuple[int, int, str]] = set()
    start, kind = None, ""
    prev_prefix = "O"
    for i, tag in enumerate(tags):
        prefix, typ = _split(tag)
        ends = start is not None and (prefix in _BEGIN or prefix == "O" or typ != kind or prev_prefix in _LAST)
        if ends:
            spans.add((start, i, kind))
            start = None
        if prefix != "O" and start is None:
            start, kind = i, typ
        prev_prefix = prefix
    if start is not None:
        spans.add((start, len(tags), kind))
    return spans


@dataclass(frozen=True)
class EntityF1:
    """Micro-averaged entity precision, recall and F1 with their counts."""

    precision: float
    recall: float
    f1: float
    n_gold: int
    n_pred: int
    n_correct: int

    def to_json(self) -> dict:
        return asdict(self)


def entity_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> EntityF1:
    """conlleval's entity F1 of ``predicted`` tag sequences against ``gold`` (same lengths, in order)."""
    if len(gold) != len(predicted):
        raise ValueError(f"entity_f1 got {len(gold)} gold and {len(predicted)} predicted sequences; "
                         "fix: one predicted tag sequence per gold one, in order")
    n_gold = n_pred = n_correct = 0
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sequence {i}: {len(g)} gold tags but {len(p)} predicted; fix: one tag per token")
        gs, ps = entity_spans(g), entity_spans(p)
        n_gold, n_pred, n_correct = n_gold + len(gs), n_pred + len(ps), n_correct + len(gs & ps)
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return EntityF1(precision, recall, f1, n_gold, n_pred, n_correct)
