"""The training loss of the joint intent + slot model (canary-extraction-nlu §4.1) for k stacked models.

What :meth:`~pytest_privleak.targets.joint_nlu.JointNLUNet.loss` computes per
model, with the parameters stacked: word vectors (+ the character CNN over
each word's own letters with CE) -> dropout -> 2 BiLSTM layers (dropout
between them) -> dropout -> intent head (max over time, linear, softmax
cross-entropy) and tag head (linear emissions, CRF negative log-likelihood).
Word dropout to ``<unk>`` and every dropout mask come from each model's own
generator (:class:`.params.Noise`), drawn in that order.
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
class StackedBatch:
    ids: torch.Tensor            # [k, B, L] long
    tags: torch.Tensor           # [k, B, L] long (0 at padding)
    intents: torch.Tensor        # [k, B] long
    mask: torch.Tensor           # [k, B, L] bool
    lengths: torch.Tensor        # [k, B] long
    chars: torch.Tensor | None   # [k, B, L, C] character ids (CE only)
    unk_probs: torch.Tensor | None = None   # [k, V] word-dropout probabilities (None: no word dropout)


@dataclass
class Encoded:
    """One model's split as padded tensors, encoded once: batches are index look-ups."""

    ids: torch.Tensor            # [n, W] long
    tags: torch.Tensor           # [n, W] long
    intents: torch.Tensor        # [n] long
    lengths: torch.Tensor        # [n] long
    chars: torch.Tensor | None   # [n, W, C] long (CE only)
    unk_probs: torch.Tensor | None = None   # [V] this model's word-dropout probabilities, rows padded

    def __len__(self) -> int:
        return self.ids.shape[0]


def encode(items: Sequence[tuple], width: int, device: torch.device,
           unk_probs: torch.Tensor | None = None) -> Encoded:
    """``encode_utterances`` tuples padded at the end to ``width`` tokens.

    ``width`` is fixed per model (its dataset's longest utterance), so a
    model's arithmetic does not depend on the lengths of the models stacked with it.
    ``unk_probs``: the model's word-dropout probabilities, carried into its batches.
    """
    n = len(items)
    ids = torch.full((n, width), PAD_ID, dtype=torch.long)
    tags = torch.zeros((n, width), dtype=torch.long)
    with_chars = n > 0 and items[0][3] is not None
    chars = torch.full((n, width, len(items[0][3][0])), PAD_ID, dtype=torch.long) if with_chars else None
    for b, item in enumerate(items):
        ids[b, :len(item[0])] = torch.tensor(item[0], dtype=torch.long)
        tags[b, :len(item[1])] = torch.tensor(item[1], dtype=torch.long)
        if with_chars:
            chars[b, :len(item[3])] = torch.tensor(item[3], dtype=torch.long)
    intents = torch.tensor([item[2] for item in items], dtype=torch.long)
    lengths = torch.tensor([len(item[0]) for item in items], dtype=torch.long)
    return Encoded(ids.to(device), tags.to(device), intents.to(device), lengths.to(device),
                   None if chars is None else chars.to(device), unk_probs)


def take(sets: Sequence[Encoded], rows: Sequence[torch.Tensor]) -> StackedBatch:
    """The batch of model j's rows ``rows[j]`` of ``sets[j]``, stacked on the model axis."""
    device = sets[0].ids.device
    index = [r.to(device) for r in rows]
    ids = torch.stack([s.ids[r] for s, r in zip(sets, index)])
    lengths = torch.stack([s.lengths[r] for s, r in zip(sets, index)])
    mask = torch.arange(ids.shape[2], device=device).view(1, 1, -1) < lengths.unsqueeze(-1)
    chars = None if sets[0].chars is None else torch.stack([s.chars[r] for s, r in zip(sets, index)])
    unk = None if sets[0].unk_probs is None else torch.stack([s.unk_probs for s in sets])
    return StackedBatch(ids, torch.stack([s.tags[r] for s, r in zip(sets, index)]),
                        torch.stack([s.intents[r] for s, r in zip(sets, index)]), mask, lengths, chars, unk)


def losses(params: dict[str, torch.Tensor], batch: StackedBatch, noise, *, dropout: float) -> torch.Tensor:
    """``[k, B]`` per-utterance loss: intent cross-entropy + CRF negative log-likelihood.

    ``noise``: the models' generators in training mode, None in evaluation
    mode (no dropout, no word dropout).
    """
    ids = batch.ids
    k, size, width = ids.shape
    if noise is not None and batch.unk_probs is not None:
        ids = unk_training.drop_to_unk(ids, batch.unk_probs, noise.uniform(ids.shape[1:]))
    x = layers.embed(params["word_embedding.weight"], ids)
    if batch.chars is not None:
        characters = layers.char_cnn(params, "char_cnn.", batch.chars.flatten(1, 2))
        x = torch.cat([x, characters.view(k, size, width, -1)], dim=-1)
    drop = (lambda t: noise.dropout(t, dropout)) if noise is not None and dropout > 0.0 else None
    if drop is not None:
        x = drop(x)
    hidden = lstm(params, "lstm.", x, batch.mask, num_layers=2, bidirectional=True, between_layers=drop,
                  reverse=reverse_index(batch.lengths, width))
    if drop is not None:
        hidden = drop(hidden)
    pooled = hidden.masked_fill(~batch.mask.unsqueeze(-1), float("-inf")).amax(dim=2)
    logits = layers.linear(pooled, params["intent_head.weight"], params["intent_head.bias"])
    emissions = layers.linear(hidden, params["tag_head.weight"], params["tag_head.bias"])
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.intents.flatten(),
                                           reduction="none").view(k, size)
    return ce - crf.log_likelihood(params, "crf.", emissions, batch.tags, batch.mask)


def zero_padding_row(params: dict[str, torch.Tensor]) -> None:
    """No gradient for the ``<pad>`` rows (``nn.Embedding(padding_idx=PAD_ID)``): word and character tables."""
    for name in ("word_embedding.weight", "char_cnn.embedding.weight"):
        weight = params.get(name)
        if weight is not None and weight.grad is not None:
            weight.grad[:, PAD_ID] = 0.0
