"""Scoring many sentences that share one prefix under a causal LM: the prefix once, the suffixes in batches.

Exposure (the Secret Sharer, quoted as eq. 1 of d-exposure-discriminative §2)
ranks a canary ``p_1..p_m s_1..s_n`` among every candidate secret of its
space: ``10^4`` sentences for a 4-digit pin, all with the same prefix. A
causal LM reads left to right, so ``Pr(p)`` and the prefix's keys and
values are the same for every candidate: they are computed once (one
forward pass of the prefix, ``use_cache=True``), the cache is expanded over a
batch of candidates, and only the secret's pieces go through the model:

    -log2 Pr(p s) = -log2 Pr(p) - log2 Pr(s_1 | p) - sum_t log2 Pr(s_t | p s_<t)

The last piece of a candidate is never fed (no score reads what follows
it), and candidates whose other pieces agree share one row: a 4-digit pin
space feeds the distinct first three digits, a thousand rows of three
pieces, instead of ten thousand rows of nine.

Candidates are given as indices into a word list (``choices [B, n]``), so
the pieces of a batch are built by tensor indexing, never one Python object
per candidate. The pieces of each word are those the tokenizer gives it
after the prefix and a space (:class:`PrefixPlan`); a plan is used only when
the sentences it builds are exactly the tokenizer's own pieces of the joined
text on a sample of candidates, otherwise the caller scores the plain way.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .log_probs import log_prob_of

LN2 = math.log(2.0)
#: Largest float32 logits tensor ``[rows, pieces, |V|]`` one suffix pass may build (bytes).
LOGITS_BUDGET = 1 << 27


@dataclass(frozen=True)
class PrefixPlan:
    """Piece ids of a prefix and of each word after it.

    ``common``: the ids every candidate starts with (beginning-of-sequence
    token included); ``tail``: ids the tokenizer puts after the last word
    (e.g. ``[SEP]``); ``pieces [|V|, p]``: each word's pieces, padded;
    ``lengths [|V|]``: how many pieces each word has.
    """

    common: torch.Tensor
    tail: torch.Tensor
    pieces: torch.Tensor
    lengths: torch.Tensor

    @property
    def uniform(self) -> bool:
        """Every word has the same number of pieces: candidates need no padding."""
        return bool((self.lengths == self.lengths[0]).all())

    def suffixes(self, choices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(ids [B, w], mask [B, w] or None)``: each candidate's pieces then the tail, right-padded.

        ``mask`` is None when every row has the same length.
        """
        rows = self.pieces[choices]                                   # [B, n, p]
        batch = rows.shape[0]
        tail = self.tail.expand(batch, -1)
        if self.uniform:
            return torch.cat([rows[..., :int(self.lengths[0])].reshape(batch, -1), tail], dim=1), None
        width = rows.shape[1] * rows.shape[2]
        keep = (torch.arange(rows.shape[2]) < self.lengths[choices].unsqueeze(-1)).reshape(batch, width)
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)  # real pieces first, in order
        ids = torch.cat([rows.reshape(batch, width).gather(1, order), torch.zeros_like(tail)], dim=1)
        lengths = keep.sum(1)
        if tail.shape[1]:
            ids.scatter_(1, lengths.unsqueeze(1) + torch.arange(tail.shape[1]), tail)
        lengths = lengths + tail.shape[1]
        ids = ids[:, :int(lengths.max())]
        mask = torch.arange(ids.shape[1]) < lengths.unsqueeze(1)
        return ids.masked_fill(~mask, 0), mask


def _common_length(rows: Sequence[Sequence[int]]) -> int:
    first = rows[0]
    n = min(len(r) for r in rows)
    for i in range(n):
        if any(r[i] != first[i] for r in rows):
            return i
    return n


def make_plan(encode: Callable[[list[str]], list[list[int]]], prefix: Sequence[str],
              vocabulary: Sequence[str], length: int) -> PrefixPlan | None:
    """The plan of ``prefix`` and ``vocabulary`` under ``encode`` (texts -> ids as scored), or None.

    None when the tokenizer's pieces of a word depend on more than the prefix and a space (checked on
    sample candidates of ``length`` words against ``encode`` of the joined text), or when no token comes
    before the first word (nothing to condition it on).
    """
    words = list(vocabulary)
    head = " ".join(prefix)
    texts = [head + " " + w if head else w for w in words]
    prefix_row, *rows = encode([head, *texts])
    common = _common_length([prefix_row, *rows])
    tail = prefix_row[common:]
    if common == 0 or any(len(r) <= common + len(tail) or r[len(r) - len(tail):] != tail for r in rows):
        return None
    pieces = [r[common:len(r) - len(tail)] for r in rows]
    width = max(len(p) for p in pieces)
    plan = PrefixPlan(common=torch.tensor(prefix_row[:common], dtype=torch.long),
                      tail=torch.tensor(tail, dtype=torch.long),
                      pieces=torch.tensor([p + [0] * (width - len(p)) for p in pieces], dtype=torch.long),
                      lengths=torch.tensor([len(p) for p in pieces], dtype=torch.long))
    k = len(words)
    sample = torch.stack([(torch.arange(length) * step + start) % k
                          for start in range(min(k, 8)) for step in (0, 1, 3)])
    ids, mask = plan.suffixes(sample)
    built = [plan.common.tolist() + (ids[i] if mask is None else ids[i][mask[i]]).tolist()
             for i in range(ids.shape[0])]
    joined = [" ".join([*prefix, *(words[i] for i in row.tolist())]) for row in sample]
    return plan if built == encode(joined) else None


