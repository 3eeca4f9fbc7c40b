"""Training entry point: ``python -m intent_model.train`` trains on the bundled corpus and reports accuracy."""
from __future__ import annotations

import argparse

import torch

from .model import IntentSlotGRU, Labels


def _batch(model: IntentSlotGRU, utterances):
    labels = model.labels
    width = max(len(u.tokens) for u in utterances)
    index = {t: i for i, t in enumerate(labels.tokens)}
    ids = torch.zeros(len(utterances), width, dtype=torch.long)
    tags = torch.zeros(len(utterances), width, dtype=torch.long)
    mask = torch.zeros(len(utterances), width)
    for row, u in enumerate(utterances):
        ids[row, : len(u.tokens)] = torch.tensor([index.get(t, 1) for t in u.tokens])
        tags[row, : len(u.tags)] = torch.tensor([labels.tags.index(t) if t in labels.tags else 0 for t in u.tags])
        mask[row, : len(u.tokens)] = 1
    intents = torch.tensor([labels.intents.index(u.intent) if u.intent in labels.intents else 0
                            for u in utterances])
    device = model.embedding.weight.device      # the model may sit on a GPU (--privleak-device=cuda)
    return ids.to(device), mask.to(device), intents.to(device), tags.to(device)


def train(dataset, epochs: int = 12, seed: int = 0, batch_size: int = 32) -> IntentSlotGRU:
    """Train the model on ``dataset.train`` with a fixed seed (deterministic on CPU)."""
    torch.manual_seed(seed)
    model = IntentSlotGRU(Labels.from_utterances(dataset.train))
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-3)
    order = torch.Generator().manual_seed(seed)
    train_set = list(dataset.train)
    for _ in range(epochs):
        model.train()
        for start in range(0, len(train_set), batch_size):
            picks = torch.randperm(len(train_set), generator=order)[:batch_size]
            ids, mask, intents, tags = _batch(model, [train_set[i] for i in picks.tolist()])
            loss = model.loss_from_embeddings(model.embedding(ids), mask, intents, tags).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


@torch.no_grad()
def intent_accuracy(model: IntentSlotGRU, utterances) -> float:
    ids, mask, intents, _ = _batch(model, list(utterances))
    logits, _ = model.forward_embeddings(model.embedding(ids), mask)
    return float((logits.argmax(1) == intents).float().mean())


def main() -> None:
    from pytest_privleak.data.synthetic import generate_snips_like

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = generate_snips_like(seed=args.seed)
    model = train(data, epochs=args.epochs, seed=args.seed)
    print(f"intent accuracy on the test split: {intent_accuracy(model, data.test):.3f}")


if __name__ == "__main__":
    main()
