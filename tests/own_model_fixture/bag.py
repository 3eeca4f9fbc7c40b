"""A bag-of-words intent classifier with the soft-input protocol, trained by a plain loop (deterministic on CPU)."""
from __future__ import annotations

import torch
from torch import nn

CALLS = {"train": 0}


class Bag(nn.Module):
    def __init__(self, words, intents, dim: int = 8) -> None:
        super().__init__()
        self.words, self.intents = list(words), list(intents)
        self.embedding = nn.Embedding(len(self.words), dim)
        self.head = nn.Linear(dim, len(self.intents))


def vocabulary(dataset):
    return sorted({t for u in dataset.train for t in u.tokens}), sorted({u.intent for u in dataset.train})


def untrained(dataset) -> Bag:
    return Bag(*vocabulary(dataset))


def wrong_width(dataset) -> Bag:
    return Bag(*vocabulary(dataset), dim=4)


def train(dataset, seed: int = 0, steps: int = 20) -> Bag:
    CALLS["train"] += 1
    model = Bag(*vocabulary(dataset))
    index = {w: i for i, w in enumerate(model.words)}
    rows = list(dataset.train)[:64]
    ids = [torch.tensor([index[t] for t in u.tokens]) for u in rows]
    target = torch.tensor([model.intents.index(u.intent) for u in rows])
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        pooled = torch.stack([model.embedding(i).mean(0) for i in ids])
        loss = nn.functional.cross_entropy(model.head(pooled), target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model


def not_a_module(dataset, seed: int = 0):
    return {"weights": [1, 2, 3]}


class Adapter:
    """What a team writes to expose its module through a protocol; holds the module as ``model``."""

    def __init__(self, model: Bag) -> None:
        self.model = model


def reversed_words(dataset) -> Bag:
    """The same architecture with its word list reversed: loads the weights strictly, reads them differently."""
    words, intents = vocabulary(dataset)
    return Bag(words[::-1], intents)
