"""The training loss of the BiLSTM-CRF tagger (:mod:`..ner_tagger`, d-exposure-discriminative §4.1) for k models.

What :meth:`~pytest_privleak.targets.ner_tagger.NERTaggerNet.nll` computes per
model: word vectors -> dropout -> one BiLSTM layer -> dropout -> linear
emissions -> CRF negative log-likelihood (:mod:`.crf`). Word dropout to
``<unk>`` and the dropout masks come from each model's own generator.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import unk_training
from ..vocab import PAD_ID
from . import crf, layers
from .lstm import lstm, reverse_index


@dataclass
class Encoded:
    """One model's split as padded tensors, encoded once: batches are index look-ups."""

    ids: torch.Tensor        # [n, W] long
    tags: torch.Tensor       # [n, W] long
    lengths: torch.Tensor    # [n] long
    unk_probs: torch.Tensor | None = None   # [V] this model's word-dropout probabilities, rows padded

    def __len__(self) -> int:
        return self.ids.shape[0]


@dataclass
class StackedBatch:
    ids: torch.Tensor        # [k, B, W]
    tags: torch.Tensor       # [k, B, W]
    mask: torch.Tensor       # [k, B, W] bool
    lengths: torch.Tensor    # [k, B]
    unk_probs: torch.Tensor | None = None   # [k, V]


def encode(items: Sequence[tuple[Sequence[int], Sequence[int]]], width: int, device: torch.device,
           unk_probs: torch.Tensor | None = None) -> Encoded:
    """``(token ids, tag ids)`` rows padded at the end to ``width`` (fixed per model: its longest sentence);
    ``unk_probs``: the model's word-dropout probabilities, carried into its batches."""
    ids = torch.full((len(items), width), PAD_ID, dtype=torch.long)
    tags = torch.zeros((len(items), width), dtype=torch.long)
    for row, (tok, tag) in enumerate(items):
        ids[row, :len(tok)] = torch.tensor(list(tok), dtype=torch.long)
        tags[row, :len(tag)] = torch.tensor(list(tag), dtype=torch.long)
    lengths = torch.tensor([len(tok) for tok, _ in items], dtype=torch.long)
    return Encoded(ids.to(device), tags.to(device), lengths.to(device), unk_probs)


def take(sets: Sequence[Encoded], rows: Sequence[torch.Tensor]) -> StackedBatch:
    """The batch of model j's rows ``rows[j]`` of ``sets[j]``, stacked on the model axis."""
    device = sets[0].ids.device
    index = [r.to(device) for r in rows]
    ids = torch.stack([s.ids[r] for s, r in zip(sets, index)])
    lengths = torch.stack([s.lengths[r] for s, r in zip(sets, index)])
    mask = torch.arange(ids.shape[2], device=device).view(1, 1, -1) < lengths.unsqueeze(-1)
    unk = None if sets[0].unk_probs is None else torch.stack([s.unk_probs for s in sets])
    return StackedBatch(ids, torch.stack([s.tags[r] for s, r in zip(sets, index)]), mask, lengths, unk)


def losses(params: dict[str, torch.Tensor], batch: StackedBatch, noise, *, dropout: float) -> torch.Tensor:
    """``[k, B]`` CRF negative log-likelihood per sentence; ``noise`` None in evaluation mode (no dropout)."""
    ids = batch.ids
    if noise is not None and batch.unk_probs is not None:
        ids = unk_training.drop_to_unk(ids, batch.unk_probs, noise.uniform(ids.shape[1:]))
    drop = (lambda t: noise.dropout(t, dropout)) if noise is not None and dropout > 0.0 else None
    x = layers.embed(params["embedding.weight"], ids)
    if drop is not None:
        x = drop(x)
    hidden = lstm(params, "lstm.", x, batch.mask, num_layers=1, bidirectional=True,
                  reverse=reverse_index(batch.lengths, ids.shape[2]))
    if drop is not None:
        hidden = drop(hidden)
    emissions = layers.linear(hidden, params["emit.weight"], params["emit.bias"])
    return -crf.log_likelihood(params, "crf.", emissions, batch.tags, batch.mask)


def zero_padding_row(params: dict[str, torch.Tensor]) -> None:
    """No gradient for the ``<pad>`` row (``nn.Embedding(padding_idx=PAD_ID)``)."""
    weight = params["embedding.weight"]
    if weight.grad is not None:
        weight.grad[:, PAD_ID] = 0.0
