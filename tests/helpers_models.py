"""Test-only models that implement the SoftInputModel protocol without our built-in target.

- :class:`QuadraticModel`: a hand-built loss whose minimum over the simplex of
  V0 embeddings is exactly a chosen secret (the answer is known in advance).
- :class:`TinyTransformerJoint`: a differently built joint intent + slot model
  (Transformer encoder, learned positions, mean-pooled intent head, per-token
  softmax tag head, no CRF, no LSTM), trained in seconds on a small corpus, so
  the attack is shown to rely on the protocol alone.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class QuadraticModel:
    """Loss = squared distance of each input row to the embedding of a planted sentence for the intent.

    ``planted[intent]`` is the full token sequence (prefix + secret); the loss
    is zero exactly there, and positive for any other one-hot input.
    """

    def __init__(self, vocabulary: Sequence[str], planted: dict[str, Sequence[str]], dim: int = 8, seed: int = 0):
        self.vocabulary = tuple(vocabulary)
        self._w = torch.randn(len(self.vocabulary), dim, generator=torch.Generator().manual_seed(seed))
        index = {t: i for i, t in enumerate(self.vocabulary)}
        self._planted = {intent: torch.tensor([index[t] for t in toks]) for intent, toks in planted.items()}

    def input_embeddings(self) -> torch.Tensor:
        return self._w

    def loss_from_embeddings(self, embeddings, intents, tags):
        target = torch.stack([self._w[self._planted[i]] for i in intents])
        return ((embeddings - target) ** 2).sum(dim=(1, 2))


class TinyTransformerJoint(nn.Module):
    """One-layer Transformer encoder joint model (intent CE + per-token tag CE)."""

    def __init__(self, vocabulary: Sequence[str], intents: Sequence[str], tags: Sequence[str], dim: int = 48,
                 heads: int = 4, max_len: int = 48, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.vocabulary = ("<pad>",) + tuple(vocabulary)
        self.intents = tuple(intents)
        self.tags = tuple(tags)
        self._intent_index = {x: i for i, x in enumerate(self.intents)}
        self._tag_index = {x: i for i, x in enumerate(self.tags)}
        self.embed = nn.Embedding(len(self.vocabulary), dim)
        self.position = nn.Parameter(torch.randn(max_len, dim) * 0.1)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0, batch_first=True),
            num_layers=1, enable_nested_tensor=False)
        self.intent_head = nn.Linear(dim, len(self.intents))
        self.tag_head = nn.Linear(dim, len(self.tags))

    def _losses(self, embeddings, intent_ids, tag_ids, pad_mask=None):
        hidden = self.encoder(embeddings + self.position[: embeddings.shape[1]], src_key_padding_mask=pad_mask)
        keep = torch.ones(hidden.shape[:2], dtype=hidden.dtype) if pad_mask is None else (~pad_mask).to(hidden.dtype)
        pooled = (hidden * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        intent_loss = nn.functional.cross_entropy(self.intent_head(pooled), intent_ids, reduction="none")
        tag_logits = self.tag_head(hidden)
        tag_loss = nn.functional.cross_entropy(tag_logits.transpose(1, 2), tag_ids, reduction="none")
        return intent_loss + (tag_loss * keep).sum(1)

    # --- SoftInputModel protocol -------------------------------------------------------------
    def input_embeddings(self) -> torch.Tensor:
        return self.embed.weight.detach()

    def loss_from_embeddings(self, embeddings, intents, tags):
        intent_ids = torch.tensor([self._intent_index[i] for i in intents])
        tag_ids = torch.tensor([[self._tag_index[t] for t in row] for row in tags])
        return self._losses(embeddings, intent_ids, tag_ids)


def train_tiny_transformer(dataset, epochs: int = 30, seed: int = 0, batch: int = 32) -> TinyTransformerJoint:
    """Train without regularisation until it memorises (deterministic on CPU)."""
    model = TinyTransformerJoint(dataset.vocabulary, dataset.intents, dataset.tag_set, seed=seed)
    index = {t: i for i, t in enumerate(model.vocabulary)}
    train = list(dataset.train)
    width = max(len(u.tokens) for u in train)
    ids = torch.zeros(len(train), width, dtype=torch.long)
    tag_ids = torch.zeros(len(train), width, dtype=torch.long)
    for r, u in enumerate(train):
        ids[r, : len(u.tokens)] = torch.tensor([index[t] for t in u.tokens])
        tag_ids[r, : len(u.tags)] = torch.tensor([model._tag_index[t] for t in u.tags])
    pad = ids == 0
    intent_ids = torch.tensor([model._intent_index[u.intent] for u in train])
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    order_gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(train), generator=order_gen)
        for s in range(0, len(train), batch):
            rows = order[s: s + batch]
            loss = model._losses(model.embed(ids[rows]), intent_ids[rows], tag_ids[rows], pad[rows]).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