@functools.lru_cache(maxsize=64)
def _forward_parameters(model_class: type) -> frozenset[str]:
    import inspect

    return frozenset(inspect.signature(model_class.forward).parameters)


def _cache_kwarg(model: Any) -> str:
    """The name the model's forward takes its key/value cache by (``cache`` in newer transformers)."""
    return "cache" if "cache" in _forward_parameters(type(model)) else "past_key_values"


def logits_but_last(model: Any, input_ids: torch.Tensor, **options: Any) -> torch.Tensor:
    """Next-piece logits ``[B, L-1, |V|]`` at every position but the last, whose prediction no score uses.

    When the model takes ``logits_to_keep`` its LM head runs on those positions only.
    """
    if "logits_to_keep" in _forward_parameters(type(model)):
        keep = torch.arange(input_ids.shape[1] - 1, device=input_ids.device)
        return model(input_ids=input_ids, logits_to_keep=keep, **options).logits
    return model(input_ids=input_ids, **options).logits[:, :-1]


def _layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer ``(keys, values)`` of a transformers cache (a ``DynamicCache`` or legacy tuples)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v, *_ in cache]


def _expanded(layers: list[tuple[torch.Tensor, torch.Tensor]], batch: int) -> Any:
    from transformers import DynamicCache

    return DynamicCache([(k.expand(batch, *k.shape[1:]), v.expand(batch, *v.shape[1:])) for k, v in layers])


def token_logp(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log Pr(target)`` (float64) under each row of logits, exact near 0 (:func:`.log_probs.log_prob_of`)."""
    return log_prob_of(logits, targets)


@torch.no_grad()
def shared_prefix_bits(model: Any, plan: PrefixPlan, choices: torch.Tensor,
                       check: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``-log2 Pr(prefix, suffix)`` (float64 ``[B]``) of each candidate, the prefix through the model once.

    A suffix ``s_1..s_w`` needs the model's outputs after ``p``, ``p s_1``, ..,
    ``p s_1..s_(w-1)``: the first comes with the prefix, the others from
    feeding ``s_1..s_(w-1)`` (never the last piece, whose prediction no score
    reads). Candidates that share those inputs (the 10 pins ``4 8 2 *``) share
    one row: the distinct rows go through the model, in passes of at most
    :data:`LOGITS_BUDGET` bytes of logits, each pass on the prefix's cache
    expanded over its rows. ``check`` refuses non-finite log-probabilities (it raises).
    """
    device = model.get_input_embeddings().weight.device
    kwarg = _cache_kwarg(model)
    common = plan.common.to(device).unsqueeze(0)
    out = model(input_ids=common, use_cache=True)
    prefix_logits = out.logits[0]
    prefix_logp = check(token_logp(prefix_logits[:-1], common[0, 1:])).sum()
    first_logp = check(torch.log_softmax(prefix_logits[-1].double(), dim=-1))   # one row: float64 throughout
    ids, mask = plan.suffixes(choices.cpu())
    ids = ids.to(device)
    totals = first_logp[ids[:, 0]].double()
    if ids.shape[1] > 1:
        layers = _layers(out[kwarg] if kwarg in out else out["past_key_values"])
        mask = mask.to(device) if mask is not None else None
        totals = totals + _rest_logp(model, kwarg, layers, common.shape[1], ids, mask, check)
    return -(totals + prefix_logp) / LN2


def _rest_logp(model: Any, kwarg: str, layers: list, prefix_length: int, ids: torch.Tensor,
               mask: torch.Tensor | None, check: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``sum_(t >= 2) log Pr(s_t | p s_<t)`` (float64 ``[B]``), each distinct ``s_1..s_(w-1)`` fed once."""
    inputs, targets = ids[:, :-1], ids[:, 1:]
    keys = inputs if mask is None else torch.cat([inputs, mask[:, :-1].long()], dim=1)
    distinct, row_of = torch.unique(keys, dim=0, return_inverse=True)
    width = inputs.shape[1]
    vocab = model.get_output_embeddings().weight.shape[0] if model.get_output_embeddings() is not None else \
        model.config.vocab_size
    rows_per_pass = max(1, LOGITS_BUDGET // (4 * width * vocab))
    positions = torch.arange(width, device=ids.device)
    logp = torch.zeros(targets.shape, dtype=torch.float64, device=ids.device)
    ones = torch.ones((1, prefix_length), dtype=torch.long, device=ids.device)
    for start in range(0, distinct.shape[0], rows_per_pass):
        rows = distinct[start:start + rows_per_pass]
        batch = rows.shape[0]
        options = {kwarg: _expanded(layers, batch), "use_cache": True}
        if mask is not None:
            options["attention_mask"] = torch.cat([ones.expand(batch, -1), rows[:, width:]], dim=1)
        logits = model(input_ids=rows[:, :width], **options).logits.float()        # [batch, width, |V|]
        normaliser = check(torch.logsumexp(logits, dim=-1))
        top = logits.argmax(dim=-1)                                                  # [batch, width]
        top_logp = token_logp(logits, top)               # the likeliest piece's, to full precision (float64)
        mine = ((row_of >= start) & (row_of < start + batch)).nonzero().squeeze(1)  # candidates of these rows
        local = (row_of[mine] - start).unsqueeze(1)
        at = (local, positions.unsqueeze(0))
        wanted = targets[mine]
        # a piece that is not the likeliest has Pr <= 1/2: logit - logsumexp loses no precision that matters
        picked = torch.where(wanted == top[at], top_logp[at],
                             logits[local, positions.unsqueeze(0), wanted].double() - normaliser[at].double())
        logp[mine] = check(picked)
    if mask is not None:
        logp = logp.masked_fill(~mask[:, 1:], 0.0)
    return logp.sum(dim=1)
