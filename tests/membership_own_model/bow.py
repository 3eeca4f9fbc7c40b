"""A bag-of-words intent classifier and its SequenceScorer adapter (per-utterance cross-entropy), CPU-deterministic."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn


class BagOfWords(nn.Module):
    def __init__(self, words, intents, dim: int = 16) -> None:
        super().__init__()
        self.words, self.intents = ["<unk>", *words], list(intents)
        self.embedding = nn.EmbeddingBag(len(self.words), dim, mode="mean")
        self.head = nn.Linear(dim, len(self.intents))

    def losses(self, utterances) -> torch.Tensor:
        index = {w: i for i, w in enumerate(self.words)}
        ids = [torch.tensor([index.get(t, 0) for t in u.tokens]) for u in utterances]
        offsets = torch.tensor([0, *np.cumsum([len(i) for i in ids])[:-1].tolist()])
        logits = self.head(self.embedding(torch.cat(ids), offsets))
        target = torch.tensor([self.intents.index(u.intent) for u in utterances])
        return nn.functional.cross_entropy(logits, target, reduction="none")


def untrained(dataset) -> BagOfWords:
    return BagOfWords(sorted({t for u in dataset.train for t in u.tokens}), dataset.intents)


def train(dataset, seed: int = 0, epochs: int = 200) -> BagOfWords:
    model = untrained(dataset)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    rows = list(dataset.train)
    for _ in range(epochs):
        loss = model.losses(rows).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model


class Scorer:
    """The team's adapter: the SequenceScorer protocol over the module."""

    def __init__(self, model: BagOfWords) -> None:
        self.model = model

    @torch.no_grad()
    def score(self, utterances) -> np.ndarray:
        return self.model.losses(list(utterances)).double().numpy()
