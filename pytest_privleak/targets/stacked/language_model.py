"""The training loss of the word-level LSTM language model (:mod:`..lstm_lm`) for k stacked models.

What :meth:`~pytest_privleak.targets.lstm_lm.LSTMLMNet.nll` computes per model:
``<s> x_1 .. x_n`` read through embedding -> dropout -> LSTM (dropout between
layers) -> dropout -> linear over ``|V| + 1`` words, and the summed
cross-entropy of ``x_1 .. x_n </s>``. Word dropout feeds ``<unk>`` for a
word (its target stays the word), drawn from each model's own generator
before the dropout masks.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import unk_training
from ..vocab import PAD_ID
from . import layers
from .lstm import lstm


#: What the padded rows of the stacked output layer hold: no word can be predicted there.
PADDING_FILL = {"output.bias": float("-inf")}


@dataclass
class Encoded:
    """One model's split as padded token ids, encoded once: batches are index look-ups."""

    ids: torch.Tensor        # [n, W] long, padded with PAD_ID
    lengths: torch.Tensor    # [n] long
    boundary: int            # this model's </s> id (its |V|): rows past it are padding
    unk_probs: torch.Tensor | None = None   # [V] this model's word-dropout probabilities, rows padded

    def __len__(self) -> int:
        return self.ids.shape[0]


@dataclass
class StackedBatch:
    ids: torch.Tensor        # [k, B, W]
    lengths: torch.Tensor    # [k, B]
    boundary: torch.Tensor   # [k] long
    unk_probs: torch.Tensor | None = None   # [k, V]


def encode(items: Sequence[Sequence[int]], width: int, device: torch.device, boundary: int,
           unk_probs: torch.Tensor | None = None) -> Encoded:
    """Token-id rows padded at the end to ``width`` (fixed per model: its dataset's longest utterance);
    ``boundary`` (the model's ``</s>`` id) and ``unk_probs`` (its word dropout) are carried into its batches."""
    ids = torch.full((len(items), width), PAD_ID, dtype=torch.long)
    for row, tokens in enumerate(items):
        ids[row, :len(tokens)] = torch.tensor(list(tokens), dtype=torch.long)
    lengths = torch.tensor([len(tokens) for tokens in items], dtype=torch.long)
    return Encoded(ids.to(device), lengths.to(device), boundary, unk_probs)


def take(sets: Sequence[Encoded], rows: Sequence[torch.Tensor]) -> StackedBatch:
    """The batch of model j's rows ``rows[j]`` of ``sets[j]``, stacked on the model axis."""
    device = sets[0].ids.device
    index = [r.to(device) for r in rows]
    unk = None if sets[0].unk_probs is None else torch.stack([s.unk_probs for s in sets])
    return StackedBatch(torch.stack([s.ids[r] for s, r in zip(sets, index)]),
                        torch.stack([s.lengths[r] for s, r in zip(sets, index)]),
                        torch.tensor([s.boundary for s in sets], dtype=torch.long, device=device), unk)


def losses(params: dict[str, torch.Tensor], batch: StackedBatch, noise, *, dropout: float,
           num_layers: int) -> torch.Tensor:
    """``[k, B]`` summed negative log-likelihood (nats) of ``<s> ids </s>`` per utterance.

    ``noise``: the models' generators in training mode, None in evaluation
    mode (no dropout, no word dropout). The output rows past a model's
    ``</s>`` (stack padding, :mod:`.plan`) are no words: their weights are 0
    and their biases ``-inf`` (:data:`PADDING_FILL`), so their logits are
    ``-inf``, their probability 0 and their gradient 0, and they stay so.
    """
    ids, lengths = batch.ids, batch.lengths
    k, size, width = ids.shape
    fed = ids
    if noise is not None and batch.unk_probs is not None:
        fed = unk_training.drop_to_unk(ids, batch.unk_probs, noise.uniform(ids.shape[1:]))
    boundary = batch.boundary.view(k, 1, 1)
    bos = boundary.expand(k, size, 1)
    inputs = torch.cat([bos, fed], dim=2)                                                    # [k, B, W + 1]
    targets = torch.cat([ids, torch.full_like(bos, PAD_ID)], dim=2)
    targets = targets.scatter(2, lengths.unsqueeze(-1), bos)                                 # </s> after the last
    mask = torch.arange(width + 1, device=ids.device).view(1, 1, -1) <= lengths.unsqueeze(-1)
    drop = (lambda t: noise.dropout(t, dropout)) if noise is not None and dropout > 0.0 else None
    x = layers.embed(params["embedding.weight"], inputs)
    if drop is not None:
        x = drop(x)
    hidden = lstm(params, "lstm.", x, mask, num_layers=num_layers, bidirectional=False,
                  between_layers=drop if num_layers > 1 else None)
    if drop is not None:
        hidden = drop(hidden)
    logits = layers.linear(hidden, params["output.weight"], params["output.bias"])         # [k, B, W + 1, rows]
    token = -torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (token * mask).sum(dim=2)


def zero_padding_row(params: dict[str, torch.Tensor]) -> None:
    """No gradient for the ``<pad>`` row (``nn.Embedding(padding_idx=PAD_ID)``)."""
    weight = params["embedding.weight"]
    if weight.grad is not None:
        weight.grad[:, PAD_ID] = 0.0
