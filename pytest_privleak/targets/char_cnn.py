"""Character-level word representation, the "Char. Emb. (CE)" defence of canary-extraction-nlu §6.

As in Ma & Hovy (2016): embed each character of a word, run a 1-D
convolution over them and max-pool over positions, giving one vector per
word that is concatenated to its word embedding.
"""
from __future__ import annotations

import torch
from torch import nn

from .vocab import PAD_ID


class CharCNN(nn.Module):
    """``[N, C]`` character ids (0 = padding) -> ``[N, filters]`` word vectors."""

    def __init__(self, n_chars: int, char_dim: int, filters: int, kernel: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=PAD_ID)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size=kernel, padding=kernel // 2)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(char_ids).transpose(1, 2)          # [N, char_dim, C]
        h = self.conv(x)                                       # [N, filters, C]
        pad = (char_ids == PAD_ID).unsqueeze(1)
        pad = pad & ~pad.all(dim=2, keepdim=True)              # an all-padding row keeps its values
        return h.masked_fill(pad, float("-inf")).amax(dim=2)
