"""The Secret Sharer's shortest-path search for a secret of a known format (Carlini et al. 2019).

The Secret Sharer extracts a secret from a language model by searching the
space of the canary's format (the prefix, then ``n`` slots each filled with one
word of V0) as a graph: a node is a partial secret, an edge fills the next slot
with word ``w`` at cost ``-log2 Pr(w | prefix, partial)``.  Costs are never
negative, so Dijkstra's algorithm pops complete secrets in increasing total
cost, i.e. in decreasing model likelihood: the ``k``-th complete secret popped is
the model's ``k``-th most likely secret, exactly, while expanding only the
partial secrets cheaper than it (far fewer than the ``|V0|^n`` an enumeration
scores when the model has memorised the secret).

Frontier expansions are batched: the cheapest partial secrets are popped
together (up to ``batch`` of them, stopping at the first complete one, so the
order of complete secrets stays exact) and their next-word log-probabilities
come from one batched call of the generator.  A word of several pieces
(``" lilac"`` as two word pieces) is scored piece by piece, batched over all
(node, word) pairs.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

LN2 = math.log(2.0)
#: Partial secrets the search may expand before it stops (cut short: the caller reports it inconclusive).
DEFAULT_MAX_EXPANSIONS = 20_000
DEFAULT_SEARCH_BATCH = 256


@dataclass
class SearchResult:
    """The most likely complete secrets found, most likely first, as V0 indices, and their costs in bits."""

    secrets: list[tuple[int, ...]] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    expansions: int = 0
    #: the expansion budget ran out before ``guesses`` complete secrets were popped
    cut_short: bool = False


def word_log_probs(generator: Any, rows: Sequence[Sequence[int]], pieces: Sequence[Sequence[int]]) -> torch.Tensor:
    """``[B, W]`` natural log-probability of each word (its pieces in turn) continuing each token-id row."""
    log_probs, _ = generator.start(rows)
    firsts = torch.tensor([p[0] for p in pieces], device=log_probs.device)
    out = log_probs.float()[:, firsts].cpu().double()
    multi = [w for w, p in enumerate(pieces) if len(p) > 1]
    if multi:   # later pieces: one batched forward over every (row, word) pair per piece depth
        longest = max(len(pieces[w]) for w in multi)
        for depth in range(1, longest):
            words = [w for w in multi if len(pieces[w]) > depth]
            pairs = [(r, w) for r in range(len(rows)) for w in words]
            extended = [list(rows[r]) + list(pieces[w][:depth]) for r, w in pairs]
            lp, _ = generator.start(extended)
            nxt = torch.tensor([pieces[w][depth] for _, w in pairs], device=lp.device)
            got = lp.float().gather(1, nxt.unsqueeze(1)).squeeze(1).cpu().double()
            r_idx = torch.tensor([r for r, _ in pairs])
            w_idx = torch.tensor([w for _, w in pairs])
            out.index_put_((r_idx, w_idx), got, accumulate=True)
    return out


def shortest_path_search(generator: Any, prefix: Sequence[int], pieces: Sequence[Sequence[int]], length: int, *,
                         guesses: int, max_expansions: int = DEFAULT_MAX_EXPANSIONS,
                         batch: int = DEFAULT_SEARCH_BATCH) -> SearchResult:
    """The ``guesses`` most likely secrets of ``length`` slots over the words ``pieces`` after ``prefix``.

    ``prefix``: token ids (with the beginning-of-sequence token); ``pieces[w]``: token ids of V0 word ``w``.
    Dijkstra over partial secrets with edge cost ``-log2 Pr(word | prefix, partial)``; stops after
    ``guesses`` complete secrets or ``max_expansions`` expanded partial secrets (then ``cut_short``).
    """
    result = SearchResult()
    counter = itertools.count()   # ties pop in insertion order: deterministic
    heap: list[tuple[float, int, tuple[int, ...]]] = [(0.0, next(counter), ())]
    while heap and len(result.secrets) < guesses:
        if len(heap[0][2]) == length:              # the cheapest node is complete: the next most likely secret
            cost, _, secret = heapq.heappop(heap)
            result.secrets.append(secret)
            result.costs.append(cost)
            continue
        if result.expansions >= max_expansions:
            result.cut_short = True
            break
        popped: list[tuple[float, tuple[int, ...]]] = []
        room = min(batch, max_expansions - result.expansions)
        while heap and len(popped) < room and len(heap[0][2]) < length:
            cost, _, partial = heapq.heappop(heap)
            popped.append((cost, partial))
        rows = [list(prefix) + [t for w in partial for t in pieces[w]] for _, partial in popped]
        bits = -word_log_probs(generator, rows, pieces) / LN2                 # [B, W]
        result.expansions += len(popped)
        for (cost, partial), row_bits in zip(popped, bits.tolist()):
            for w, b in enumerate(row_bits):
                heapq.heappush(heap, (cost + max(b, 0.0), next(counter), partial + (w,)))
    return result
