"""How a built-in target learns what it reads for words it does not know.

A vocabulary that keeps every training token never shows the network
``<unk>`` in training, so the ``<unk>`` row stays at its random initial value
while a share of validation and test tokens (the unseen entities) read it, and
drive the validation loss that early stopping (canary-extraction-nlu §6)
watches. The paper's model reads FastText vectors, which give such words a
trained vector; a table trained from scratch needs the standard remedy, the
singleton replacement of Lample et al. (2016, §4): during training each
occurrence of a token that occurs once in the training split reads ``<unk>``
with probability ``singleton_unk`` (0.5 there), a fresh draw every batch.
With character embeddings the replaced word keeps its own character
features; only its word vector is dropped.

Reserved tokens the training split never has (:mod:`.vocab`) read ``<unk>``;
:func:`tie_untrained_rows` copies the trained ``<unk>`` row into their rows
after training, so that ``W[i]`` is what the network reads for token ``i``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .vocab import UNK_ID, Vocabulary, training_counts

#: Lample et al. (2016): a singleton occurrence reads <unk> with probability 0.5 during training.
DEFAULT_SINGLETON_UNK = 0.5


def check_singleton_unk(value: object) -> None:
    """``ValueError`` naming ``singleton_unk`` unless it is a probability in [0, 1)."""
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or not 0.0 <= value < 1.0):
        raise ValueError(f"config singleton_unk={value!r} must be a number in [0, 1) (the probability that a "
                         f"token seen once in training reads <unk>); fix: use {DEFAULT_SINGLETON_UNK} "
                         "(Lample et al. 2016) or 0.0 to switch it off")


def singleton_mask(vocab: Vocabulary, utterances: Sequence, device: torch.device | str = "cpu") -> torch.Tensor:
    """``[|V|]`` bool: True at the ids of tokens that occur exactly once in ``utterances``."""
    mask = torch.zeros(len(vocab.tokens), dtype=torch.bool)
    once = [t for t, n in training_counts(utterances).items() if n == 1]
    if once:
        mask[torch.tensor(vocab.token_ids(once, strict=True))] = True
    return mask.to(device)


def replace_singletons(ids: torch.Tensor, singletons: torch.Tensor, probability: float) -> torch.Tensor:
    """``ids`` with each singleton occurrence replaced by ``UNK_ID`` with ``probability`` (torch's global RNG)."""
    if probability <= 0.0:
        return ids
    drop = singletons[ids] & (torch.rand(ids.shape, device=ids.device) < probability)
    return ids.masked_fill(drop, UNK_ID)


@torch.no_grad()
def tie_untrained_rows(weight: torch.Tensor, vocab: Vocabulary) -> None:
    """Copy row ``UNK_ID`` of ``weight`` into the rows of the vocabulary's untrained tokens (in place)."""
    if vocab.untrained:
        rows = torch.tensor(vocab.token_ids(vocab.untrained, strict=True), device=weight.device)
        weight[rows] = weight[UNK_ID].clone()
