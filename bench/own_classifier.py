"""A team's own intent classifier for the membership bench: an embedding bag and an MLP, written from the torch
docs, trained by its own loop through ``train_own_model`` (references by the same recipe), scored exactly
(``cross_entropy64``: F.cross_entropy's float32 zeros would tie, issue 33)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from pytest_privleak.adapters.log_probs import cross_entropy64


class BagMLP(nn.Module):
    def __init__(self, words: list[str], intents: list[str]) -> None:
        super().__init__()
        self.words = {w: i + 1 for i, w in enumerate(words)}        # 0: a word the training split lacks
        self.intents = {k: i for i, k in enumerate(intents)}
        self.bag = nn.EmbeddingBag(len(words) + 1, 64, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, len(intents)))

    def batch(self, utterances):
        ids = [torch.tensor([self.words.get(w, 0) for w in u.tokens]) for u in utterances]
        offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
        return torch.cat(ids), offsets, torch.tensor([self.intents[u.intent] for u in utterances])

    def forward(self, ids, offsets):
        return self.mlp(self.bag(ids, offsets))


def untrained(dataset) -> BagMLP:
    words = sorted({w for u in dataset.train for w in u.tokens})
    intents = sorted({u.intent for split in (dataset.train, dataset.valid, dataset.test) for u in split})
    return BagMLP(words, intents)


def train(dataset, seed: int = 0, epochs: int = 30, lr: float = 1e-2) -> BagMLP:
    torch.manual_seed(seed)
    model = untrained(dataset)
    rows = list(dataset.train)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        order = torch.randperm(len(rows))
        for start in range(0, len(rows), 32):
            ids, offsets, labels = model.batch([rows[i] for i in order[start:start + 32]])
            loss = F.cross_entropy(model(ids, offsets), labels)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


class Scorer:
    """The SequenceScorer a team writes: each utterance's exact cross-entropy (lower = more likely)."""

    def __init__(self, model: BagMLP) -> None:
        self.model = model

    @torch.no_grad()
    def score(self, utterances):
        ids, offsets, labels = self.model.batch(list(utterances))
        return cross_entropy64(self.model(ids, offsets), labels).numpy()
