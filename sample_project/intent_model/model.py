"""Our team's joint intent + slot model: word embeddings, one BiGRU, two softmax heads.

It is deliberately not the plugin's built-in BiLSTM-CRF: ``SoftInputAdapter``
shows the few lines a team writes so the plugin's attacks can reach its own
model (the soft-input protocol of pytest-privleak).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch
from torch import nn

if TYPE_CHECKING:
    import numpy as np

PAD, UNK = "<pad>", "<unk>"


@dataclass(frozen=True)
class Labels:
    tokens: tuple[str, ...]
    intents: tuple[str, ...]
    tags: tuple[str, ...]

    @classmethod
    def from_utterances(cls, utterances) -> "Labels":
        tokens = sorted({t for u in utterances for t in u.tokens})
        return cls((PAD, UNK, *tokens), tuple(sorted({u.intent for u in utterances})),
                   tuple(sorted({t for u in utterances for t in u.tags})))


class IntentSlotGRU(nn.Module):
    def __init__(self, labels: Labels, dim: int = 48, hidden: int = 48) -> None:
        super().__init__()
        self.labels = labels
        self.embedding = nn.Embedding(len(labels.tokens), dim, padding_idx=0)
        self.encoder = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.intent_head = nn.Linear(2 * hidden, len(labels.intents))
        self.tag_head = nn.Linear(2 * hidden, len(labels.tags))

    def forward_embeddings(self, embeddings: torch.Tensor, mask: torch.Tensor):
        states, _ = self.encoder(embeddings)
        return self.heads(states, mask)

    def heads(self, states: torch.Tensor, mask: torch.Tensor):
        """Intent and tag logits from the BiGRU's states ``[B, L, 2 * hidden]``."""
        pooled = (states * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        return self.intent_head(pooled), self.tag_head(states)

    def loss_from_embeddings(self, embeddings, mask, intent_ids, tag_ids) -> torch.Tensor:
        """Per-example loss: intent cross-entropy + mean token cross-entropy."""
        return self.loss_from_states(self.encoder(embeddings)[0], mask, intent_ids, tag_ids)

    def loss_from_states(self, states, mask, intent_ids, tag_ids) -> torch.Tensor:
        """:meth:`loss_from_embeddings` from the BiGRU's states."""
        intent_logits, tag_logits = self.heads(states, mask)
        intent_loss = nn.functional.cross_entropy(intent_logits, intent_ids, reduction="none")
        token_loss = nn.functional.cross_entropy(tag_logits.transpose(1, 2), tag_ids, reduction="none")
        return intent_loss + (token_loss * mask).sum(1) / mask.sum(1)


class SoftInputAdapter:
    """Exposes ``IntentSlotGRU`` through pytest-privleak's ``SoftInputModel`` protocol."""

    def __init__(self, model: IntentSlotGRU) -> None:
        self.model = model.eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.vocabulary = list(model.labels.tokens)
        self.content_hash = None

    def input_embeddings(self) -> torch.Tensor:
        return self.model.embedding.weight.detach()

    def loss_from_embeddings(self, embeddings: torch.Tensor, intents: Sequence[str],
                             tags: Sequence[Sequence[str]]) -> torch.Tensor:
        labels = self.model.labels
        intent_ids = torch.tensor([labels.intents.index(i) for i in intents], device=embeddings.device)
        tag_ids = torch.tensor([[labels.tags.index(t) for t in row] for row in tags], device=embeddings.device)
        mask = torch.ones(embeddings.shape[:2], device=embeddings.device)
        return self.model.loss_from_embeddings(embeddings, mask, intent_ids, tag_ids)

    @torch.no_grad()
    def score(self, utterances) -> "np.ndarray":
        """Per-utterance training loss (pytest-privleak's ``SequenceScorer`` protocol, read by membership tests)."""
        from .train import _batch

        ids, mask, intents, tags = _batch(self.model, list(utterances))
        return self.model.loss_from_embeddings(self.model.embedding(ids), mask, intents, tags).cpu().numpy()

    @torch.no_grad()
    def score_with_shared_prefix(self, prefix: Sequence[str], vocabulary: Sequence[str], choices, *,
                                 intent: str, tags: Sequence[str]) -> "np.ndarray":
        """``score`` of the sentences ``prefix + [vocabulary[c] for c in row]`` (one per row of ``choices``),
        labelled ``intent`` and ``tags``, with the GRU reading the prefix once (pytest-privleak's
        ``SharedPrefixScorer`` protocol: exposure scores a 10^6-secret space this way in seconds)."""
        from pytest_privleak.adapters.recurrent_prefix import prefix_outputs

        labels, index = self.model.labels, {t: i for i, t in enumerate(self.vocabulary)}
        rows = self.model.embedding.weight
        device = rows.device                       # the model may sit on a GPU (--privleak-device=cuda)
        choices = torch.as_tensor(choices, dtype=torch.long, device=device)
        states = prefix_outputs(self.model.encoder, rows[[index.get(t, 1) for t in prefix]],
                                rows[[index.get(w, 1) for w in vocabulary]], choices)
        count, width = states.shape[:2]
        tag_ids = torch.tensor([labels.tags.index(t) if t in labels.tags else 0 for t in tags],
                               device=device).expand(count, -1)
        intent_ids = torch.full((count,), labels.intents.index(intent) if intent in labels.intents else 0,
                                device=device)
        ones = torch.ones(count, width, device=device)
        return self.model.loss_from_states(states, ones, intent_ids, tag_ids).cpu().numpy()
