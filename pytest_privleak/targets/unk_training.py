"""How a built-in target learns what it reads for words it does not know.

A vocabulary that keeps every training token never shows the network
``<unk>`` in training, so the ``<unk>`` row stays at its random initial value
while a share of validation and test tokens (the unseen entities) read it, and
drive the validation loss that early stopping (canary-extraction-nlu §6)
watches. The paper's model reads FastText vectors, which give such words a
trained vector; a table trained from scratch needs the standard remedy, word
dropout for unknown words (Kiperwasser & Goldberg 2016, §6): during training
an occurrence of a token seen ``#(w)`` times in the training split reads
``<unk>`` with probability ``alpha / (alpha + #(w))`` (``alpha = 0.25``
there; a token seen once: 0.2, ten times: 0.024), a fresh draw every batch.
Rare words stand in for the unknown ones, as in the singleton replacement of
Lample et al. (2016), but the rule also trains ``<unk>`` on a corpus without
singletons (the bundled one has none). With character embeddings the
replaced word keeps its own character features; only its word vector drops.

Reserved tokens the training split never has (:mod:`.vocab`) read ``<unk>``;
:func:`tie_untrained_rows` copies the trained ``<unk>`` row into their rows
after training, so that ``W[i]`` is what the network reads for token ``i``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .vocab import UNK_ID, Vocabulary, training_counts

#: Kiperwasser & Goldberg (2016): alpha of the word-dropout probability alpha / (alpha + #(w)).
DEFAULT_UNK_ALPHA = 0.25


def check_unk_alpha(value: object) -> None:
    """``ValueError`` naming ``unk_alpha`` unless it is a finite number >= 0."""
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or value < 0.0):
        raise ValueError(f"config unk_alpha={value!r} must be a finite number >= 0 (a token seen #(w) times "
                         "in training reads <unk> with probability unk_alpha / (unk_alpha + #(w))); fix: use "
                         f"{DEFAULT_UNK_ALPHA} (Kiperwasser & Goldberg 2016) or 0 to switch word dropout off")


def unk_probabilities(vocab: Vocabulary, utterances: Sequence, alpha: float,
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """``[|V|]`` float: ``alpha / (alpha + #(w))`` at the id of each token of ``utterances``, 0 elsewhere."""
    probs = torch.zeros(len(vocab.tokens), dtype=torch.float32)
    counts = training_counts(utterances)
    if alpha > 0.0 and counts:
        tokens = list(counts)
        n = torch.tensor([counts[t] for t in tokens], dtype=torch.float32)
        probs[torch.tensor(vocab.token_ids(tokens, strict=True))] = alpha / (alpha + n)
    return probs.to(device)


def drop_to_unk(ids: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
    """``ids`` with each occurrence replaced by ``UNK_ID`` with ``probabilities[id]`` (torch's global RNG)."""
    drop = torch.rand(ids.shape, device=ids.device) < probabilities[ids]
    return ids.masked_fill(drop, UNK_ID)


@torch.no_grad()
def tie_untrained_rows(weight: torch.Tensor, vocab: Vocabulary) -> None:
    """Copy row ``UNK_ID`` of ``weight`` into the rows of the vocabulary's untrained tokens (in place)."""
    if vocab.untrained:
        rows = torch.tensor(vocab.token_ids(vocab.untrained, strict=True), device=weight.device)
        weight[rows] = weight[UNK_ID].clone()
